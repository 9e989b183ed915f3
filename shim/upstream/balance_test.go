package upstream

import (
	"strings"
	"testing"
	"time"
)

const balancedConfig = `{
  "routes": {
    "azure-eu": {"kind": "openai", "provider": "azure-eu", "base_url": "https://eu.example.com/v1", "models": ["gpt-4.1"]},
    "azure-us": {"kind": "openai", "provider": "azure-us", "base_url": "https://us.example.com/v1", "models": ["gpt-4.1", "gpt-4.1-mini"]},
    "openai": {"kind": "openai", "base_url": "https://api.openai.com/v1", "models": ["gpt-4.1"]},
    "claude": {"kind": "anthropic", "base_url": "https://api.anthropic.com", "models": ["claude-sonnet-4-5"]}
  },
  "plans": {
    "main": {"failover": "definite", "models": {
      "gpt-4.1": [{"balance": [{"route": "azure-eu", "weight": 3}, {"route": "azure-us", "weight": 1}]}, {"route": "openai"}]}}
  },
  "prices": {
    "azure-eu/gpt-4.1": {"input": 2, "output": 8, "max_output_tokens": 32768},
    "azure-us/gpt-4.1": {"input": 2, "output": 8, "max_output_tokens": 32768},
    "azure-us/gpt-4.1-mini": {"input": 0.4, "output": 1.6, "max_output_tokens": 32768},
    "openai/gpt-4.1": {"input": 2, "output": 8, "max_output_tokens": 32768}
  },
  "route_health": {"failures": 5, "cooldown": "1m"}
}`

// TestBalancedStep: a step may be a balance of routes, each member its own
// model identity with its own price, weight 1 unless set; route_health
// sets when a member is taken for unhealthy.
func TestBalancedStep(t *testing.T) {
	c, err := Parse([]byte(balancedConfig))
	if err != nil {
		t.Fatal(err)
	}
	steps := c.Plans["main"].Steps("gpt-4.1")
	if len(steps) != 2 || !steps[0].Balanced() || steps[1].Balanced() {
		t.Fatalf("steps %+v", steps)
	}
	var ids []string
	for _, m := range steps[0].Members() {
		ids = append(ids, c.MemberIdentity(m, "gpt-4.1"))
	}
	if strings.Join(ids, ",") != "azure-eu/gpt-4.1,azure-us/gpt-4.1" || steps[0].Members()[1].W() != 1 || (Member{}).W() != 1 {
		t.Fatalf("members %v %+v", ids, steps[0].Members())
	}
	if id := c.StepIdentity(steps[1], "gpt-4.1"); id != "openai/gpt-4.1" {
		t.Fatalf("plain step identity %q", id)
	}
	if d, err := c.RouteHealth.Rest(); err != nil || d != time.Minute || c.RouteHealth.Threshold() != 5 {
		t.Fatalf("route_health %+v: %v %v", c.RouteHealth, d, err)
	}
	if d, _ := (HealthConfig{}).Rest(); d != 30*time.Second || (HealthConfig{}).Threshold() != 3 {
		t.Fatal("route_health defaults are not 3 failures, 30s")
	}
}

// TestBalancedStepErrorsNameTheField: every refusal of a balance names
// the member or field to fix.
func TestBalancedStepErrorsNameTheField(t *testing.T) {
	const balance = `{"balance": [{"route": "azure-eu", "weight": 3}, {"route": "azure-us", "weight": 1}]}`
	members := func(n int) string {
		var b strings.Builder
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(`{"route": "azure-eu"}`)
		}
		return `{"balance": [` + b.String() + `]}`
	}
	cases := []struct{ name, to, want string }{
		{"unknown route", `{"balance": [{"route": "azure-eu"}, {"route": "nowhere"}]}`, `plans.main.models.gpt-4.1[0].balance[1]: route "nowhere" is not in routes`},
		{"route twice", `{"balance": [{"route": "azure-eu"}, {"route": "azure-eu", "weight": 2}]}`, `plans.main.models.gpt-4.1[0].balance[1]: route "azure-eu" is already a member of this balance`},
		{"negative weight", `{"balance": [{"route": "azure-eu", "weight": -1}, {"route": "azure-us"}]}`, `plans.main.models.gpt-4.1[0].balance[0].weight -1: want 1 to 1000`},
		{"huge weight", `{"balance": [{"route": "azure-eu", "weight": 1001}, {"route": "azure-us"}]}`, `balance[0].weight 1001`},
		{"one member", `{"balance": [{"route": "azure-eu"}]}`, `plans.main.models.gpt-4.1[0].balance: 1 members; a balance has 2 to 16`},
		{"no member", `{"balance": []}`, `plans.main.models.gpt-4.1[0].balance: 0 members`},
		{"seventeen members", members(17), `17 members; a balance has 2 to 16`},
		{"route and balance", `{"route": "openai", "balance": [{"route": "azure-eu"}, {"route": "azure-us"}]}`, `plans.main.models.gpt-4.1[0]: a step has a route or a balance, not both`},
		{"model and balance", `{"model": "gpt-4.1", "balance": [{"route": "azure-eu"}, {"route": "azure-us"}]}`, `a step has a route or a balance, not both`},
		{"neither", `{}`, `plans.main.models.gpt-4.1[0]: a step names a route, or a balance of routes`},
		{"member without route", `{"balance": [{"weight": 2}, {"route": "azure-us"}]}`, `plans.main.models.gpt-4.1[0].balance[0].route is required`},
		{"member does not serve", `{"balance": [{"route": "azure-eu", "model": "gpt-4.1-mini"}, {"route": "azure-us"}]}`, `plans.main.models.gpt-4.1[0].balance[0]: route "azure-eu" does not serve "gpt-4.1-mini"`},
		{"member of another wire", `{"balance": [{"route": "azure-eu"}, {"route": "claude", "model": "claude-sonnet-4-5"}]}`, `balance[1]: route "claude" speaks anthropic but the balance's first member speaks openai; the members of a balance speak one wire`},
		{"member model not served", `{"balance": [{"route": "azure-eu"}, {"route": "azure-us", "model": "gpt-4.1-nano"}]}`, `route "azure-us" does not serve "gpt-4.1-nano"`},
		{"unknown member field", `{"balance": [{"route": "azure-eu", "wieght": 3}, {"route": "azure-us"}]}`, `unknown field "wieght"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(balancedConfig, balance, tc.to, 1)
			_, err := Parse([]byte(src))
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	// One route per model identity still: two members may not reach one
	// identity through two routes.
	src := strings.Replace(balancedConfig, `"provider": "azure-us"`, `"provider": "azure-eu"`, 1)
	if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), `plans.main.models.gpt-4.1[0].balance[1]: azure-eu/gpt-4.1 is already reached through route "azure-eu"`) {
		t.Errorf("one identity through two members: %v", err)
	}
	// A member's price is its own identity's.
	src = strings.Replace(balancedConfig, `"azure-us/gpt-4.1": {"input": 2, "output": 8, "max_output_tokens": 32768},`, ``, 1)
	if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), "plans.main.models.gpt-4.1[0].balance[1]: azure-us/gpt-4.1 has no price") {
		t.Errorf("member without a price: %v", err)
	}
	for _, h := range []string{`{"failures": 101}`, `{"failures": -1}`, `{"cooldown": "0s"}`, `{"cooldown": "2h"}`, `{"cooldown": "soon"}`,
		`{"latency": "99ms"}`, `{"latency": "11m"}`, `{"latency": "slow"}`} {
		src := strings.Replace(balancedConfig, `{"failures": 5, "cooldown": "1m"}`, h, 1)
		if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), "route_health.") {
			t.Errorf("route_health %s: %v", h, err)
		}
	}
	for _, h := range []string{`{"latency": "100ms"}`, `{"latency": "10m"}`} {
		src := strings.Replace(balancedConfig, `{"failures": 5, "cooldown": "1m"}`, h, 1)
		if _, err := Parse([]byte(src)); err != nil {
			t.Errorf("route_health %s: %v", h, err)
		}
	}
}
