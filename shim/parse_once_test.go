package shim_test

import (
	"fmt"
	"strings"
	"testing"

	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestOneParsePerRequest: a governed request is read once, on each of the
// three wires, whole and streamed, shimmed or not: the one parse gives the
// rules, the context injection, the gateway's model, stream, token bound
// and include_usage, and the splices that follow (the injection, the usage
// chunk asked for upstream) edit by the positions it found. Counted, not
// timed: wire.Reads counts every scan of a request body.
func TestOneParsePerRequest(t *testing.T) {
	e, _ := newGatewayEnv(t, gwconf.Budgets{})
	e.context(t, "key-a", `{"ref":"verb:deploy","kind":"verb","title":"Deploy guide","body":"make deploy"}`)
	e.provision(t, "key-a", `{"id":"SHIM-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	bodies := map[wire.Protocol]string{
		wire.ChatCompletions: `{"model":"gpt-4o","max_tokens":64,%s"messages":[{"role":"user","content":%q}]}`,
		wire.Responses:       `{"model":"gpt-5","max_output_tokens":64,%s"input":[{"role":"user","content":%q}]}`,
		wire.Messages:        `{"model":"claude-sonnet-4-5","max_tokens":64,%s"messages":[{"role":"user","content":%q}]}`,
	}
	for _, p := range []wire.Protocol{wire.ChatCompletions, wire.Responses, wire.Messages} {
		for _, stream := range []bool{false, true} {
			for _, text := range []string{"hello", "deploy now"} {
				name := fmt.Sprintf("%s/stream=%v/%s", p, stream, text)
				t.Run(name, func(t *testing.T) {
					s := ""
					if stream {
						s = `"stream":true,`
					}
					before, calls := wire.Reads(), e.up.calls()
					resp, body := e.post(t, "key-granted", p.Path(), fmt.Sprintf(bodies[p], s, text), nil)
					if resp.StatusCode != 200 || !strings.Contains(string(body), "hello from upstream") {
						t.Fatalf("status %d: %s", resp.StatusCode, body)
					}
					if got := wire.Reads() - before; got != 1 {
						t.Fatalf("the request body was scanned %d times, want 1", got)
					}
					up := string(e.up.last(t).Body)
					if e.up.calls() != calls+1 || strings.Contains(up, "caduceus-shim") != (text == "deploy now") {
						t.Fatalf("upstream got (call %d) %s", e.up.calls()-calls, up)
					}
					if p == wire.ChatCompletions && stream && !strings.Contains(up, `"stream_options":{"include_usage":true}`) {
						t.Fatalf("the usage chunk was not asked for upstream: %s", up)
					}
				})
			}
		}
	}
}
