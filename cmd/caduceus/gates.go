package main

import (
	"context"
	"errors"
	"slices"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/store"

	// The gates this program links: each registers its module
	// (gate/registry), and the program builds what is registered.
	_ "github.com/caduceus-dev/caduceus/executor/executorgate"
	_ "github.com/caduceus-dev/caduceus/relay/relaygate"
	_ "github.com/caduceus-dev/caduceus/shim/shimserve"
	_ "github.com/caduceus-dev/caduceus/trader/tradergate"
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

// host is what the gates are built on: db (nil before the store opens),
// the logger, the environment, the data directory and NATS.
func (a *app) host(db *store.DB) registry.Host {
	return registry.Host{DB: db, Log: a.log, Getenv: a.getenv, Data: a.cfg.Data, NATS: a.cfg.NATS,
		Chosen: !slices.Equal(a.cfg.Gates, registry.Names())}
}

// sections are the gates' decoded config sections (a gate whose section
// the file leaves out has its zero section).
func (a *app) sections() registry.Sections {
	if a.cfg.sections == nil {
		a.cfg.sections = registry.Sections{}
	}
	return a.cfg.sections
}

// gates builds the enabled gates (registry.Build). closeAll releases what
// they hold (the relay's sockets and NATS connection); call it once the
// server has stopped.
func (a *app) gates(ctx context.Context, db *store.DB) ([]gate.Gate, func(), error) {
	gs, closeAll, err := registry.Build(ctx, a.host(db), a.sections(), a.cfg.Gates)
	return gs, closeAll, asExit(err)
}

// asExit is err with the exit status it means: 2 for a configuration a
// module refused, else as it is.
func asExit(err error) error {
	if e, ok := errors.AsType[*registry.InvalidError](err); ok {
		return &exitError{2, e.Err}
	}
	return err
}
