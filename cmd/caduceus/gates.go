package main

import (
	"slices"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
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
func (a *app) gates(db *store.DB, cfg *server.Config) error {
	if a.gateOn("trader") {
		svc, err := a.traderService(db)
		if err != nil {
			return err
		}
		cfg.Trader = svc
	}
	return nil
}
