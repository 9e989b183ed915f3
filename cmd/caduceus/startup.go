package main

import (
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
)

// upstreamKeyEnv names the environment variable holding each upstream's key.
var upstreamKeyEnv = map[string]string{"openai": "CADUCEUS_OPENAI_API_KEY", "anthropic": "CADUCEUS_ANTHROPIC_API_KEY"}

// checkServeConfig validates everything serve reads from files and the
// environment before the store is opened, so a bad configuration changes
// nothing (no data directory, no tables in a Postgres database). Every
// problem exits 2 naming the setting.
func (a *app) checkServeConfig() error {
	bad := func(format string, args ...any) error { return &exitError{2, fmt.Errorf(format, args...)} }
	for _, g := range a.cfg.Gates {
		if !slices.Contains(allGates, g) {
			return bad("unknown gate %q (want %v)", g, allGates)
		}
	}
	if err := store.CheckName(a.cfg.Store); err != nil {
		return bad("%v", err)
	}
	if a.gateOn("executor") && a.executorConfigured() {
		c := a.cfg.Executor
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
	}
	if a.gateOn("shim") {
		for name, url := range a.cfg.Shim.Upstreams {
			if _, ok := upstreamKeyEnv[name]; !ok {
				return bad("upstream %q: want openai or anthropic", name)
			}
			if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
				return bad("upstream %s=%q: want an http(s) URL", name, url)
			}
		}
		for t := range a.cfg.Shim.Cohorts {
			if !contract.ValidTenantSlot(t) {
				return bad("shim.cohorts: %q is not a tenant slot", t)
			}
		}
		if err := a.cfg.Shim.checkGateway(); err != nil {
			return bad("%v", err)
		}
	}
	if a.gateOn("relay") && a.relayConfigured() {
		if _, err := a.cfg.Relay.Config(a.getenv); err != nil {
			return bad("%s", userMessage(err))
		}
	}
	return nil
}

// servedGates is the gates serve actually answers: relay only when the
// config names a gateway or a platform.
func (a *app) servedGates() []string {
	var out []string
	for _, g := range a.cfg.Gates {
		if g == "relay" && !a.relayConfigured() || g == "executor" && !a.executorConfigured() {
			continue
		}
		out = append(out, g)
	}
	return out
}

// logStartup states what this process serves: the gates, the store, the
// shim's offline mode and upstreams (warning for an upstream without a key:
// its requests would go out unauthorized), and the executor's broker.
func (a *app) logStartup(db *store.DB, addr string) {
	a.log.Info("listening", "addr", "http://"+addr, "gates", a.servedGates(), "store", db.Name(), "data", a.storeWhere())
	if a.gateOn("relay") && !a.relayConfigured() {
		a.log.Info("relay gate not served: no gateways or platforms in the relay section of the config")
	}
	if a.gateOn("shim") {
		s := a.cfg.Shim
		if s.Offline {
			a.log.Info("shim offline: no LLM provider is ever called; provisions answer directly or the request is refused (503 offline)")
		} else if s.Gateway.Enabled() {
			a.logGateway()
		} else if len(s.Upstreams) == 0 {
			a.log.Info("shim: no upstreams configured; a request no provision answers is refused (503 upstream_not_configured)")
		}
		names := make([]string, 0, len(s.Upstreams))
		for n := range s.Upstreams {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			env := upstreamKeyEnv[n]
			if s.Offline {
				a.log.Info("shim upstream configured but unused (offline)", "upstream", n, "url", s.Upstreams[n])
			} else if a.getenv(env) == "" {
				a.log.Warn("shim upstream has no key: requests go upstream without authorization", "upstream", n, "url", s.Upstreams[n], "set", env)
			} else {
				a.log.Info("shim upstream", "upstream", n, "url", s.Upstreams[n], "key", "from "+env)
			}
		}
	}
	if a.gateOn("executor") && a.executorConfigured() {
		c := a.cfg.Executor
		switch c.Broker {
		case "robinhood":
			a.log.Info("executor broker", "broker", "robinhood", "mcp_url", c.MCPURL, "token", a.getenv(EnvRobinhoodToken) != "")
		default:
			a.log.Info("executor broker", "broker", "paper", "scenario", orDefault(c.Scenario, "(none: no accounts)"), "skills", orDefault(c.Skills, a.cfg.Data+"/skills"))
		}
	}
}

// storeWhere is where the store lives, without credentials.
func (a *app) storeWhere() string {
	if a.cfg.Store == "" {
		return a.cfg.Data
	}
	if strings.HasPrefix(a.cfg.Store, "postgres") {
		return "postgres (DSN from --store)"
	}
	return a.cfg.Store
}
