// Package edge is Caduceus at the edge: the shim gate served by the same
// server and shim packages as `caduceus serve`, on the store's port
// (store/port) that a Cloudflare Worker answers with D1 (deploy/cloudflare)
// and the tests answer with SQLite. It holds no rule and no store of its
// own: triggers, shimming, direct answers, receipts, CAS versions, tenant
// isolation and the public routes are the shim's and the server's; its
// stores are written once on the port (store/port, shim/shimstore) and run
// on SQLite, Postgres and D1 alike, in the server's tables
// (edge/migrations brings D1's schema to them).
package edge

import (
	"context"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/provsync"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimstore"
	"github.com/caduceus-dev/caduceus/store/port"
)

// Config is what the edge serves from: its database and the Worker's
// bindings.
type Config struct {
	// DB is the store's port, which the Worker answers with D1.
	DB port.DB
	// AdminKeys are cad_ tokens the edge adopts as admin keys of their
	// tenants on the first request that presents each (auth.Service.Adopt): the Worker's
	// CADUCEUS_ADMIN_KEY secret (ParseAdminKeys). An admin key makes the
	// other keys of its tenant over POST /v1/admin/keys, as on the server.
	AdminKeys map[contract.TenantSlot]string
	// EdgeSecret, when set, must arrive as X-Edge-Auth (CADUCEUS_EDGE_SECRET).
	EdgeSecret string
	// Upstreams are the shim's providers by name (openai, anthropic); none:
	// the shim forwards nothing and answers what it answers itself.
	Upstreams map[string]shim.Upstream
	Offline   bool
	// Classifier answers tier 3 (micromodel) triggers and Embedder tier 2
	// (semantic) ones, as shim.classifier_url and shim.embeddings_url do
	// for serve; nil: tier 3 never fires, tier 2 embeds locally.
	Classifier shim.Classifier
	Embedder   shim.Embedder
	// SyncAllow are the URL prefixes POST /v1/sync may fetch provision
	// bundles and handshakes from (CADUCEUS_SYNC_ALLOW, as shim.sync_allow);
	// none: POST /v1/sync is not served.
	SyncAllow []string
	// Transport makes the upstream calls (the Worker's: the Fetch API
	// through its bridge, deploy/cloudflare/fetch); nil:
	// http.DefaultTransport.
	Transport http.RoundTripper
	Version   string
	Logger    *slog.Logger
	Now       func() time.Time
}

// Edge is the edge's HTTP handler: the server with the shim gate on DB.
type Edge struct {
	cfg  Config
	srv  *server.Server
	auth *auth.Service
	// adopted: which admin keys this isolate knows are in the store, by
	// tenant. Until then every request that presents one adopts it itself
	// (Adopt is idempotent), none waiting for another's adoption: in a
	// Worker that wait is on another request's I/O, and workerd cancels the
	// waiter as hung (docs/edge.md).
	adopted map[contract.TenantSlot]*atomic.Bool
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
	rt := cfg.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	rules, mem, trail := shimstore.New(cfg.DB, cfg.Now), shimstore.NewMemory(cfg.DB), port.NewAudit(cfg.DB)
	gov := &shim.Governor{}
	m := memory.New(memory.Config{Store: mem, Rules: rules, Now: cfg.Now,
		Logf: func(format string, args ...any) { cfg.Logger.Warn(fmt.Sprintf(format, args...)) }})
	sc := shim.Config{Store: rules, Audit: trail, Turns: shimstore.NewTurnsOn(trail), Upstreams: cfg.Upstreams, Offline: cfg.Offline,
		Logger: cfg.Logger, Admit: gov.Admit, AdmitOnly: shim.Governed, Observers: []shim.Observer{m},
		Classifier: cfg.Classifier, Embedder: cfg.Embedder, Now: cfg.Now,
		// No request waits for a read another has in flight: in a Worker
		// that wait is on another request's I/O, and workerd cancels the
		// waiter as hung (docs/edge.md).
		OwnReads: true,
		// Bodies closed when their request's context ends.
		Client: &http.Client{Transport: upstreamTransport{rt}}}
	if sc.Upstreams == nil {
		sc.Upstreams = map[string]shim.Upstream{}
	}
	if err := shim.CheckConfig(sc); err != nil {
		return nil, err
	}
	svc := shim.New(sc)
	gc := shimgate.Config{Service: svc, Memory: m}
	if len(cfg.SyncAllow) > 0 {
		gc.Sync = provsync.New(svc, provsync.Config{Governor: gov, Ledger: mem, AllowURL: provsync.AllowPrefixes(cfg.SyncAllow), Client: &http.Client{Transport: upstreamTransport{rt}}})
	}
	gates := []gate.Gate{shimgate.New(gc)}
	// No key cache: each isolate is short-lived and a revocation must reach
	// every isolate at once, so each request reads its key from D1.
	// Each key read also reads where the key's tenant's audit chain ends,
	// for the turn's append (port.Keys.HeadsTo): one round trip for both.
	keys := auth.NewService(port.NewKeys(cfg.DB, cfg.Now, nil).HeadsTo(trail), cfg.Now, 0)
	srv := server.New(server.Config{Auth: keys, Audit: trail, Records: trail, Store: trail, Logger: cfg.Logger, Version: cfg.Version,
		Routes: gate.Routes(gates), Tools: gate.Tools(gates), EdgeSecret: cfg.EdgeSecret, Keys: port.NewRequestKeys(cfg.DB, cfg.Now),
		// A duplicate must not wait on the request that holds its key:
		// that request's I/O is not its own (docs/edge.md).
		IdempotencyNoWait: true})
	adopted := map[contract.TenantSlot]*atomic.Bool{}
	for tenant := range cfg.AdminKeys {
		adopted[tenant] = &atomic.Bool{}
	}
	return &Edge{cfg: cfg, srv: srv, auth: keys, adopted: adopted}, nil
}

// ServeHTTP implements http.Handler. A request that presents an admin
// key this isolate has not yet adopted adopts it first (one read, and an
// insert when the key is new to the store), and is answered 503 naming
// why when that fails; a request with any other key, or none, adopts
// nothing, so an isolate's first request makes no round trip for it.
func (e *Edge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := e.adoptAdmin(r.Context(), server.TokenFrom(r)); err != nil {
		http.Error(w, "caduceus edge: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	e.srv.ServeHTTP(w, r)
}

// adoptAdmin adopts the admin key token is, unless it is none or this
// isolate has adopted it already.
func (e *Edge) adoptAdmin(ctx context.Context, token string) error {
	if token == "" {
		return nil
	}
	for tenant, admin := range e.cfg.AdminKeys {
		if subtle.ConstantTimeCompare([]byte(token), []byte(admin)) != 1 || e.adopted[tenant].Load() {
			continue
		}
		spec := auth.Spec{Tenant: tenant, Scopes: contract.Scopes}
		if _, err := e.auth.Adopt(context.WithoutCancel(ctx), admin, spec); err != nil {
			return fmt.Errorf("CADUCEUS_ADMIN_KEY (%s): %w", tenant, err)
		}
		e.adopted[tenant].Store(true)
	}
	return nil
}

// ParseAdminKeys reads the CADUCEUS_ADMIN_KEY secret: admin tokens
// separated by commas or white space, each "TENANT=cad_..." or a bare
// token, which is slot-1's (the tenant of serve's first admin key).
func ParseAdminKeys(s string) (map[contract.TenantSlot]string, error) {
	out := map[contract.TenantSlot]string{}
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		tenant, token, ok := strings.Cut(f, "=")
		if !ok {
			tenant, token = "slot-1", f
		}
		if !contract.ValidTenantSlot(tenant) {
			return nil, fmt.Errorf("CADUCEUS_ADMIN_KEY: %q is not a tenant slot (slot-N)", tenant)
		}
		if _, _, err := auth.ParseToken(token); err != nil {
			return nil, fmt.Errorf("CADUCEUS_ADMIN_KEY: the key of %s: %w", tenant, err)
		}
		if _, dup := out[contract.TenantSlot(tenant)]; dup {
			return nil, fmt.Errorf("CADUCEUS_ADMIN_KEY: %s is given twice", tenant)
		}
		out[contract.TenantSlot(tenant)] = token
	}
	return out, nil
}
