// Package shimserve is the shim gate as serve builds it: the module that
// reads the shim section of the config file, builds the shim Service, its
// memory, governance and governed gateway over the store, and hands
// package shimgate's routes to the server with the gateway's background
// work. The edge builds the same routes over its own database (package
// edge) and links none of this.
package shimserve

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/provsync"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
)

func init() {
	registry.Register(registry.Module{
		Name: "shim", Order: 30,
		Section: "shim", New: func() any { return &Section{} },
		Settings: []registry.Setting{
			{Flag: "upstream", Kind: registry.Strings, Usage: "shim: an LLM upstream NAME=URL (openai, anthropic); repeatable; keys from CADUCEUS_OPENAI_API_KEY / CADUCEUS_ANTHROPIC_API_KEY",
				Set: func(s any, v []string) error {
					ups, err := parseUpstreams(v)
					if err != nil {
						return err
					}
					s.(*Section).Upstreams = ups
					return nil
				}},
			{Flag: "offline", Kind: registry.Bool, Usage: "shim: never call a provider (answer directly or refuse)",
				Set: func(s any, v []string) error { s.(*Section).Offline = v[0] == "true"; return nil }},
		},
		Check:    func(_ registry.Host, s any) error { return s.(*Section).check() },
		Build:    func(_ context.Context, h registry.Host, s any) (gate.Gate, error) { return build(h, s.(*Section)) },
		Describe: func(h registry.Host, s any) { describe(h, s.(*Section)) },
	})
}

// Parts are the shim service with its memory and governance parts.
type Parts struct {
	Service *shim.Service
	Memory  *memory.Memory
	Gov     *shim.Governor
	Gateway *gateway.Gateway // nil without shim.routes
}

// Syncer returns a Syncer for the server (allowlisted URLs only) or the
// CLI (any source, directories included).
func (p Parts) Syncer(db *store.DB, c *Section, cli bool) *provsync.Syncer {
	cfg := provsync.Config{Governor: p.Gov, Ledger: shimsql.NewMemory(db), MaxChars: c.MaxCharsCeiling, AllowDir: cli}
	if !cli {
		cfg.AllowURL = provsync.AllowPrefixes(c.SyncAllow)
	}
	return provsync.New(p.Service, cfg)
}

// build is the shim gate of serve on h.
func build(h registry.Host, c *Section) (gate.Gate, error) {
	p, err := Open(h, c)
	if err != nil {
		return nil, err
	}
	cfg := shimgate.Config{Service: p.Service, Memory: p.Memory, Sync: p.Syncer(h.DB, c, false), AllowedOrigins: c.CORS.AllowedOrigins,
		Receipts: shimsql.New(h.DB), MaxRequestBytes: c.MaxRequestBytes}
	if p.Gateway != nil {
		cfg.Spend, cfg.Gateway = ledger.Of(h.DB), p.Gateway
		every, _ := c.ledgerSweep() // checked at start
		cfg.Jobs = []gate.Job{
			{Name: "ledger", Run: func(ctx context.Context) { ledgerJob(ctx, h, every) }},
			{Name: "route check", Run: func(ctx context.Context) { checkRoutes(ctx, h, p.Gateway) }},
		}
	}
	return shimgate.New(cfg), nil
}

// Open builds the shim over h's store from the section and the
// environment (provider keys): the CLI's shim commands use it as serve
// does.
func Open(h registry.Host, c *Section) (Parts, error) {
	gov := &shim.Governor{Cohorts: map[contract.TenantSlot][]string{}}
	for t, cohorts := range c.Cohorts {
		if !contract.ValidTenantSlot(t) {
			return Parts{}, registry.Invalidf("shim.cohorts: %q is not a tenant slot", t)
		}
		gov.Cohorts[contract.TenantSlot(t)] = cohorts
	}
	db := h.DB
	cfg := shim.Config{
		Store:     shimsql.New(db),
		Audit:     db.Audit(),
		Turns:     shimsql.New(db), // receipt and audit record in one transaction
		Upstreams: map[string]shim.Upstream{},
		Offline:   c.Offline,
		Logger:    h.Log,
		Admit:     gov.Admit,
		AdmitOnly: shim.Governed, // the lens admits ungoverned provisions anyway
		Gateway:   newGateway(h, c),
		Isolation: shim.Isolation(c.Isolation),
		// A receipt not stored because the store is down is a 503 with
		// Retry-After.
		Unavailable: store.IsUnavailable,
	}
	for name, url := range c.Upstreams {
		env, ok := upstreamKeyEnv[name]
		if !ok {
			return Parts{}, registry.Invalidf("upstream %q: want openai or anthropic", name)
		}
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return Parts{}, registry.Invalidf("upstream %s=%q: want an http(s) URL", name, url)
		}
		cfg.Upstreams[name] = shim.Upstream{BaseURL: strings.TrimRight(url, "/"), APIKey: h.Getenv(env)}
	}
	if c.ClassifierURL != "" {
		cfg.Classifier = &shim.ChatClassifier{BaseURL: c.ClassifierURL, APIKey: h.Getenv("CADUCEUS_CLASSIFIER_API_KEY")}
	}
	if c.EmbeddingsURL != "" {
		cfg.Embedder = &shim.OpenAIEmbedder{BaseURL: c.EmbeddingsURL, Model: c.EmbeddingsModel, APIKey: h.Getenv("CADUCEUS_EMBEDDINGS_API_KEY")}
	}
	if c.Guardrails.Active() {
		// The detectors are built here, once, not on a first request.
		det, err := detect.Default()
		if err != nil {
			return Parts{}, err
		}
		cfg.Guardrails, cfg.Scanner, cfg.OnGuardrail = &c.Guardrails, det, server.GuardrailFinding
	}
	mem := memory.New(memory.Config{Store: shimsql.NewMemory(db), Rules: shimsql.New(db),
		Logf: func(format string, args ...any) { h.Log.Warn(fmt.Sprintf(format, args...)) }})
	cfg.Observers = append(cfg.Observers, mem)
	if err := shim.CheckConfig(cfg); err != nil {
		return Parts{}, registry.Invalidf("%s", registry.UserMessage(err))
	}
	return Parts{Service: shim.New(cfg), Memory: mem, Gov: gov, Gateway: cfg.Gateway}, nil
}

// newGateway builds the shim's governed upstream path from shim.routes,
// shim.plans, shim.prices and shim.budgets (nil when no route is
// configured): each route's key from its key_env, the ledger and holds on
// the store every process shares.
func newGateway(h registry.Host, s *Section) *gateway.Gateway {
	c := s.Gateway
	if !c.Enabled() {
		return nil
	}
	keys := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		r := c.Routes[name]
		if r.KeyEnv == "" {
			continue
		}
		if k := h.Getenv(r.KeyEnv); k != "" {
			keys[name] = k
		}
	}
	// The shim records turns with shimsql.New(db), whose transaction settles the
	// reservations too: one commit fewer per request.
	timeout, _ := s.attemptTimeout() // checked at startup
	l := ledger.Of(h.DB)
	return gateway.New(gateway.Config{Upstream: c, Keys: keys, Ledger: l, Holds: l, Rates: l, Cache: l, Logger: h.Log,
		DeferClose: true, HeaderTimeout: timeout, OnRouteHealth: server.RouteHealth, OnAttempt: server.UpstreamAttempt})
}
