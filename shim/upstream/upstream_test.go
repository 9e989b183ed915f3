package upstream

import (
	"strings"
	"testing"
	"time"
)

const goodConfig = `{
  "routes": {
    "openai-main": {"kind": "openai", "base_url": "https://api.openai.com/v1", "key_env": "OPENAI_KEY", "models": ["gpt-4.1", "gpt-4.1-mini"]},
    "openai-backup": {"kind": "openai", "provider": "azure", "base_url": "https://backup.example.com", "key_env": "AZURE_KEY", "models": ["gpt-4.1"]},
    "claude": {"kind": "anthropic", "base_url": "https://api.anthropic.com", "key_env": "ANTHROPIC_KEY", "models": ["claude-sonnet-4-5"]}
  },
  "plans": {
    "main": {"failover": "definite", "models": {
      "gpt-4.1": [{"route": "openai-main"}, {"route": "openai-backup"}, {"route": "openai-main", "model": "gpt-4.1-mini"}],
      "claude-sonnet-4-5": [{"route": "claude"}]}}
  },
  "prices": {
    "openai/gpt-4.1": {"input": 2, "cached_input": "0.5", "output": 8, "max_output_tokens": 32768},
    "openai/gpt-4.1-mini": {"input": 0.4, "cached_input": 0.1, "output": 1.6, "max_output_tokens": 32768},
    "azure/gpt-4.1": {"input": 2, "cached_input": 0.5, "output": 8, "max_output_tokens": 32768},
    "anthropic/claude-sonnet-4-5": {"input": 3, "cached_input": 0.3, "output": 15, "max_output_tokens": 64000}
  },
  "budgets": {"key": {"day": 5}, "tenants": {"slot-1": {"month": "100.25"}}}
}`

func TestParseGoodConfig(t *testing.T) {
	c, err := Parse([]byte(goodConfig))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Prices["openai/gpt-4.1"].CachedInput; got != 500_000 {
		t.Errorf("cached input price = %d µ$/M, want 500000", got)
	}
	if got := c.Budgets.Tenants["slot-1"].Month; got != 100_250_000 {
		t.Errorf("tenant month budget = %d, want 100250000", got)
	}
	name, p, ok := c.PlanFor("slot-9")
	if !ok || name != "main" || len(p.Models["gpt-4.1"]) != 3 {
		t.Fatalf("PlanFor = %q %v %v", name, p, ok)
	}
	if id := c.StepIdentity(p.Models["gpt-4.1"][1], "gpt-4.1"); id != "azure/gpt-4.1" {
		t.Errorf("second step identity = %q", id)
	}
	key, ten := c.Budgets.For("slot-1", "k1")
	if key.Day != 5_000_000 || ten.Month != 100_250_000 {
		t.Errorf("budgets for slot-1/k1 = %+v %+v", key, ten)
	}
}

// TestConfigErrorsNameTheBadEntry: every refusal names the entry to fix.
func TestConfigErrorsNameTheBadEntry(t *testing.T) {
	cases := []struct {
		name, from, to, want string
	}{
		{"second route for one identity",
			`{"route": "openai-main", "model": "gpt-4.1-mini"}]`,
			`{"route": "openai-main", "model": "gpt-4.1-mini"}], "gpt-4.1-mini": [{"route": "openai-dup"}]`,
			"plans.main.models.gpt-4.1-mini[0]: openai/gpt-4.1-mini is already reached through route \"openai-main\""},
		{"unknown route", `{"route": "openai-backup"}`, `{"route": "nowhere"}`, `plans.main.models.gpt-4.1[1]: route "nowhere" is not in routes`},
		{"route does not serve model", `{"route": "claude"}]`, `{"route": "claude", "model": "claude-opus"}]`, `route "claude" does not serve "claude-opus"`},
		{"mixed wires", `{"route": "openai-backup"}`, `{"route": "claude", "model": "claude-sonnet-4-5"}`, "a step serves the other wire only with translate: true"},
		{"bad failover", `"failover": "definite"`, `"failover": "always"`, `plans.main.failover "always"`},
		{"bad kind", `"kind": "anthropic"`, `"kind": "gemini"`, `routes.claude.kind "gemini"`},
		{"bad url", `"https://backup.example.com"`, `"ftp://backup"`, `routes.openai-backup.base_url`},
		{"contributor route model", `"models": ["claude-sonnet-4-5"]`, `"models": ["claude-sonnet-4-5", "x-contributor"]`, "contributor-tier"},
		{"missing price", `"azure/gpt-4.1": {"input": 2, "cached_input": 0.5, "output": 8, "max_output_tokens": 32768},`, ``, "plans.main.models.gpt-4.1[1]: azure/gpt-4.1 has no price"},
		{"float price", `"input": 0.4,`, `"input": 0.0000001,`, `"0.0000001" is not an amount of dollars`},
		{"negative budget", `"day": 5`, `"day": -5`, `"-5" is not an amount`},
		{"unknown field", `"budgets"`, `"budget"`, `unknown field "budget"`},
		{"bad key env", `"key_env": "AZURE_KEY"`, `"key_env": "AZURE KEY"`, `routes.openai-backup.key_env`},
		{"no max output", `"max_output_tokens": 64000`, `"max_output_tokens": 0`, "prices.anthropic/claude-sonnet-4-5: max_output_tokens 0"},
		{"bad timeout", `"key_env": "ANTHROPIC_KEY",`, `"key_env": "ANTHROPIC_KEY", "timeout": "soon",`, `routes.claude.timeout "soon"`},
		{"negative timeout", `"key_env": "ANTHROPIC_KEY",`, `"key_env": "ANTHROPIC_KEY", "timeout": "-5s",`, `routes.claude.timeout "-5s"`},
	}
	dup := `"openai-dup": {"kind": "openai", "base_url": "https://dup.example.com", "models": ["gpt-4.1-mini"]},`
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := goodConfig
			if !strings.Contains(src, tc.from) {
				t.Fatalf("test case: %q not in the config", tc.from)
			}
			src = strings.Replace(src, tc.from, tc.to, 1)
			if strings.Contains(tc.to, "openai-dup") {
				src = strings.Replace(src, `"routes": {`, `"routes": {`+dup, 1)
			}
			_, err := Parse([]byte(src))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}

func TestGrants(t *testing.T) {
	g, err := ParseGrants(" openai/gpt-4.1,anthropic/claude-sonnet-4-5,openai/gpt-4.1, ")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(g, ",") != "anthropic/claude-sonnet-4-5,openai/gpt-4.1" {
		t.Errorf("grants = %v", g)
	}
	for _, bad := range []string{"gpt-4.1", "openai/", "/gpt", "openai/gpt-*-mini", "openai/*gpt", "openai/my-contributor", "Open AI/x", "openai/a b"} {
		if _, err := ParseGrants(bad); err == nil {
			t.Errorf("grant %q accepted", bad)
		} else if !strings.Contains(err.Error(), bad) {
			t.Errorf("error %q does not name %q", err, bad)
		}
	}
	// An explicit pattern the operator wrote is a grant: one '*', at the end.
	if g, err := ParseGrants("openai/gpt-4.1*,local/*"); err != nil || strings.Join(g, ",") != "local/*,openai/gpt-4.1*" {
		t.Errorf("pattern grants: %v %v", g, err)
	}
	// A model name may hold slashes (openrouter-style identities).
	if p, m, err := SplitIdentity("openrouter/meta/llama-3"); err != nil || p != "openrouter" || m != "meta/llama-3" {
		t.Errorf("SplitIdentity = %q %q %v", p, m, err)
	}
}

func TestParseDollars(t *testing.T) {
	good := map[string]Microdollars{"0": 0, "2": 2_000_000, "2.5": 2_500_000, ".5": 500_000, "0.000001": 1, "1000000000": MaxMicrodollars}
	for s, want := range good {
		if got, err := ParseDollars(s); err != nil || got != want {
			t.Errorf("ParseDollars(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", ".", "2.", "-1", "+1", "1e3", "0.0000001", "1000000000.000001", "99999999999", "1,5", " 1"} {
		if _, err := ParseDollars(s); err == nil {
			t.Errorf("ParseDollars(%q) accepted", s)
		}
	}
	if s := Microdollars(2_500_001).String(); s != "2.500001" {
		t.Errorf("String = %q", s)
	}
}

// TestCostRoundsUpExactly: the sum is divided once and rounded up.
func TestCostRoundsUpExactly(t *testing.T) {
	p := Price{Input: 2_000_000, CachedInput: 500_000, Output: 8_000_000, MaxOutputTokens: 100}
	cases := []struct {
		u    Usage
		want Microdollars
	}{
		{Usage{}, 0},
		{Usage{Input: 1}, 2},       // 2,000,000 / 1e6
		{Usage{CachedInput: 1}, 1}, // 0.5 rounds up to 1
		{Usage{CachedInput: 2}, 1}, // exactly 1
		{Usage{CachedInput: 3}, 2}, // 1.5 -> 2
		{Usage{Input: 1000, CachedInput: 3, Output: 10}, 2082}, // 2000 + 1.5 + 80 = 2081.5 -> 2082
		{Usage{Input: -5, Output: 1}, 8},
		{Usage{Input: 1 << 62, Output: 1 << 62}, Microdollars(ceilDiv(uint64(MaxTokens)*2_000_000+uint64(MaxTokens)*8_000_000, 1_000_000))},
	}
	for _, tc := range cases {
		if got := p.Cost(tc.u); got != tc.want {
			t.Errorf("Cost(%+v) = %d, want %d", tc.u, got, tc.want)
		}
	}
	// MaxCost: body bytes at the input price plus the output bound.
	if got := p.MaxCost(1000, 50); got != 2000+400 {
		t.Errorf("MaxCost(1000, 50) = %d", got)
	}
	if got := p.MaxCost(1000, 0); got != 2000+800 {
		t.Errorf("MaxCost without a bound = %d, want the price's max_output_tokens", got)
	}
	// The reservation bounds the settlement for any usage within it.
	for in := int64(0); in <= 1000; in += 37 {
		for cached := int64(0); cached+in <= 1000; cached += 91 {
			if c := p.Cost(Usage{Input: in, CachedInput: cached, Output: 50}); c > p.MaxCost(1000, 50) {
				t.Fatalf("cost %d above the reservation", c)
			}
		}
	}
}

func TestMayFailOver(t *testing.T) {
	cases := []struct {
		policy          Failover
		f               Failure
		sawBytes, grant bool
		want            bool
	}{
		{FailoverNone, Definite, false, true, false},
		{FailoverDefinite, Definite, false, true, true},
		{FailoverDefinite, Uncertain, false, true, false},
		{FailoverUncertain, Uncertain, false, true, true},
		{FailoverUncertain, Uncertain, false, false, false}, // the plan cannot supply the grant
		{FailoverUncertain, Definite, false, false, false},
		{FailoverUncertain, Definite, true, true, false}, // never after the first byte
		{FailoverUncertain, Uncertain, true, true, false},
	}
	for _, tc := range cases {
		if got := MayFailOver(tc.policy, tc.f, tc.sawBytes, tc.grant); got != tc.want {
			t.Errorf("MayFailOver(%s, %d, sawBytes=%v, granted=%v) = %v", tc.policy, tc.f, tc.sawBytes, tc.grant, got)
		}
	}
	for status, want := range map[int]bool{200: false, 400: false, 404: false, 429: true, 500: true, 503: true, 529: true} {
		if _, got := FailureOfStatus(status); got != want {
			t.Errorf("FailureOfStatus(%d) = %v", status, got)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	cases := map[string]time.Duration{
		"":                              30 * time.Second,
		"7":                             7 * time.Second,
		"junk":                          30 * time.Second,
		"999999999":                     24 * time.Hour,
		"Mon, 30 Nov 2026 12:01:00 UTC": time.Minute,
		"Mon, 30 Nov 2026 11:00:00 UTC": 0,
	}
	for v, want := range cases {
		if got := RetryAfter(v, now, 30*time.Second); got != want {
			t.Errorf("RetryAfter(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestFreePriceNeedsNoMaxOutput: a model that costs nothing (a local model
// behind Ollama or vLLM) is priced {input: 0, output: 0}; with no rate to
// bound, max_output_tokens is not asked for, and every attempt reserves and
// costs $0. A priced model still needs it.
func TestFreePriceNeedsNoMaxOutput(t *testing.T) {
	src := strings.Replace(goodConfig, `"openai/gpt-4.1-mini": {"input": 0.4, "cached_input": 0.1, "output": 1.6, "max_output_tokens": 32768}`,
		`"openai/gpt-4.1-mini": {"input": 0, "output": 0}`, 1)
	c, err := Parse([]byte(src))
	if err != nil {
		t.Fatalf("a free price without max_output_tokens: %v", err)
	}
	p := c.Prices["openai/gpt-4.1-mini"]
	if got := p.MaxCost(1<<20, 0); got != 0 {
		t.Errorf("MaxCost of a free model = %d, want 0", got)
	}
	if got := p.Cost(Usage{Input: 1000, CachedInput: 10, Output: 500}); got != 0 {
		t.Errorf("Cost of a free model = %d, want 0", got)
	}
	src = strings.Replace(goodConfig, `"openai/gpt-4.1-mini": {"input": 0.4, "cached_input": 0.1, "output": 1.6, "max_output_tokens": 32768}`,
		`"openai/gpt-4.1-mini": {"input": 0, "output": 0.01}`, 1)
	if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), "prices.openai/gpt-4.1-mini: max_output_tokens 0") {
		t.Errorf("a priced model without max_output_tokens: %v", err)
	}
}

func TestBackoffAndSeconds(t *testing.T) {
	var got []time.Duration
	for n := range 9 {
		got = append(got, Backoff(n+1, time.Minute))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("Backoff 1..9 = %v, want %v seconds", got, want)
		}
	}
	if Backoff(1000, time.Minute) != time.Minute {
		t.Fatal("Backoff overflows")
	}
	for d, want := range map[time.Duration]string{0: "1", time.Millisecond: "1", time.Second: "1", 1500 * time.Millisecond: "2", 60 * time.Second: "60", 59*time.Second + time.Nanosecond: "60"} {
		if got := Seconds(d); got != want {
			t.Errorf("Seconds(%v) = %s, want %s", d, got, want)
		}
	}
}

// TestPlanRetriesAreBounded: a plan's retries are 0 to MaxRetries and its
// backoff a duration from 1ms to 10s; only a definite failure of the
// moment (refused, 502, 503, 504) is retried.
func TestPlanRetriesAreBounded(t *testing.T) {
	for _, tc := range []struct {
		retries int
		backoff string
		ok      bool
	}{{0, "", true}, {5, "250ms", true}, {6, "", false}, {-1, "", false}, {1, "0s", false}, {1, "1m", false}, {1, "soon", false}} {
		p := Plan{Failover: FailoverNone, Retries: tc.retries, RetryBackoff: tc.backoff, Models: map[string][]Step{"gpt-4.1": {{Route: "openai"}}}}
		c := Config{Routes: map[string]Route{"openai": {Kind: KindOpenAI, BaseURL: "https://api.openai.com/v1", Models: []string{"gpt-4.1"}}},
			Plans: map[string]Plan{"main": p}, Prices: map[string]Price{"openai/gpt-4.1": {Input: 1, Output: 1, MaxOutputTokens: 10}}}
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("retries %d backoff %q: %v", tc.retries, tc.backoff, err)
		}
	}
	for _, tc := range []struct {
		f      Failure
		status int
		want   bool
	}{{Definite, 0, true}, {Definite, 502, true}, {Definite, 503, true}, {Definite, 504, true}, {Definite, 429, false}, {Definite, 500, false}, {Uncertain, 0, false}} {
		if got := Retryable(tc.f, tc.status); got != tc.want {
			t.Errorf("Retryable(%v, %d) = %v", tc.f, tc.status, got)
		}
	}
}

// TestPatternsRouteAndPrice: a plan's own name wins over a pattern, the
// longest matching pattern over a shorter one; prices likewise; a route
// serves what its patterns match.
func TestPatternsRouteAndPrice(t *testing.T) {
	p := Plan{Models: map[string][]Step{"gpt-4.1": {{Route: "exact"}}, "gpt-4.1*": {{Route: "family"}}, "gpt-*": {{Route: "wide"}}}}
	for model, want := range map[string]string{"gpt-4.1": "exact", "gpt-4.1-2025-04-14": "family", "gpt-4o": "wide", "claude-x": ""} {
		got := ""
		if st := p.Steps(model); len(st) > 0 {
			got = st[0].Route
		}
		if got != want {
			t.Errorf("Steps(%q) = %q, want %q", model, got, want)
		}
	}
	c := Config{Prices: map[string]Price{"openai/gpt-4.1": {Input: 1}, "openai/gpt-4.1*": {Input: 2}, "openai/*": {Input: 3}}}
	for id, want := range map[string]Microdollars{"openai/gpt-4.1": 1, "openai/gpt-4.1-mini": 2, "openai/o3": 3} {
		if got, ok := c.PriceOf(id); !ok || got.Input != want {
			t.Errorf("PriceOf(%q) = %v %v, want input %v", id, got, ok, want)
		}
	}
	if _, ok := c.PriceOf("anthropic/claude"); ok {
		t.Error("a price for an identity no entry matches")
	}
	r := Route{Models: []string{"gpt-4.1*", "o3"}}
	for model, want := range map[string]bool{"gpt-4.1-2025-04-14": true, "gpt-4.1*": true, "o3": true, "o3-mini": false, "gpt-4o": false} {
		if r.Serves(model) != want {
			t.Errorf("Serves(%q) = %v", model, !want)
		}
	}
}

// TestPricesAsProvidersBill: cache writes at their own price (else the
// input's), reasoning tokens at theirs (else the output's; they are part
// of the output), a per-request fee on every answer, and a reservation
// that bounds the dearer rate of each.
func TestPricesAsProvidersBill(t *testing.T) {
	p := Price{Input: 3_000_000, CachedInput: 300_000, Output: 15_000_000, CacheWrite: 3_750_000, Reasoning: 20_000_000, PerRequest: 1_000, MaxOutputTokens: 100}
	// 1,000 input, 2,000 cache reads, 4,000 cache writes, 500 output of
	// which 200 reasoning: 3,000 + 600 + 15,000 + 300×15 + 200×20 + 1,000 fee.
	if got := p.Cost(Usage{Input: 1000, CachedInput: 2000, CacheWrite: 4000, Output: 500, Reasoning: 200}); got != 3000+600+15000+4500+4000+1000 {
		t.Errorf("Cost = %d", got)
	}
	// Without their own prices, cache writes are input and reasoning output.
	plain := Price{Input: 3_000_000, Output: 15_000_000, MaxOutputTokens: 100}
	if got := plain.Cost(Usage{Input: 1000, CacheWrite: 1000, Output: 500, Reasoning: 200}); got != 6000+7500 {
		t.Errorf("Cost without their own prices = %d", got)
	}
	// More reasoning than output is the output.
	if got := plain.Cost(Usage{Output: 10, Reasoning: 50}); got != 150 {
		t.Errorf("Cost of reasoning past the output = %d", got)
	}
	// The bound: 1,000 bytes at the dearer input rate (cache writes) and
	// 100 output at the dearer output rate (reasoning), plus the fee.
	if got := p.MaxCost(1000, 0); got != 3750+2000+1000 {
		t.Errorf("MaxCost = %d", got)
	}
	if err := (Price{Input: 1, PerRequest: 5}).validate(); err != nil {
		t.Errorf("a price with no output rate needs no max_output_tokens: %v", err)
	}
}

// TestTranslatedStepsOptIn: a step of the other wire is accepted only with
// translate: true, wherever it stands (even first: the model's wire is its
// first untranslated step's); a balance still speaks one wire.
func TestTranslatedStepsOptIn(t *testing.T) {
	for _, tc := range []struct{ name, from, to, want string }{
		{"failover to the other wire", `{"route": "openai-backup"}`, `{"route": "claude", "model": "claude-sonnet-4-5", "translate": true}`, ""},
		{"only the other wire", `"claude-sonnet-4-5": [{"route": "claude"}]`, `"claude-sonnet-4-5": [{"route": "claude"}], "gpt-4o": [{"route": "claude", "model": "claude-sonnet-4-5", "translate": true}]`, ""},
		{"translated first", `[{"route": "openai-main"}, {"route": "openai-backup"},`, `[{"route": "claude", "model": "claude-sonnet-4-5", "translate": true}, {"route": "openai-backup"},`, ""},
		{"balance of two wires", `{"route": "openai-backup"}`, `{"balance": [{"route": "openai-backup"}, {"route": "claude", "model": "claude-sonnet-4-5"}], "translate": true}`, "the members of a balance speak one wire"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(goodConfig, tc.from) {
				t.Fatalf("test case: %q not in the config", tc.from)
			}
			_, err := Parse([]byte(strings.Replace(goodConfig, tc.from, tc.to, 1)))
			if tc.want == "" && err != nil {
				t.Fatal(err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}
