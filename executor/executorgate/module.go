package executorgate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/broker/robinhood"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executorsql"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/gate/registry"
)

// Section is the executor section of the config file, layered under the
// environment and serve's flags.
type Section struct {
	Skills   string `yaml:"skills"`   // skills root of the strategist manifests (default DATA/skills)
	Broker   string `yaml:"broker"`   // paper (default) or robinhood
	Scenario string `yaml:"scenario"` // paper scenario YAML
	MCPURL   string `yaml:"mcp_url"`  // Robinhood MCP server
}

func init() {
	str := func(field func(*Section) *string) func(any, []string) error {
		return func(s any, v []string) error { *field(s.(*Section)) = v[0]; return nil }
	}
	registry.Register(registry.Module{
		Name: "executor", Order: 20,
		Section: "executor", New: func() any { return &Section{} },
		Paths: func(s any, rel func(string) string) {
			c := s.(*Section)
			c.Skills, c.Scenario = rel(c.Skills), rel(c.Scenario)
		},
		Settings: []registry.Setting{
			{Flag: "skills", Env: "CADUCEUS_SKILLS", Usage: "executor: skills root of the strategist manifests (default DATA/skills; env CADUCEUS_SKILLS)", Set: str(func(c *Section) *string { return &c.Skills })},
			{Flag: "broker", Env: "CADUCEUS_BROKER", Usage: "executor: paper (default) or robinhood (env CADUCEUS_BROKER)", Set: str(func(c *Section) *string { return &c.Broker })},
			{Flag: "scenario", Env: "CADUCEUS_SCENARIO", Usage: "executor: paper broker scenario YAML (env CADUCEUS_SCENARIO)", Set: str(func(c *Section) *string { return &c.Scenario })},
			{Flag: "mcp-url", Env: "CADUCEUS_MCP_URL", Usage: "executor: Robinhood MCP server URL; token from " + robinhood.EnvToken, Set: str(func(c *Section) *string { return &c.MCPURL })},
		},
		Check:        func(_ registry.Host, s any) error { return check(s.(*Section)) },
		Configured:   func(h registry.Host, s any) bool { return configured(h, s.(*Section)) },
		Unserved:     "executor gate: not configured (no --skills, --broker, --scenario or --mcp-url, no DATA/skills); not serving executor ticks",
		Unconfigured: func() gate.Gate { return NotConfigured(errNotConfigured()) },
		Build: func(ctx context.Context, h registry.Host, s any) (gate.Gate, error) {
			ex, err := build(ctx, h, s.(*Section))
			if err != nil {
				return nil, err
			}
			return New(ex), nil
		},
		Describe: func(h registry.Host, s any) {
			c := s.(*Section)
			switch c.Broker {
			case "robinhood":
				h.Log.Info("executor broker", "broker", "robinhood", "mcp_url", c.MCPURL, "token", h.Getenv(robinhood.EnvToken) != "")
			default:
				h.Log.Info("executor broker", "broker", "paper", "scenario", orDefault(c.Scenario, "(none: no accounts)"), "skills", orDefault(c.Skills, h.Data+"/skills"))
			}
		},
	})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// configured reports whether the operator asked for the executor gate: any
// executor setting, a DATA/skills directory, or gates the operator chose.
// Only then must it be usable, or serve refuses to start; `caduceus serve`
// with no flags runs without it.
func configured(h registry.Host, c *Section) bool {
	if c.Skills != "" || c.Broker != "" || c.Scenario != "" || c.MCPURL != "" {
		return true
	}
	if st, err := os.Stat(filepath.Join(h.Data, "skills")); err == nil && st.IsDir() {
		return true
	}
	return h.Chosen
}

// errNotConfigured answers ticks (HTTP and MCP) on a server whose executor
// gate was not configured: a problem naming what to set, never a 5xx.
func errNotConfigured() error {
	return contract.NotFoundf("executor_not_configured", "the executor gate is not configured on this server: start caduceus serve with --skills DIR (holding skills/investing/strategists/<name>/SKILL.md) and --scenario FILE (paper broker), or --broker robinhood --mcp-url URL with %s set", robinhood.EnvToken)
}

// check validates the section before the store is opened.
func check(c *Section) error {
	bad := registry.Invalidf
	switch c.Broker {
	case "", "paper":
		if c.Scenario != "" {
			b, err := os.ReadFile(c.Scenario)
			if err != nil {
				return bad("executor gate: --scenario %s (executor.scenario): %v", c.Scenario, err)
			}
			if _, err := paper.ParseScenario(b); err != nil {
				return bad("executor gate: --scenario %s (executor.scenario): %v", c.Scenario, err)
			}
		}
	case "robinhood":
		if c.MCPURL == "" {
			return bad("executor gate: --mcp-url (executor.mcp_url): the robinhood broker needs the MCP server URL")
		}
	default:
		return bad("executor gate: --broker %q (executor.broker): want paper or robinhood", c.Broker)
	}
	if c.Skills != "" {
		if st, err := os.Stat(c.Skills); err != nil || !st.IsDir() {
			return bad("executor gate: --skills %s (executor.skills): not a directory", c.Skills)
		}
	}
	return nil
}

// build builds the executor of serve: the paper broker (one simulated
// account set per tenant, from the scenario file) or the Robinhood MCP
// client, the skills root, and the store's state and audit log. Anything
// unusable (a skills root that is not a directory or has no strategists, a
// paper broker without a scenario or without accounts, Robinhood without a
// URL or token, or unreachable) refuses the start with one line naming the
// flag or file.
func build(ctx context.Context, h registry.Host, c *Section) (*executor.Executor, error) {
	ex := &executor.Executor{Store: executorsql.New(h.DB), Audit: h.DB.Audit(), Skills: c.Skills}
	if ex.Skills == "" {
		ex.Skills = filepath.Join(h.Data, "skills")
	}
	refuse := func(format string, args ...any) error {
		return registry.Invalidf("executor gate: "+format, args...)
	}
	if st, err := os.Stat(ex.Skills); err != nil || !st.IsDir() {
		return nil, refuse("--skills %s is not a readable directory (executor.skills, CADUCEUS_SKILLS; default DATA/skills)", ex.Skills)
	}
	if st, err := os.Stat(filepath.Join(ex.Skills, executor.ManifestDir)); err != nil || !st.IsDir() {
		return nil, refuse("--skills %s has no %s directory of strategist manifests", ex.Skills, executor.ManifestDir)
	}
	switch c.Broker {
	case "", "paper":
		if c.Scenario == "" {
			return nil, refuse("--broker paper needs --scenario FILE (executor.scenario, CADUCEUS_SCENARIO): the paper accounts to trade")
		}
		b, err := os.ReadFile(c.Scenario)
		if err != nil {
			return nil, refuse("--scenario %s: %v", c.Scenario, err)
		}
		sc, err := paper.ParseScenario(b)
		if err != nil {
			return nil, refuse("--scenario %s: %s", c.Scenario, registry.UserMessage(err))
		}
		if len(sc.Accounts) == 0 {
			return nil, refuse("--scenario %s has no accounts", c.Scenario)
		}
		brokers, err := paper.Brokers(executorsql.New(h.DB), b)
		if err != nil {
			return nil, refuse("--scenario %s: %s", c.Scenario, registry.UserMessage(err))
		}
		ex.Brokers = brokers
	case "robinhood":
		if c.MCPURL == "" {
			return nil, refuse("--broker robinhood needs --mcp-url URL (executor.mcp_url, CADUCEUS_MCP_URL)")
		}
		token := h.Getenv(robinhood.EnvToken)
		if token == "" {
			return nil, refuse("--broker robinhood needs the %s environment variable", robinhood.EnvToken)
		}
		rh, err := robinhood.Dial(ctx, c.MCPURL, token, nil)
		if err != nil {
			return nil, fmt.Errorf("executor gate: --mcp-url %s: %s", c.MCPURL, registry.UserMessage(err))
		}
		ex.Broker = rh
	default:
		return nil, refuse("--broker %q: want paper or robinhood", c.Broker)
	}
	return ex, nil
}
