package shim_test

import (
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

func init() {
	callers["key-local"] = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_8888888888888888", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kl", Scopes: []contract.Scope{contract.ScopeRoute}, Harness: "claude-code",
		Grants: []string{"anthropic/claude-sonnet-4-5", "openai/gpt-4o", "ollama/llama3.2"}}
}

// TestReceiptCarriesTheHUXRoute: every receipt carries the seed's route —
// the model asked for, the model identity that served it (not the route's
// name) and its provider class: codex for an openai route, claude for an
// anthropic one, local for a model priced at zero (an Ollama route) — in
// the receipt (valid against the receipt schema: e.receipts checks) and in
// its audit record's provenance; that record is personal and says the
// bodies are kept as hashes.
func TestReceiptCarriesTheHUXRoute(t *testing.T) {
	db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	price := gwconf.Price{Input: 2_000_000, Output: 8_000_000, MaxOutputTokens: 4096}
	e := newEnv(t, func(c *shim.Config) {
		base := c.Upstreams["openai"].BaseURL
		conf := gwconf.Config{
			Routes: map[string]gwconf.Route{
				"main-openai": {Kind: gwconf.KindOpenAI, BaseURL: base, Models: []string{"gpt-4o"}},
				"main-claude": {Kind: gwconf.KindAnthropic, BaseURL: base, Models: []string{"claude-sonnet-4-5"}},
				"ollama":      {Kind: gwconf.KindOpenAI, Provider: "ollama", BaseURL: base, Models: []string{"llama3.2"}},
			},
			Plans: map[string]gwconf.Plan{"main": {Failover: gwconf.FailoverNone, Models: map[string][]gwconf.Step{
				"gpt-4o": {{Route: "main-openai"}}, "claude-sonnet-4-5": {{Route: "main-claude"}}, "llama3.2": {{Route: "ollama"}}}}},
			Prices: map[string]gwconf.Price{"openai/gpt-4o": price, "anthropic/claude-sonnet-4-5": price, "ollama/llama3.2": {}},
		}
		if err := conf.Validate(); err != nil {
			t.Fatal(err)
		}
		c.Gateway = gateway.New(gateway.Config{Upstream: conf, Ledger: ledger.Of(db), Holds: ledger.Of(db)})
	})
	for _, tc := range []struct {
		p     wire.Protocol
		model string
		want  contract.Route
	}{
		{wire.ChatCompletions, "gpt-4o", contract.Route{Requested: "gpt-4o", ResolvedTarget: "openai/gpt-4o", Provider: contract.ProviderCodex}},
		{wire.Messages, "claude-sonnet-4-5", contract.Route{Requested: "claude-sonnet-4-5", ResolvedTarget: "anthropic/claude-sonnet-4-5", Provider: contract.ProviderClaude}},
		{wire.ChatCompletions, "llama3.2", contract.Route{Requested: "llama3.2", ResolvedTarget: "ollama/llama3.2", Provider: contract.ProviderLocal}},
	} {
		if _, err := call(t, e, "key-local", tc.p, false, tc.model, "hello route", nil); err != nil {
			t.Fatalf("%s: %v", tc.model, err)
		}
		rc := e.receipts(t, "key-local")[0]
		if rc.Route == nil || *rc.Route != tc.want {
			t.Errorf("%s: receipt route %+v, want %+v", tc.model, rc.Route, tc.want)
		}
		recs := e.audit.Records("slot-1")
		last := recs[len(recs)-1]
		if last.Provenance == nil || last.Provenance.Route == nil || *last.Provenance.Route != tc.want {
			t.Errorf("%s: audit provenance %+v, want route %+v", tc.model, last.Provenance, tc.want)
		}
		// The record keeps the bodies as hashes, and says so.
		if last.Sensitivity != contract.SensitivityPersonal || last.Redaction == nil || *last.Redaction != shim.BodiesAsHashes {
			t.Errorf("%s: sensitivity %q redaction %+v", tc.model, last.Sensitivity, last.Redaction)
		}
	}
}
