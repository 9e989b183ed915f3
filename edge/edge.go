package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
)

// Config is what the edge serves from: its database and the Worker's
// bindings.
type Config struct {
	DB DB
	// AdminKey is a cad_ token the edge adopts as an admin key of
	// AdminTenant on its first request (auth.Service.Adopt): the Worker's
	// CADUCEUS_ADMIN_KEY secret. Empty: no key is adopted.
	AdminKey    string
	AdminTenant contract.TenantSlot // default slot-1, as serve's first key
	// EdgeSecret, when set, must arrive as X-Edge-Auth (CADUCEUS_EDGE_SECRET).
	EdgeSecret string
	// Upstreams are the shim's providers by name (openai, anthropic); none:
	// the shim forwards nothing and answers what it answers itself.
	Upstreams map[string]shim.Upstream
	Offline   bool
	Version   string
	Logger    *slog.Logger
	Now       func() time.Time
}

// Edge is the edge's HTTP handler: the server with the shim gate on DB.
type Edge struct {
	cfg  Config
	srv  *server.Server
	auth *auth.Service
	// mu guards adopted: whether the admin key is in the store.
	mu      sync.Mutex
	adopted bool
}

// New builds the edge. The shim is configured as `caduceus serve`
// configures it (governed admission, builtins in the reserved tenant,
// entity memory as an observer); what the edge leaves out is named in
// docs/edge.md.
func New(cfg Config) (*Edge, error) {
	if cfg.DB == nil {
		return nil, fmt.Errorf("edge: no database")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.AdminTenant == "" {
		cfg.AdminTenant = "slot-1"
	}
	rules, mem, trail := NewShim(cfg.DB, cfg.Now), NewMemory(cfg.DB), NewAudit(cfg.DB)
	gov := &shim.Governor{}
	m := memory.New(memory.Config{Store: mem, Rules: rules, Now: cfg.Now,
		Logf: func(format string, args ...any) { cfg.Logger.Warn(fmt.Sprintf(format, args...)) }})
	sc := shim.Config{Store: rules, Audit: trail, Upstreams: cfg.Upstreams, Offline: cfg.Offline, EdgeSecret: cfg.EdgeSecret,
		Logger: cfg.Logger, Admit: gov.Admit, AdmitOnly: shim.Governed, Observers: []shim.Observer{m}}
	if sc.Upstreams == nil {
		sc.Upstreams = map[string]shim.Upstream{}
	}
	if err := shim.CheckConfig(sc); err != nil {
		return nil, err
	}
	gates := []gate.Gate{shimgate.New(shimgate.Config{Service: shim.New(sc), Memory: m})}
	// No key cache: each isolate is short-lived and a revocation must reach
	// every isolate at once, so each request reads its key from D1.
	keys := auth.NewService(NewKeys(cfg.DB, cfg.Now), cfg.Now, 0)
	srv := server.New(server.Config{Auth: keys, Audit: trail, Records: trail, Store: trail, Logger: cfg.Logger, Version: cfg.Version,
		Routes: gate.Routes(gates), Tools: gate.Tools(gates), EdgeSecret: cfg.EdgeSecret, Keys: NewRequestKeys(cfg.DB, cfg.Now)})
	return &Edge{cfg: cfg, srv: srv, auth: keys}, nil
}

// ServeHTTP implements http.Handler. Until the admin key is adopted
// (the first request of an isolate, or the next one after a failure),
// requests are answered 503 naming why.
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := e.adoptAdmin(r.Context()); err != nil {
		http.Error(w, "caduceus edge: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	e.srv.ServeHTTP(w, r)
}

func (e *Edge) adoptAdmin(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.adopted || e.cfg.AdminKey == "" {
		return nil
	}
	if _, err := e.auth.Adopt(context.WithoutCancel(ctx), e.cfg.AdminKey, auth.Spec{Tenant: e.cfg.AdminTenant, Scopes: contract.Scopes}); err != nil {
		return fmt.Errorf("CADUCEUS_ADMIN_KEY: %w", err)
	}
	e.adopted = true
	return nil
}
