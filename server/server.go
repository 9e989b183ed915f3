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

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/internal/keyowner"
	"github.com/caduceus-dev/caduceus/trail"
)

// Pinger reports whether the store answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// AuditReader lists recent audit records.
type AuditReader interface {
	Tail(ctx context.Context, f audit.Filter) ([]audit.Record, error)
}

// Config is what a Server is built from: the core's services and the
// routes and tools of the gates it serves.
type Config struct {
	Auth    *auth.Service
	Audit   audit.Log
	Records AuditReader
	Store   Pinger
	Logger  *slog.Logger
	// Unavailable reports whether an error's cause is a store that cannot
	// be reached or written now (store.IsUnavailable): such an internal
	// error is answered 503 store_unavailable with Retry-After
	// (contract.Unavailable) instead of 500 internal. Nil: never.
	Unavailable func(error) bool
	Version     string
	// Routes and Tools are the enabled gates' (gate.Routes, gate.Tools),
	// registered after the core's, each the one way (Route).
	Routes []Route
	Tools  []Tool

	// Console is the operator console (package console), served under
	// /console with its own session cookie; nil: no console. The API
	// routes never accept that cookie.
	Console http.Handler
	// Trails serve GET /v1/trail/conversations[/{id}]; nil: not served.
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
	// MaxLLMBodyBytes bounds provider route request bodies (default
	// DefaultMaxLLMBodyBytes).
	MaxLLMBodyBytes int64
	// BodyReadTimeout bounds how long any request body may take to arrive
	// once its handler starts reading it (default DefaultBodyReadTimeout).
	// A client slower than that gets its connection closed.
	BodyReadTimeout time.Duration
	// EdgeSecret, when set, must arrive as X-Edge-Auth on every request but
	// the liveness and readiness probes: the proxy in front adds it, so
	// nothing reaches the server around it.
	EdgeSecret string
	// Keys keeps the Idempotency-Key of write routes (idempotency.go); nil:
	// Store's, when it keeps them (a *store.DB does).
	Keys RequestKeys
	// IdempotencyWait bounds how long a duplicate waits for the request
	// holding its key (default DefaultIdempotencyWait).
	IdempotencyWait time.Duration
	// Previous is the server this one replaces in the same process (a
	// reload of the configuration): its metrics and registry carry over.
	Previous *Server
}

// DefaultMaxLLMBodyBytes is the default bound of a provider route's
// request body: 32 MiB, at least what the providers themselves take
// (Anthropic documents 32 MB for a Messages request).
const DefaultMaxLLMBodyBytes = 32 << 20

// Server serves the HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	tools   []Tool
	// keys and inflight: the write routes' idempotency keys.
	keys     RequestKeys
	inflight keyowner.Set
	// table is every route the server serves (routes).
	table []Route
	// envelopes are the LLM routes' error envelopes by path, for the
	// refusals made before a route is matched (the edge check).
	envelopes map[string]Envelope
	// cors matches a request's path to a route with AllowedOrigins, whose
	// origins are origins[pattern].
	cors    *http.ServeMux
	origins map[string][]string
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
