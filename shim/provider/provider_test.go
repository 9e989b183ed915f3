package provider

import (
	"net/http"
	"slices"
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
			if !p.Speaks(w) || !slices.Contains(Native(w), c.kind) {
				t.Fatalf("%s does not speak %s", c.kind, w)
			}
		}
		tr := p.Translator(c.translate)
		if tr == nil || p.Speaks(c.translate) || !p.Speaks(tr.Upstream()) {
			t.Fatalf("%s: translation of %s: %v", c.kind, c.translate, tr)
		}
		if p.Translator(wire.Responses) != nil {
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
