package main

import (
	"strings"

	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/store"
)

// checkServeConfig validates everything serve reads from files and the
// environment before the store is opened, so a bad configuration changes
// nothing (no data directory, no tables in a Postgres database). Every
// problem exits 2 naming the setting.
func (a *app) checkServeConfig() error {
	if err := store.CheckName(a.cfg.Store); err != nil {
		return &exitError{2, err}
	}
	if err := registry.CheckAll(a.host(nil), a.sections(), a.cfg.Gates); err != nil {
		if _, ok := err.(*registry.InvalidError); !ok {
			err = &registry.InvalidError{Err: err}
		}
		return asExit(err)
	}
	return nil
}

// servedGates is the gates serve actually answers: the enabled ones their
// modules find configured.
func (a *app) servedGates() []string {
	return registry.ServedNames(a.host(nil), a.sections(), a.cfg.Gates)
}

// logStartup states what this process serves: the gates, the store, and
// what each gate says of itself (registry.DescribeAll).
func (a *app) logStartup(db *store.DB, addr string) {
	a.log.Info("listening", "addr", "http://"+addr, "gates", a.servedGates(), "store", db.Name(), "data", a.storeWhere())
	registry.DescribeAll(a.host(db), a.sections(), a.cfg.Gates)
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
