package gateway_test

import (
	"testing"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/provider/providertest"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestFailoverAcrossKinds: a plan whose first step is a Gemini route and
// whose second is Claude on Bedrock fails over when Gemini answers 503:
// a chat completions, a messages and a Responses client of the official
// SDKs, whole and streamed, get Bedrock's answer in their own wire; the
// receipt's attempts name both, the failed one released and the answer
// settled at Bedrock's usage and price.
func TestFailoverAcrossKinds(t *testing.T) {
	gem, gemSeen := fakeGemini(t)
	creds := providertest.AWSEnv(t, "")
	br, brSeen := fakeBedrock(t, creds, "us-east-1")
	claude := "anthropic.claude-sonnet-4-5-v1:0"
	price := upstream.Price{Input: 3_000_000, Output: 15_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{
			"g":  {Kind: provider.KindGemini, BaseURL: gem.URL, Models: []string{"gemini-down"}},
			"br": {Kind: provider.KindBedrock, BaseURL: br.URL, Region: "us-east-1", Models: []string{claude}},
		},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverDefinite, Models: map[string][]upstream.Step{
			"gemini-down": {{Route: "g", Translate: true}, {Route: "br", Model: claude, Translate: true}}}}},
		Prices: map[string]upstream.Price{
			"gemini/gemini-down": {Input: 1_000_000, Output: 4_000_000, MaxOutputTokens: 1000},
			"bedrock/" + claude:  price,
		},
	}
	gw := gatewayOn(t, conf, map[string]string{"g": "gk-1"})
	grants := []string{"gemini/gemini-down", "bedrock/" + claude}
	want := int64(price.Cost(upstream.Usage{Input: 11, Output: 4}))

	for _, p := range []wire.Protocol{wire.ChatCompletions, wire.Messages, wire.Responses} {
		front, results := frontFor(t, gw, p, grants...)
		for _, stream := range []bool{false, true} {
			text, _, err := shimtest.Ask(t.Context(), front.URL, "cad_x", p, "gemini-down", stream)
			if err != nil || text != "hello" {
				t.Fatalf("%s stream %v: %q %v", p, stream, text, err)
			}
			res := results()[len(results())-1]
			if res.Route != "br" || len(res.Attempts) < 2 {
				t.Fatalf("%s stream %v: answered by %q after %+v", p, stream, res.Route, res.Attempts)
			}
			first, last := res.Attempts[0], res.Attempts[len(res.Attempts)-1]
			if first.Route != "g" || first.Outcome != "definite" || first.Status != 503 || first.Settled != 0 ||
				last.Route != "br" || last.Outcome != "answered" || last.Wire != "converse" || res.Settled != want {
				t.Fatalf("%s stream %v: attempts %+v, settled %d (want %d)", p, stream, res.Attempts, res.Settled, want)
			}
		}
	}
	if len(gemSeen()) < 6 || len(brSeen()) != 6 {
		t.Fatalf("Gemini saw %d calls and Bedrock %d, want each request at both", len(gemSeen()), len(brSeen()))
	}
}
