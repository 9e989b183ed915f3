package provider

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestBuiltInProviders: each built-in kind's request carries the route's
// credential its own way, at the route's base joined with the path, and
// each client wire has its native kind and its translation.
func TestBuiltInProviders(t *testing.T) {
	for _, c := range []struct {
		kind      upstream.Kind
		base      string
		header    string
		value     string
		speaks    []wire.Protocol
		translate wire.Protocol
	}{
		{upstream.KindOpenAI, "https://api.openai.example/v1/", "Authorization", "Bearer sk-1", []wire.Protocol{wire.ChatCompletions, wire.Responses, wire.Embeddings}, wire.Messages},
		{upstream.KindAnthropic, "https://api.anthropic.example", "X-Api-Key", "sk-1", []wire.Protocol{wire.Messages}, wire.ChatCompletions},
	} {
		p := For(c.kind)
		if p == nil || p.Kind() != c.kind {
			t.Fatalf("%s: not registered", c.kind)
		}
		r, err := p.Request(t.Context(), Call{Route: upstream.Route{Kind: c.kind, BaseURL: c.base}, Key: "sk-1", Path: "/v1/x", RawQuery: "beta=true", Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.URL.String(); got != "https://api."+string(c.kind)+".example/v1/x?beta=true" || r.Method != http.MethodPost ||
			r.Header.Get(c.header) != c.value || r.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: %s %s %v", c.kind, r.Method, got, r.Header)
		}
		if c.kind == upstream.KindAnthropic && r.Header.Get("Anthropic-Version") != AnthropicVersion {
			t.Fatalf("no Anthropic-Version: %v", r.Header)
		}
		for _, w := range c.speaks {
			if !p.Speaks(w, "") || !slices.Contains(Native(w), c.kind) {
				t.Fatalf("%s does not speak %s", c.kind, w)
			}
		}
		tr := p.Translator(c.translate, "")
		if tr == nil || p.Speaks(c.translate, "") || !p.Speaks(tr.Upstream(), "") {
			t.Fatalf("%s: translation of %s: %v", c.kind, c.translate, tr)
		}
		if c.kind == upstream.KindOpenAI && p.Translator(wire.Responses, "") != nil {
			t.Fatalf("%s translates the Responses API", c.kind)
		}
		if f, ok := p.Failure(http.StatusServiceUnavailable); !ok || f != upstream.Definite {
			t.Fatalf("%s: a 503 is not a definite failure", c.kind)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("a second provider of one kind was registered")
		}
	}()
	Register(openAI{})
}

// TestAzureRouteSettings: an azure route's api_version and deployments are
// checked, and refused by name on a route of another kind.
func TestAzureRouteSettings(t *testing.T) {
	plan := map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"m": {{Route: "r"}}}}}
	prices := map[string]upstream.Price{"azure/m": {Input: 1}, "openai/m": {Input: 1}}
	for _, c := range []struct {
		route upstream.Route
		err   string
	}{
		{upstream.Route{Kind: KindAzure, BaseURL: "https://x.openai.azure.com", Models: []string{"m"}, APIVersion: "2024-10-21", Deployments: map[string]string{"m": "prod-m"}}, ""},
		{upstream.Route{Kind: KindAzure, BaseURL: "https://x.openai.azure.com", Models: []string{"m"}}, ""},
		{upstream.Route{Kind: KindAzure, BaseURL: "https://x.openai.azure.com", Models: []string{"m"}, APIVersion: "2024/10"}, `routes.r.api_version "2024/10"`},
		{upstream.Route{Kind: KindAzure, BaseURL: "https://x.openai.azure.com", Models: []string{"m"}, Deployments: map[string]string{"m": "a/b"}}, `routes.r.deployments["m"] "a/b"`},
		{upstream.Route{Kind: upstream.KindOpenAI, BaseURL: "https://api.openai.com", Models: []string{"m"}, APIVersion: "2024-10-21"}, "routes.r.api_version is not a setting of a route of kind openai"},
	} {
		err := upstream.Config{Routes: map[string]upstream.Route{"r": c.route}, Plans: plan, Prices: prices}.Validate()
		if (err == nil) != (c.err == "") || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: %v, want %q", c.route, err, c.err)
		}
	}
}
