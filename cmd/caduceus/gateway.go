package main

import (
	"maps"
	"slices"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/store"
)

// gateway builds the shim's governed upstream path from shim.routes,
// shim.plans, shim.prices and shim.budgets (nil when no route is
// configured): each route's key from its key_env, the ledger and holds on
// the store every process shares.
func (a *app) gateway(db *store.DB) *gateway.Gateway {
	c := a.cfg.Shim.Gateway
	if !c.Enabled() {
		return nil
	}
	keys := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		r := c.Routes[name]
		if r.KeyEnv == "" {
			continue
		}
		if k := a.getenv(r.KeyEnv); k != "" {
			keys[name] = k
		}
	}
	return gateway.New(gateway.Config{Upstream: c, Keys: keys, Ledger: db.ShimSpend(), Holds: db.ShimSpend(), Logger: a.log})
}

// logGateway states the gateway's routes and plans at startup, warning for
// a route whose key variable is empty.
func (a *app) logGateway() {
	c := a.cfg.Shim.Gateway
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		r := c.Routes[name]
		switch {
		case r.KeyEnv == "":
			a.log.Warn("shim route has no key_env: requests go upstream without authorization", "route", name, "url", r.BaseURL)
		case a.getenv(r.KeyEnv) == "":
			a.log.Warn("shim route key is empty: requests go upstream without authorization", "route", name, "url", r.BaseURL, "set", r.KeyEnv)
		default:
			a.log.Info("shim route", "route", name, "kind", r.Kind, "provider", r.ProviderOf(), "url", r.BaseURL, "models", r.Models, "key", "from "+r.KeyEnv)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Plans)) {
		a.log.Info("shim plan", "plan", name, "failover", c.Plans[name].Failover, "models", slices.Sorted(maps.Keys(c.Plans[name].Models)))
	}
}
