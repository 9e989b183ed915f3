package main

// The configuration: what serve and every command read, as types and
// pure functions (the layering of file, environment and flags is layer.go).

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
	"go.yaml.in/yaml/v3"
)

// config is what every command reads: file, then environment, then flags.
type config struct {
	Addr     string   `yaml:"addr"`
	Data     string   `yaml:"data"`
	Store    string   `yaml:"store"`
	Gates    []string `yaml:"gates"`
	LogLevel string   `yaml:"log_level"`
	// LogFormat is text (slog's key=value lines, the default) or json.
	LogFormat string `yaml:"log_format"`
	Executor  struct {
		Skills   string `yaml:"skills"`   // skills root of the strategist manifests
		Broker   string `yaml:"broker"`   // paper (default) or robinhood
		Scenario string `yaml:"scenario"` // paper scenario YAML
		MCPURL   string `yaml:"mcp_url"`  // Robinhood MCP server
	} `yaml:"executor"`
	Shim  shimConfig           `yaml:"shim"`
	Relay connector.FileConfig `yaml:"relay"`
	// NATS routes relay session ownership across connector processes.
	NATS string `yaml:"nats"`
	// Audit checkpoints written by serve (see docs/audit.md).
	Audit auditConfig `yaml:"audit"`
	// MCPAllowedOrigins are the browser origins /mcp accepts.
	MCPAllowedOrigins []string `yaml:"mcp_allowed_origins"`
}

// readConfigFile reads a YAML config file. Unknown keys are refused, and
// relative paths in it (data, store sqlite:PATH, executor.skills,
// executor.scenario) resolve from the file's own directory, so a config
// works from any working directory. Paths given by flags or the
// environment resolve from the working directory as usual.
func readConfigFile(file string) (config, error) {
	var cfg config
	b, err := os.ReadFile(file)
	if err != nil {
		return cfg, &exitError{2, fmt.Errorf("config: %w", err)}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, &exitError{2, fmt.Errorf("config %s: %w", file, err)}
	}
	dir := filepath.Dir(file)
	rel := func(p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	cfg.Data = rel(cfg.Data)
	cfg.Executor.Skills = rel(cfg.Executor.Skills)
	cfg.Executor.Scenario = rel(cfg.Executor.Scenario)
	if prefix, path, params := store.SplitSQLiteName(cfg.Store); prefix != "" {
		cfg.Store = prefix + rel(path) + params
	}
	return cfg, nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// shimConfig is the shim section of the config file.
type shimConfig struct {
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
func (c shimConfig) ledgerSweep() (time.Duration, error) {
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
func (c shimConfig) attemptTimeout() (time.Duration, error) {
	if c.AttemptTimeout == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(c.AttemptTimeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("shim.attempt_timeout %q: want a positive duration such as 30s", c.AttemptTimeout)
	}
	return d, nil
}

// checkGateway checks the gateway section: a valid configuration, not
// mixed with the ungoverned upstreams, a known isolation.
func (c shimConfig) checkGateway() error {
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
			return nil, &exitError{2, fmt.Errorf("--upstream %q: want NAME=URL, e.g. openai=https://api.openai.com", f)}
		}
		out[name] = url
	}
	return out, nil
}

// auditConfig is the audit section of the config: where serve anchors the
// chains outside the database.
type auditConfig struct {
	CheckpointFile     string `yaml:"checkpoint_file"`     // write a checkpoint here on every interval
	CheckpointURL      string `yaml:"checkpoint_url"`      // POST a checkpoint here on every interval
	CheckpointInterval string `yaml:"checkpoint_interval"` // e.g. 5m (default 5m when a target is set)
}

// DefaultCheckpointInterval is how often serve writes a checkpoint when a
// target is configured without an interval.
const DefaultCheckpointInterval = 5 * time.Minute

var allGates = []string{"trader", "executor", "shim", "relay"}
