// Package server is the HTTP face of Caduceus: the routes (all in routes.go),
// the middleware every route shares (authentication, scope check, audit
// record, metrics, RFC 9457 problems) and the MCP endpoint.
package server

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trail"
)

// Pinger reports whether the store answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// AuditReader lists recent audit records.
type AuditReader interface {
	Tail(ctx context.Context, f store.AuditFilter) ([]audit.Record, error)
}

// Config is what a Server is built from: the core's services and the
// routes and tools of the gates it serves.
type Config struct {
	Auth    *auth.Service
	Audit   audit.Log
	Records AuditReader
	Store   Pinger
	Logger  *slog.Logger
	Version string
	// Routes and Tools are the enabled gates' (gate.Routes, gate.Tools),
	// registered after the core's, each the one way (Route).
	Routes []Route
	Tools  []Tool

	// Console is the operator console (package console), served under
	// /console with its own session cookie; nil: no console. The API
	// routes never accept that cookie.
	Console http.Handler
	// Trails serve GET /v1/conversations[/{id}]; nil: not served.
	Trails trail.Reader

	// AuditSigner signs the checkpoints GET /v1/audit/checkpoint serves,
	// made from AuditSource (the store's chains); nil: no checkpoints.
	AuditSigner ed25519.PrivateKey
	AuditSource audit.Source
	// MCPAllowedOrigins are the browser origins /mcp accepts
	// ("https://app.example.com"); a request with any other Origin header
	// is refused (MCP's DNS-rebinding guidance). Requests without Origin
	// (every non-browser client) are not affected.
	MCPAllowedOrigins []string
	// MaxBodyBytes bounds management request bodies (default 1 MiB).
	MaxBodyBytes int64
	// MaxLLMBodyBytes bounds LLM request bodies (default 16 MiB).
	MaxLLMBodyBytes int64
	// BodyReadTimeout bounds how long any request body may take to arrive
	// once its handler starts reading it (default DefaultBodyReadTimeout).
	// A client slower than that gets its connection closed.
	BodyReadTimeout time.Duration
	// EdgeSecret, when set, must arrive as X-Edge-Auth on every request but
	// the liveness and readiness probes: the proxy in front adds it, so
	// nothing reaches the server around it.
	EdgeSecret string
}

// Server serves the HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	reg     *prometheus.Registry
	tools   []Tool
	// table is every route the server serves (routes).
	table []Route
	// envelopes are the LLM routes' error envelopes by path, for the
	// refusals made before a route is matched (the edge check).
	envelopes map[string]Envelope
}

// New builds a server and its routes.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxLLMBodyBytes <= 0 {
		cfg.MaxLLMBodyBytes = 16 << 20
	}
	if cfg.BodyReadTimeout <= 0 {
		cfg.BodyReadTimeout = DefaultBodyReadTimeout
	}
	reg := prometheus.NewRegistry()
	s := &Server{
		cfg:     cfg,
		log:     cfg.Logger,
		mux:     http.NewServeMux(),
		reg:     reg,
		metrics: newMetrics(reg),
	}
	s.tools = append([]Tool{whoamiTool()}, cfg.Tools...)
	s.envelopes = map[string]Envelope{}
	for _, rt := range cfg.Routes {
		if rt.Envelope != nil {
			_, path, _ := strings.Cut(rt.Pattern, " ")
			s.envelopes[path] = rt.Envelope
		}
	}
	s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.throughEdge(w, r) {
		return
	}
	r, finish := s.boundBody(w, r)
	defer finish()
	s.mux.ServeHTTP(w, r)
}

// Registry is the server's Prometheus registry, for gates that add metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }
