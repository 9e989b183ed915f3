package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/broker/robinhood"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executorgate"
	"github.com/caduceus-dev/caduceus/executor/executorsql"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/relay/relaygate"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradergate"
	"github.com/caduceus-dev/caduceus/trader/tradersql"
)

// operatorCaller is who a CLI command acts as: the operator at the data
// directory, with every scope, in the tenant named by --tenant. Its subject
// is the hash of "operator:cli", so its records are told apart from any key's.
func operatorCaller(tenant contract.TenantSlot) contract.Caller {
	return contract.Caller{
		Identity: contract.Identity{TenantSlot: tenant, Subject: auth.Subject("operator:cli"), Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID:    "cli",
		Scopes:   slices.Clone(contract.Scopes),
		Trace:    contract.Trace{Route: "cli"},
	}
}

func (a *app) gateOn(name string) bool { return slices.Contains(a.cfg.Gates, name) }

func (a *app) traderService(db *store.DB) (*trader.Service, error) {
	return trader.New(tradersql.New(db), trader.Options{Logger: a.log})
}

// gates builds the enabled gates, in the order of allGates. closeAll
// releases what they hold (the relay's sockets and NATS connection); call
// it once the server has stopped.
func (a *app) gates(ctx context.Context, db *store.DB) (gs []gate.Gate, closeAll func(), err error) {
	var closers []func()
	closeAll = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	if a.gateOn("trader") {
		svc, err := a.traderService(db)
		if err != nil {
			return nil, closeAll, err
		}
		gs = append(gs, tradergate.New(svc))
	}
	if a.gateOn("executor") {
		if !a.executorConfigured() {
			a.log.Info("executor gate: not configured (no --skills, --broker, --scenario or --mcp-url, no DATA/skills); not serving executor ticks")
			gs = append(gs, executorgate.NotConfigured(errExecutorNotConfigured()))
		} else {
			ex, err := a.executor(ctx, db)
			if err != nil {
				return nil, closeAll, err
			}
			gs = append(gs, executorgate.New(ex))
		}
	}
	if a.gateOn("shim") {
		g, err := a.shimService(db)
		if err != nil {
			return nil, closeAll, err
		}
		cfg := shimgate.Config{Service: g.svc, Memory: g.mem, Sync: g.syncer(a, db, false), AllowedOrigins: a.cfg.Shim.CORS.AllowedOrigins,
			Receipts: shimsql.New(db)}
		if g.gw != nil {
			cfg.Spend, cfg.Gateway = ledger.Of(db), g.gw
			cfg.Jobs = []gate.Job{
				{Name: "ledger", Run: func(ctx context.Context) { a.ledgerJob(ctx, db) }},
				{Name: "route check", Run: func(ctx context.Context) { a.checkRoutes(ctx, g.gw) }},
			}
		}
		gs = append(gs, shimgate.New(cfg))
	}
	if a.gateOn("relay") && a.relayConfigured() {
		c, closeRelay, err := a.relayConnector(db)
		if err != nil {
			return nil, closeAll, err
		}
		closers = append(closers, closeRelay)
		gs = append(gs, relaygate.New(c))
	}
	return gs, closeAll, nil
}

// executorConfigured reports whether the operator asked for the executor
// gate: any executor setting, a DATA/skills directory, or a --gates list
// that is not the default one. Only then must it be usable, or serve
// refuses to start; `caduceus serve` with no flags runs without it.
func (a *app) executorConfigured() bool {
	c := a.cfg.Executor
	if c.Skills != "" || c.Broker != "" || c.Scenario != "" || c.MCPURL != "" {
		return true
	}
	if st, err := os.Stat(filepath.Join(a.cfg.Data, "skills")); err == nil && st.IsDir() {
		return true
	}
	return !slices.Equal(a.cfg.Gates, allGates)
}

// errExecutorNotConfigured answers ticks (HTTP and MCP) on a server whose
// executor gate was not configured: a problem naming what to set, never a
// 5xx.
func errExecutorNotConfigured() error {
	return contract.NotFoundf("executor_not_configured", "the executor gate is not configured on this server: start caduceus serve with --skills DIR (holding skills/investing/strategists/<name>/SKILL.md) and --scenario FILE (paper broker), or --broker robinhood --mcp-url URL with %s set", EnvRobinhoodToken)
}

// executor builds the executor gate of `serve`: the paper broker (one
// simulated account set per tenant, from the scenario file) or the Robinhood
// MCP client, the skills root, and the store's state and audit log. Anything
// unusable (a skills root that is not a directory or has no strategists, a
// paper broker without a scenario or without accounts, Robinhood without a
// URL or token, or unreachable) refuses the start with one line naming the
// flag or file.
func (a *app) executor(ctx context.Context, db *store.DB) (*executor.Executor, error) {
	c := a.cfg.Executor
	ex := &executor.Executor{Store: executorsql.New(db), Audit: db.Audit(), Skills: c.Skills}
	if ex.Skills == "" {
		ex.Skills = filepath.Join(a.cfg.Data, "skills")
	}
	refuse := func(format string, args ...any) error {
		return &exitError{2, fmt.Errorf("executor gate: "+format, args...)}
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
			return nil, refuse("--scenario %s: %s", c.Scenario, userMessage(err))
		}
		if len(sc.Accounts) == 0 {
			return nil, refuse("--scenario %s has no accounts", c.Scenario)
		}
		brokers, err := paper.Brokers(executorsql.New(db), b)
		if err != nil {
			return nil, refuse("--scenario %s: %s", c.Scenario, userMessage(err))
		}
		ex.Brokers = brokers
	case "robinhood":
		if c.MCPURL == "" {
			return nil, refuse("--broker robinhood needs --mcp-url URL (executor.mcp_url, CADUCEUS_MCP_URL)")
		}
		token := a.getenv(EnvRobinhoodToken)
		if token == "" {
			return nil, refuse("--broker robinhood needs the %s environment variable", EnvRobinhoodToken)
		}
		rh, err := robinhood.Dial(ctx, c.MCPURL, token, nil)
		if err != nil {
			return nil, &exitError{1, fmt.Errorf("executor gate: --mcp-url %s: %s", c.MCPURL, userMessage(err))}
		}
		ex.Broker = rh
	default:
		return nil, refuse("--broker %q: want paper or robinhood", c.Broker)
	}
	return ex, nil
}
