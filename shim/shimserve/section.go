package shimserve

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/shim/upstream"
)

// Section is the shim section of the config file.
type Section struct {
	// Upstreams by provider: openai (chat completions, responses) and
	// anthropic (messages). Keys come from CADUCEUS_OPENAI_API_KEY and
	// CADUCEUS_ANTHROPIC_API_KEY, never from the file or a flag.
	Upstreams map[string]string `yaml:"upstreams"`
	// Offline: no provider is ever called (no forwarding, no remote tiers).
	Offline bool `yaml:"offline"`
	// ClassifierURL is an OpenAI-compatible chat endpoint for tier 3
	// (key: CADUCEUS_CLASSIFIER_API_KEY); empty: tier 3 never fires.
	ClassifierURL string `yaml:"classifier_url"`
	// EmbeddingsURL and EmbeddingsModel select an OpenAI-compatible
	// /v1/embeddings service for tier 2 (key: CADUCEUS_EMBEDDINGS_API_KEY);
	// empty: the deterministic local embedder.
	EmbeddingsURL   string `yaml:"embeddings_url"`
	EmbeddingsModel string `yaml:"embeddings_model"`
	// Cohorts places tenants in fabric_governance cohorts: {slot-3: [core]}.
	// A tenant not listed belongs to no cohort.
	Cohorts map[string][]string `yaml:"cohorts"`
	// SyncAllow lists the URL prefixes POST /v1/sync may fetch from. Empty:
	// the server syncs from no URL (the CLI may sync from any source).
	SyncAllow []string `yaml:"sync_allow"`
	// MaxCharsCeiling clamps every synced max_chars (0: 20000).
	MaxCharsCeiling int `yaml:"max_chars_ceiling"`
	// Gateway is the governed upstream path: routes, plans, prices,
	// budgets (shim.routes, shim.plans, ... in the file). With routes,
	// upstreams must be empty.
	Gateway upstream.Config `yaml:",inline"`
	// Isolation is the caller scope of provisions, context, receipts and
	// memory: tenant (default) or key.
	Isolation string `yaml:"isolation"`
	// CORS lets browser apps on these origins call the provider routes
	// (a preflight is answered without a key; the real request still needs
	// the edge secret and a key). Default: none.
	CORS struct {
		AllowedOrigins []string `yaml:"allowed_origins"`
	} `yaml:"cors"`
	// MaxRequestBytes bounds a provider route's request body (default
	// 32 MiB, server.DefaultMaxLLMBodyBytes); a larger one is refused with
	// 413 in the provider's envelope.
	MaxRequestBytes int64 `yaml:"max_request_bytes"`
	// AttemptTimeout bounds the wait for a gateway attempt's response
	// headers once it is sent, when the plan lets a further step take
	// over after an uncertain failure ("30s"; default 120s): past it that
	// step is tried. An attempt nothing may follow waits as long as its
	// client does, or its route's timeout.
	AttemptTimeout string `yaml:"attempt_timeout"`
	// LedgerSweep is how often this process says it is alive to the other
	// processes of its store and sweeps the ledger ("10s", the default;
	// from 1s to 5m): budget leases of a process not heard from for six
	// sweeps go back to the budgets, and the settlements a dead process
	// left in its receipts are written a minute after their turn.
	LedgerSweep string `yaml:"ledger_sweep"`
	// Guardrails is the guardrails policy (docs/guardrails.md): an action
	// per kind of secret and personal data (redact, block, flag, off;
	// default off), per-plan overrides under plans.
	Guardrails guard.Config `yaml:"guardrails"`
}

// ledgerSweep is LedgerSweep parsed (default 10 s).
func (c *Section) ledgerSweep() (time.Duration, error) {
	if c.LedgerSweep == "" {
		return 10 * time.Second, nil
	}
	d, err := time.ParseDuration(c.LedgerSweep)
	if err != nil || d < time.Second || d > 5*time.Minute {
		return 0, fmt.Errorf("shim.ledger_sweep %q: want a duration from 1s to 5m such as 10s", c.LedgerSweep)
	}
	return d, nil
}

// attemptTimeout is AttemptTimeout parsed (0: the gateway's default).
func (c *Section) attemptTimeout() (time.Duration, error) {
	if c.AttemptTimeout == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(c.AttemptTimeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("shim.attempt_timeout %q: want a positive duration such as 30s", c.AttemptTimeout)
	}
	return d, nil
}

// CheckGateway checks the gateway section: a valid configuration, not
// mixed with the ungoverned upstreams, a known isolation.
func (c *Section) CheckGateway() error {
	switch c.Isolation {
	case "", "tenant", "key":
	default:
		return fmt.Errorf("shim.isolation %q: want key or tenant", c.Isolation)
	}
	if _, err := c.attemptTimeout(); err != nil {
		return err
	}
	if _, err := c.ledgerSweep(); err != nil {
		return err
	}
	if err := c.Guardrails.Validate("shim.guardrails", slices.Sorted(maps.Keys(c.Gateway.Plans))); err != nil {
		return err
	}
	if c.MaxRequestBytes < 0 || c.MaxRequestBytes > 1<<30 {
		return fmt.Errorf("shim.max_request_bytes %d: want a size from 1 to 1073741824 bytes (0: the default, 32 MiB)", c.MaxRequestBytes)
	}
	for _, o := range c.CORS.AllowedOrigins {
		if u, err := url.Parse(o); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
			return fmt.Errorf("shim.cors.allowed_origins: %q is not an origin (scheme://host[:port], e.g. https://app.example.com)", o)
		}
	}
	g := c.Gateway
	if !g.Enabled() {
		if len(g.Plans) > 0 || len(g.Prices) > 0 {
			return fmt.Errorf("shim.plans and shim.prices need shim.routes")
		}
		return nil
	}
	if len(c.Upstreams) > 0 {
		return fmt.Errorf("shim.upstreams and shim.routes exclude each other: routes (with plans, grants and budgets) replace upstreams")
	}
	if len(g.Plans) == 0 {
		return fmt.Errorf("shim.plans: routes need at least one plan")
	}
	if err := g.Validate(); err != nil {
		return fmt.Errorf("shim: %s", strings.TrimPrefix(err.Error(), "upstream: "))
	}
	return nil
}

// parseUpstreams turns --upstream openai=URL flags into the config map.
func parseUpstreams(flags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, f := range flags {
		name, url, ok := strings.Cut(f, "=")
		if !ok || name == "" || url == "" {
			return nil, registry.Invalidf("--upstream %q: want NAME=URL, e.g. openai=https://api.openai.com", f)
		}
		out[name] = url
	}
	return out, nil
}

// upstreamKeyEnv names the environment variable holding each upstream's key.
var upstreamKeyEnv = map[string]string{"openai": "CADUCEUS_OPENAI_API_KEY", "anthropic": "CADUCEUS_ANTHROPIC_API_KEY"}

// check validates the section before the store is opened: every problem
// names its setting.
func (c *Section) check() error {
	for name, url := range c.Upstreams {
		if _, ok := upstreamKeyEnv[name]; !ok {
			return registry.Invalidf("upstream %q: want openai or anthropic", name)
		}
		if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return registry.Invalidf("upstream %s=%q: want an http(s) URL", name, url)
		}
	}
	for t := range c.Cohorts {
		if !contract.ValidTenantSlot(t) {
			return registry.Invalidf("shim.cohorts: %q is not a tenant slot", t)
		}
	}
	if err := c.CheckGateway(); err != nil {
		return &registry.InvalidError{Err: err}
	}
	return nil
}
