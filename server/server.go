// Package server is the HTTP face of Caduceus: the routes (all in routes.go),
// the middleware every route shares (authentication, scope check, audit
// record, metrics, RFC 9457 problems) and the MCP endpoint.
package server

import (
	"context"
	"crypto/ed25519"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/provsync"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trader"
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

// Config is what a Server is built from: the services of the gates it
// serves, and the routes and tools the command adds (Mounts, Tools).
type Config struct {
	Auth    *auth.Service
	Audit   audit.Log
	Records AuditReader
	Store   Pinger
	Logger  *slog.Logger
	Version string
	// Gates: a nil service means the gate is not served.
	Trader   *trader.Service
	Executor *executor.Executor
	Shim     *shim.Service
	// ShimMemory and ShimSync serve entity memory, rule outcomes, insights
	// and governed sync; nil when the shim gate is off.
	ShimMemory *memory.Memory
	ShimSync   *provsync.Syncer
	// ShimSpend serves GET /v1/spend; nil when no gateway routes are
	// configured.
	ShimSpend SpendReader
	// Gateway serves GET /v1/models (the models a key may use); nil when no
	// gateway routes are configured.
	Gateway *gateway.Gateway
	// Relay is the relay connector's handler (GET /relay, POST
	// /hooks/discord/{app}, POST /hooks/telegram/{bot}); it authenticates
	// gateways and platforms itself (HMAC tokens, platform signatures).
	Relay http.Handler
	// RelayWebhooks are the patterns of the relay's webhooks for the
	// platforms after Discord and Telegram (relay/connector.PlatformRoutes),
	// also served by Relay.
	RelayWebhooks []string

	// Console is the operator console (package console), served under
	// /console with its own session cookie; nil: no console. The API
	// routes never accept that cookie.
	Console http.Handler
	// Trails serve GET /v1/conversations[/{id}]; nil: not served.
	Trails trail.Reader

	// Mounts are routes the command adds, registered after the gates'
	// (the executor gate's answer when it is not configured).
	Mounts []Mount
	// Tools are MCP tools the command adds to the gates' (the same
	// answer's execute_intents); whoami is always there.
	Tools []Tool
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
	s.tools = []Tool{whoamiTool()}
	if cfg.Trader != nil {
		s.tools = append(s.tools, s.traderTools()...)
	}
	if cfg.Executor != nil {
		s.tools = append(s.tools, s.executorTools()...)
	}
	if cfg.Shim != nil {
		s.tools = append(s.tools, s.shimTools()...)
	}
	s.tools = append(s.tools, cfg.Tools...)
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
