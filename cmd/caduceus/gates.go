package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/broker/robinhood"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	execcli "github.com/caduceus-dev/caduceus/executor/cli"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trader"
)

// operatorCaller is who a CLI command acts as: the operator at the data
// directory, with every scope, in the tenant named by --tenant. Its subject
// is the hash of "operator:cli", so its records are told apart from any key's.
func operatorCaller(tenant contract.TenantSlot) contract.Caller {
	return contract.Caller{
		Identity: contract.Identity{TenantSlot: tenant, Subject: auth.Subject("operator:cli"), Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID:    "cli",
		Scopes:   slices.Clone(contract.Scopes),
	}
}

func (a *app) gateOn(name string) bool { return slices.Contains(a.cfg.Gates, name) }

func (a *app) traderService(db *store.DB) (*trader.Service, error) {
	return trader.New(db.Trader(), trader.Options{Logger: a.log})
}

// gates builds the services of the enabled gates into the server config.
func (a *app) gates(ctx context.Context, db *store.DB, cfg *server.Config) error {
	if a.gateOn("trader") {
		svc, err := a.traderService(db)
		if err != nil {
			return err
		}
		cfg.Trader = svc
	}
	if a.gateOn("shim") {
		g, err := a.shimService(db)
		if err != nil {
			return err
		}
		cfg.Shim, cfg.ShimMemory, cfg.ShimSync = g.svc, g.mem, g.syncer(a, db, false)
	}
	if a.gateOn("executor") {
		ex, err := a.executor(ctx, db)
		if err != nil {
			return err
		}
		cfg.Executor = ex
	}
	return nil
}

// executor builds the executor gate of `serve`: the paper broker (one
// simulated account set per tenant, from the scenario file) or the Robinhood
// MCP client, the skills root, and the store's state and audit log.
func (a *app) executor(ctx context.Context, db *store.DB) (*executor.Executor, error) {
	c := a.cfg.Executor
	ex := &executor.Executor{Store: db.ExecutorState(), Audit: db.Audit(), Skills: c.Skills}
	if ex.Skills == "" {
		ex.Skills = filepath.Join(a.cfg.Data, "skills")
	}
	switch c.Broker {
	case "", "paper":
		scenario := []byte("accounts: []\n")
		if c.Scenario != "" {
			b, err := os.ReadFile(c.Scenario)
			if err != nil {
				return nil, &exitError{2, fmt.Errorf("executor scenario: %w", err)}
			}
			scenario = b
		}
		brokers, err := execcli.PaperBrokers(db.ExecutorState(), scenario)
		if err != nil {
			return nil, &exitError{2, fmt.Errorf("executor scenario %s: %s", c.Scenario, userMessage(err))}
		}
		ex.Brokers = brokers
	case "robinhood":
		rh, err := robinhood.Dial(ctx, c.MCPURL, a.getenv(EnvRobinhoodToken), nil)
		if err != nil {
			return nil, fmt.Errorf("executor: robinhood: %w", err)
		}
		ex.Broker = rh
	default:
		return nil, &exitError{2, fmt.Errorf("executor broker %q: want paper or robinhood", c.Broker)}
	}
	return ex, nil
}
