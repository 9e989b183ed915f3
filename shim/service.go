// Package shim is the LLM middleware gate (seed 003, DESIGN §7): it
// evaluates caller-scoped provisions on every chat completions, responses
// and messages request, shims bounded context into the request or answers
// it directly, forwards the rest to a configured upstream, and leaves a
// receipt in the audit trail.
//
// It holds the rules (Provision, ContextEntry and their schema checks), the
// trigger engine (tier 1 keyword/regex/path/tool, tier 2 semantic, tier 3
// micromodel classifier), the proxy and its receipts, dry-run and preview,
// the fabric_governance lens (Governor), and the management of provisions
// and context entries (documents.go: one generic manager with the builtin
// rule). Beside it: shim/wire parses and rewrites the three protocols,
// shim/memory is the entity memory and insights (an Observer of turns),
// shim/provsync loads governed provisions from remote sources,
// shim/upstream is the gateway's vocabulary (routes, plans, grants, prices,
// budgets, the ledger and hold ports, the failover rule), shim/gateway
// forwards along plans (Config.Gateway), and shim/shimtest is the Store
// conformance suite and in-memory stores.
//
// The package defines what it needs — a Store, an Embedder, a Classifier —
// and the server mounts Service.Handler on the LLM routes and calls the
// Service methods from its management routes.
//
// A receipt's canonical JSON, which every request's audit record carries,
// is written by hand (receipt_json.go, an audit.CanonicalWriter):
// BenchmarkReceiptJSON (2 shared cores, CPU time per op, median of six
// runs) puts a forwarded request's receipt at 11 µs, 4.1 KB and 9 allocs
// against 33 µs, 6.5 KB and 9 allocs for encoding/json plus
// contract.CanonicalJSON (3.2×); TestReceiptCanonicalCoversEveryField
// holds it to the same bytes. Reproduce with
// go test -run '^$' -bench ReceiptJSON -benchmem -count 6 ./shim/
package shim

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/upstream"
)

// Upstream is a configured LLM provider: a base URL (with or without a
// trailing /v1) and the API key Caduceus uses there. Keys never come from
// requests.
type Upstream struct {
	BaseURL string
	APIKey  string
}

// Config configures a Service. Store and Audit are required.
type Config struct {
	Store Store
	Audit audit.Log
	// Upstreams by provider name: "openai" serves chat completions and
	// responses, "anthropic" serves messages. A protocol without one is refused.
	Upstreams map[string]Upstream
	// Gateway, when set, forwards every request no provision answers along
	// the caller's plan: the caller's grant for each attempt's model,
	// spend reserved before and settled after each attempt, budgets,
	// failover and rate-limit holds (docs/shim.md). Upstreams is then unused;
	// without Gateway, New makes one of Upstreams' Open plan (the
	// ungoverned pass-through through the same forwarder).
	Gateway *gateway.Gateway
	// Isolation is the caller scope of provisions, context entries, the
	// once-per-conversation ledger and receipts (seed 003 H11): tenant (the
	// default: every key of a tenant shares them) or key (each key sees and
	// is shaped by its own only). Entity memory is per key either way.
	Isolation Isolation
	// Unavailable reports whether a store error says the store cannot be
	// reached or written now (store.IsUnavailable): the 503
	// receipt_not_recorded such a failure causes then carries
	// Retry-After: 1, as the server's 503 store_unavailable does. Nil:
	// never.
	Unavailable func(error) bool
	// Client sends upstream requests (nil: a client over
	// gateway.Transport(0), without overall timeout since streams may be
	// long; cancellation follows the caller's request).
	Client *http.Client
	// Embedder for tier 2 (nil: Local).
	Embedder Embedder
	// Classifier for tier 3 (nil: tier 3 never fires).
	Classifier Classifier
	// Offline: no provider is ever called — tier 2 uses Local, tier 3 is
	// skipped, and requests not answered directly are refused (503, "offline").
	Offline bool
	// Budget bounds tiers 2 and 3 per request (0: 300ms).
	Budget time.Duration
	// BuiltinTenant holds system_builtin rows (empty: "slot-0"). No key
	// should be issued for it.
	BuiltinTenant contract.TenantSlot
	// RulesTTL is how long a tenant's compiled provisions are reused before
	// the store is read again (0: 1s). Writes through this Service
	// invalidate at once; writes by other processes are seen within RulesTTL.
	RulesTTL time.Duration
	// OwnReads: each request that finds a tenant's provisions stale reads
	// them itself, never waiting for the same read another request has in
	// flight (without it, they wait for that one read: rulesRefill). The
	// edge sets it: in a Worker every request shares one Go runtime, and
	// workerd cancels as hung a request that waits on I/O another
	// request's context is doing (docs/edge.md).
	OwnReads bool
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// Logger for failures that cannot be sent to the caller (nil: slog.Default()).
	Logger *slog.Logger
	// Admit is an optional lens over each provision before its triggers run
	// (the fabric_governance lens, Governor.Admit: seed 003 H12). A false
	// answer skips the provision with the reason given.
	Admit func(ctx context.Context, caller contract.Caller, p Provision) (bool, string)
	// AdmitOnly, when set with Admit, says which provisions Admit must
	// see; the others are admitted without a call. It must agree with
	// Admit: Admit answers (true, "") for every provision AdmitOnly
	// rejects. Governed is the one for Governor.Admit. With 1,000
	// provisions it saves a call per provision per request.
	AdmitOnly func(p Provision) bool
	// Turns, when set, writes each turn's audit record and receipt in one
	// transaction (instead of Audit.Append, then Store.AddReceipt, each
	// committed on its own). It must write to the same audit trail as Audit.
	Turns TurnRecorder
	// Guardrails is the guardrails policy (shim.guardrails,
	// docs/guardrails.md): an action per kind of secret and personal data,
	// per-plan overrides. Nil, or a policy that looks for nothing: no
	// request or answer is scanned.
	Guardrails *guard.Config
	// Scanner finds what Guardrails looks for (guard/detect.Default in
	// the binary). Required when Guardrails is active.
	Scanner guard.Scanner
	// OnGuardrail, when set, is told each guardrails record of a turn
	// once its receipt is written (serve counts them in /metrics).
	OnGuardrail func(guard.Record)
	// Observers see every proxied turn after its receipt is written (entity
	// memory, retry attribution). They run synchronously on a
	// context detached from the request; keep them fast.
	Observers []Observer
}

// Scope is caller's Scope under the Service's isolation.
func (s *Service) Scope(caller contract.Caller) Scope {
	if s.cfg.Isolation == IsolationKey && caller.KeyID != "" && caller.Identity.TenantSlot != s.cfg.BuiltinTenant {
		return Scope{Tenant: caller.Identity.TenantSlot, KeyID: caller.KeyID}
	}
	return Scope{Tenant: caller.Identity.TenantSlot}
}

// Service is the shim gate.
type Service struct {
	cfg      Config
	store    Store
	embedder Embedder
	now      func() time.Time
	log      *slog.Logger
	client   *http.Client

	rules         sync.Map // contract.TenantSlot -> *cachedRules
	refills       sync.Map // contract.TenantSlot -> *rulesRefill, the read in flight
	compiledCache sync.Map // compiledKey -> *compiledEntry
	contexts      sync.Map // contextKey -> *cachedContext
	examples      sync.Map // embedder name + "\x00" + text -> []float32

	provDocs documents[Provision, *Provision]
	ctxDocs  documents[ContextEntry, *ContextEntry]

	fullScan bool // tests: evaluate runs every rule's triggers (the reference for the candidate index)
}

type cachedRules struct {
	at    time.Time
	provs []Provision
}

// rulesRefill is a read of a tenant's provisions that refills the cache:
// the requests that find the cache stale while it runs wait for it rather
// than each reading the same rows (at 16 connections, 16 reads, and as
// many round trips to a distant database, each time the TTL ends). With
// Config.OwnReads there is none: each request reads for itself.
type rulesRefill struct {
	done  chan struct{}
	provs []Provision
	err   error
}

// DefaultBuiltinTenant is the tenant that holds system_builtin rows.
const DefaultBuiltinTenant contract.TenantSlot = "slot-0"

// New returns a Service. It panics if Store or Audit is nil (a wiring bug).
func New(cfg Config) *Service {
	if cfg.Store == nil || cfg.Audit == nil {
		panic("shim: Config.Store and Config.Audit are required")
	}
	guardrailsOff(cfg)
	if cfg.Budget <= 0 {
		cfg.Budget = 300 * time.Millisecond
	}
	if cfg.BuiltinTenant == "" {
		cfg.BuiltinTenant = DefaultBuiltinTenant
	}
	if cfg.RulesTTL <= 0 {
		cfg.RulesTTL = time.Second
	}
	s := &Service{cfg: cfg, store: cfg.Store, embedder: cfg.Embedder, now: cfg.Now, log: cfg.Logger, client: cfg.Client}
	if s.embedder == nil {
		s.embedder = Local{}
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.client == nil {
		s.client = &http.Client{Transport: gateway.Transport(0)}
	}
	if cfg.Gateway == nil && len(cfg.Upstreams) > 0 {
		// The ungoverned pass-through goes through the one forwarder too,
		// along an Open plan.
		urls, keys := map[string]string{}, map[string]string{}
		for name, u := range cfg.Upstreams {
			urls[name], keys[name] = u.BaseURL, u.APIKey
		}
		s.cfg.Gateway = gateway.New(gateway.Config{Upstream: upstream.Open(urls), Keys: keys, Client: s.client, Logger: s.log})
	}
	st := s.store
	s.provDocs = documents[Provision, *Provision]{scope: s.Scope, builtin: cfg.BuiltinTenant, now: s.now, noun: "provision", keyField: "id",
		immutable: "field system_builtin: a tenant provision cannot become a builtin; create one instead",
		decode:    DecodeProvision, normalize: (*Provision).Defaults,
		list: st.ListProvisions, get: st.GetProvision, create: st.CreateProvision, update: st.UpdateProvision, remove: st.DeleteProvision,
		written: s.invalidate}
	s.ctxDocs = documents[ContextEntry, *ContextEntry]{scope: s.Scope, builtin: cfg.BuiltinTenant, now: s.now, noun: "context entry", keyField: "ref",
		immutable: "field system_builtin: a tenant entry cannot become a builtin",
		decode:    DecodeContextEntry,
		list:      st.ListContext, get: st.GetContext, create: st.CreateContext, update: st.UpdateContext, remove: st.DeleteContext,
		written: s.invalidate}
	return s
}

// Writer is what a writer beside the Service needs of it (the provision
// sync of shim/provsync): the Store and audit trail it writes, its clock,
// logger and builtin tenant, and Invalidate, which drops a tenant's cached
// rules after a write so the next request sees it.
type Writer struct {
	Store         Store
	Audit         audit.Log
	BuiltinTenant contract.TenantSlot
	Now           func() time.Time
	Logger        *slog.Logger
	Invalidate    func(tenant contract.TenantSlot)
	// Scope is Service.Scope: where a caller's own records are written.
	Scope func(contract.Caller) Scope
}

// Writer returns the Service's Writer.
func (s *Service) Writer() Writer {
	return Writer{Store: s.store, Audit: s.cfg.Audit, BuiltinTenant: s.cfg.BuiltinTenant, Now: s.now, Logger: s.log, Invalidate: s.invalidate, Scope: s.Scope}
}

// BuiltinTenant is the tenant whose rows are the system builtins.
func (s *Service) BuiltinTenant() contract.TenantSlot { return s.cfg.BuiltinTenant }

// provisions returns a tenant's provisions, from cache when fresh.
func (s *Service) provisions(ctx context.Context, tenant contract.TenantSlot) ([]Provision, error) {
	now := s.now()
	if v, ok := s.rules.Load(tenant); ok {
		c := v.(*cachedRules)
		if now.Sub(c.at) < s.cfg.RulesTTL && !now.Before(c.at) {
			return c.provs, nil
		}
	}
	if s.cfg.OwnReads {
		return s.readProvisions(ctx, tenant, now)
	}
	r := &rulesRefill{done: make(chan struct{})}
	if v, running := s.refills.LoadOrStore(tenant, r); running {
		r = v.(*rulesRefill)
		select {
		case <-r.done:
			return r.provs, r.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer close(r.done)
	defer s.refills.CompareAndDelete(tenant, r)
	// Without the caller's cancellation: others may be waiting for it.
	r.provs, r.err = s.readProvisions(context.WithoutCancel(ctx), tenant, now)
	return r.provs, r.err
}

// fresh reports whether tenant's cached provisions are fresh at now.
func (s *Service) fresh(tenant contract.TenantSlot, now time.Time) bool {
	v, ok := s.rules.Load(tenant)
	if !ok {
		return false
	}
	c := v.(*cachedRules)
	return now.Sub(c.at) < s.cfg.RulesTTL && !now.Before(c.at)
}

// readProvisionPair reads tenant's provisions and the builtins' in one
// call and caches both as of now, when the store can (ProvisionPairLister)
// and neither is fresh; otherwise provisions reads each as it comes due.
func (s *Service) readProvisionPair(ctx context.Context, tenant contract.TenantSlot) error {
	pl, ok := s.store.(ProvisionPairLister)
	now := s.now()
	if !ok || s.fresh(tenant, now) || s.fresh(s.cfg.BuiltinTenant, now) {
		return nil
	}
	own, builtin, err := pl.ListProvisionPair(ctx, tenant, s.cfg.BuiltinTenant)
	if err != nil {
		return err
	}
	for _, provs := range [][]Provision{own, builtin} {
		for i := range provs {
			provs[i].Defaults()
		}
	}
	s.rules.Store(s.cfg.BuiltinTenant, &cachedRules{at: now, provs: builtin})
	s.rules.Store(tenant, &cachedRules{at: now, provs: own})
	return nil
}

// readProvisions reads a tenant's provisions from the store and caches
// them as of now.
func (s *Service) readProvisions(ctx context.Context, tenant contract.TenantSlot, now time.Time) ([]Provision, error) {
	provs, err := s.store.ListProvisions(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for i := range provs {
		provs[i].Defaults()
	}
	s.rules.Store(tenant, &cachedRules{at: now, provs: provs})
	return provs, nil
}

// ruleset compiles the caller's provisions plus the builtins (builtinOnly:
// just the builtins). Compiled sets are cached per (tenant, builtin) pair of
// provision slices.
func (s *Service) ruleset(ctx context.Context, tenant contract.TenantSlot, builtinOnly bool) (*ruleset, error) {
	if s.cfg.OwnReads && !builtinOnly && tenant != s.cfg.BuiltinTenant {
		if err := s.readProvisionPair(ctx, tenant); err != nil {
			return nil, err
		}
	}
	builtin, err := s.provisions(ctx, s.cfg.BuiltinTenant)
	if err != nil {
		return nil, err
	}
	var own []Provision
	if !builtinOnly && tenant != s.cfg.BuiltinTenant {
		if own, err = s.provisions(ctx, tenant); err != nil {
			return nil, err
		}
	}
	key := compiledKey{tenant: tenant, builtinOnly: builtinOnly}
	if v, ok := s.compiledCache.Load(key); ok {
		c := v.(*compiledEntry)
		if sameSlice(c.own, own) && sameSlice(c.builtin, builtin) {
			return c.rs, nil
		}
	}
	rs := compile(own, builtin)
	rs.admitOnly(s.cfg.AdmitOnly)
	s.compiledCache.Store(key, &compiledEntry{own: own, builtin: builtin, rs: rs})
	return rs, nil
}

type compiledKey struct {
	tenant      contract.TenantSlot
	builtinOnly bool
}

type compiledEntry struct {
	own, builtin []Provision
	rs           *ruleset
}

// sameSlice reports whether a and b are the same backing slice (the cache
// hands out one slice per read, so identity means "not reloaded").
func sameSlice(a, b []Provision) bool {
	if len(a) != len(b) {
		return false
	}
	return len(a) == 0 || &a[0] == &b[0]
}

// invalidate drops a tenant's cached provisions after a write.
func (s *Service) invalidate(tenant contract.TenantSlot) {
	s.rules.Delete(tenant)
	s.refills.Delete(tenant) // a read begun before the write is not joined
	// A context entry written to one tenant can be the builtin others fall
	// back to; writes are rare, so every cached entry goes.
	s.contexts.Clear()
}

type contextKey struct {
	tenant contract.TenantSlot
	ref    string
}

type cachedContext struct {
	at    time.Time
	entry ContextEntry
	err   error // nil or not found
}

// contextEntry is the context entry ref as tenant sees it (its own, else
// the builtin), for rendering: reused for RulesTTL like the provisions that
// name it, and dropped at once by a write through this Service.
func (s *Service) contextEntry(ctx context.Context, tenant contract.TenantSlot, ref string) (ContextEntry, error) {
	now := s.now()
	k := contextKey{tenant, ref}
	if v, ok := s.contexts.Load(k); ok {
		c := v.(*cachedContext)
		if now.Sub(c.at) < s.cfg.RulesTTL && !now.Before(c.at) {
			return c.entry, c.err
		}
	}
	e, _, err := s.ctxDocs.locate(ctx, tenant, ref)
	if err == nil || isNotFound(err) {
		s.contexts.Store(k, &cachedContext{at: now, entry: e, err: err})
	}
	return e, err
}
