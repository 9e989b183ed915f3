// Package server is the HTTP face of Caduceus: the routes (all in routes.go),
// the middleware every route shares (authentication, scope check, audit
// record, metrics, RFC 9457 problems) and the MCP endpoint.
//
// config.go holds what a Server is built from (Config, and the Route, Call
// and Tool a gate hands it) and the Server itself; this file builds it
// (New) and is its front door (ServeHTTP, Logged).
package server

import (
	"log/slog"
	"net/http"
	"strings"
)

// New builds a server and its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxLLMBodyBytes <= 0 {
		cfg.MaxLLMBodyBytes = DefaultMaxLLMBodyBytes
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if cfg.IdempotencyWait <= 0 {
		cfg.IdempotencyWait = DefaultIdempotencyWait
	}
	if cfg.Keys == nil {
		cfg.Keys, _ = cfg.Store.(RequestKeys)
	}
	s := &Server{
		cfg:  cfg,
		log:  cfg.Logger,
		mux:  http.NewServeMux(),
		keys: cfg.Keys,
	}
	if p := cfg.Previous; p != nil {
		s.metrics = p.metrics
	} else {
		s.metrics = newMetrics()
	}
	s.cfg.Previous = nil // not kept: a chain of reloads holds no old server
	s.tools = append([]Tool{whoamiTool()}, cfg.Tools...)
	s.envelopes = map[string]Envelope{}
	s.cors = http.NewServeMux()
	s.origins = map[string][]string{}
	for _, rt := range cfg.Routes {
		_, path, _ := strings.Cut(rt.Pattern, " ")
		if rt.Envelope != nil {
			s.envelopes[path] = rt.Envelope
		}
		if len(rt.AllowedOrigins) > 0 {
			if _, seen := s.origins[path]; !seen {
				s.cors.Handle(path, http.NotFoundHandler())
			}
			s.origins[path] = rt.AllowedOrigins
		}
	}
	s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.crossOrigin(w, r) {
		return // a preflight, answered
	}
	if !s.throughEdge(w, r) {
		return
	}
	r, finish := s.boundBody(w, r)
	defer finish()
	s.mux.ServeHTTP(w, r)
}

// Logged is the server with its request log: what serve listens with.
func (s *Server) Logged() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, r, logged := s.logRequest(w, r)
		defer logged()
		s.ServeHTTP(w, r)
	})
}
