package shimserve

import (
	"maps"
	"slices"
	"sort"

	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/shim/provider"
)

// describe states, at startup and after a reload, the shim's offline mode
// and upstreams (warning for an upstream without a key: its requests would
// go out unauthorized), or the gateway's routes and plans.
func describe(h registry.Host, s *Section) {
	if s.Offline {
		h.Log.Info("shim offline: no LLM provider is ever called; provisions answer directly or the request is refused (503 offline)")
	} else if s.Gateway.Enabled() {
		logGateway(h, s)
	} else if len(s.Upstreams) == 0 {
		h.Log.Info("shim: no upstreams configured; a request no provision answers is refused (503 upstream_not_configured)")
	}
	names := make([]string, 0, len(s.Upstreams))
	for n := range s.Upstreams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		env := upstreamKeyEnv[n]
		if s.Offline {
			h.Log.Info("shim upstream configured but unused (offline)", "upstream", n, "url", s.Upstreams[n])
		} else if h.Getenv(env) == "" {
			h.Log.Warn("shim upstream has no key: requests go upstream without authorization", "upstream", n, "url", s.Upstreams[n], "set", env)
		} else {
			h.Log.Info("shim upstream", "upstream", n, "url", s.Upstreams[n], "key", "from "+env)
		}
	}

}

// logGateway states the gateway's routes and plans at startup, warning for
// a route whose key variable is empty.
func logGateway(h registry.Host, s *Section) {
	c := s.Gateway
	for _, name := range slices.Sorted(maps.Keys(c.Routes)) {
		r := c.Routes[name]
		if cs, ok := provider.For(r.Kind).(provider.CredentialSource); ok {
			if from, err := cs.Credential(r, h.Getenv); err != nil {
				h.Log.Warn("shim route has no credential: its requests will be refused upstream", "route", name, "kind", r.Kind, "err", err)
			} else {
				h.Log.Info("shim route", "route", name, "kind", r.Kind, "provider", r.ProviderOf(), "models", r.Models, "key", "from "+from)
			}
			continue
		}
		switch {
		case r.KeyEnv == "":
			h.Log.Warn("shim route has no key_env: requests go upstream without authorization", "route", name, "url", r.BaseURL)
		case h.Getenv(r.KeyEnv) == "":
			h.Log.Warn("shim route key is empty: requests go upstream without authorization", "route", name, "url", r.BaseURL, "set", r.KeyEnv)
		default:
			h.Log.Info("shim route", "route", name, "kind", r.Kind, "provider", r.ProviderOf(), "url", r.BaseURL, "models", r.Models, "key", "from "+r.KeyEnv)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Plans)) {
		h.Log.Info("shim plan", "plan", name, "failover", c.Plans[name].Failover, "models", slices.Sorted(maps.Keys(c.Plans[name].Models)))
	}
}
