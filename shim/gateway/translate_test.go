package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// translatedRig is a gateway whose plan serves claude-sonnet-4-5 from an
// Anthropic route at url, translate: true, priced $3/$0.30/$15 per million
// tokens, bounded at 1000 output tokens; optionally cached.
func translatedRig(t *testing.T, url string, cache bool) *gateway.Gateway {
	db, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	c := upstream.Config{
		Routes: map[string]upstream.Route{"claude": {Kind: upstream.KindAnthropic, BaseURL: url, Models: []string{"claude-sonnet-4-5"}}},
		Prices: map[string]upstream.Price{"anthropic/claude-sonnet-4-5": {Input: 3_000_000, CachedInput: 300_000, Output: 15_000_000, MaxOutputTokens: 1000}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone,
			Models: map[string][]upstream.Step{"claude-sonnet-4-5": {{Route: "claude", Translate: true}}}}},
	}
	cfg := gateway.Config{Upstream: c, Ledger: ledger.Of(db), Holds: ledger.Of(db), Client: &http.Client{}, Keys: map[string]string{"claude": "sk-ant"}}
	if cache {
		p := c.Plans["main"]
		p.Cache = &upstream.CacheConfig{TTL: "1m"}
		c.Plans["main"] = p
		cfg.Upstream, cfg.Cache = c, ledger.Of(db)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return gateway.New(cfg)
}

func forwardAs(t *testing.T, gw *gateway.Gateway, p wire.Protocol, body string, hdr http.Header) (gateway.Result, *httptest.ResponseRecorder) {
	t.Helper()
	rec := httptest.NewRecorder()
	if hdr == nil {
		hdr = http.Header{}
	}
	pr, b := parsed(t, p, body)
	res := gw.Forward(t.Context(), gateway.Writer{ResponseWriter: rec}, gateway.Request{Protocol: p, Caller: caller("anthropic/claude-sonnet-4-5"),
		Parsed: pr, Body: b, Header: hdr, ID: fmt.Sprintf("rct_t%d", reqN.Add(1))})
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	rec.Write(res.Final)
	return res, rec
}

// TestTranslatedRefusalsBeforeAnyCall: a Responses request or a chat
// request Anthropic cannot carry (a previous_response_id: a translated
// route keeps no conversation; an audio part) is refused naming the field
// — neither calls, reserves or charges.
func TestTranslatedRefusalsBeforeAnyCall(t *testing.T) {
	up := newFake(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "no", 500) })
	gw := translatedRig(t, up.URL, false)
	res, _ := forwardAs(t, gw, wire.Responses, `{"model":"claude-sonnet-4-5","input":"hi","previous_response_id":"resp_1"}`, nil)
	if res.Refusal == nil || res.Refusal.Code != gateway.CodeInvalidRequest || res.Refusal.Status != 400 ||
		!strings.Contains(res.Refusal.Message, "previous_response_id") || len(res.Attempts) != 0 {
		t.Fatalf("responses: %+v", res.Refusal)
	}
	res, _ = forwardAs(t, gw, wire.ChatCompletions, `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, nil)
	if res.Refusal == nil || res.Refusal.Code != gateway.CodeInvalidRequest || res.Refusal.Status != 400 ||
		!strings.Contains(res.Refusal.Message, `messages[0].content[0].type: "input_audio"`) || len(res.Attempts) != 0 || res.Reserved != 0 {
		t.Fatalf("audio: %+v attempts %v", res.Refusal, res.Attempts)
	}
	if up.calls.Load() != 0 {
		t.Fatal("the upstream was called")
	}
}

// TestTranslatedStreamBrokenOff: an Anthropic stream broken off after the
// client began receiving it breaks the client's chat stream too (no
// [DONE]), and is settled at the estimate with the input message_start
// reported; the other wire's headers are not sent upstream.
func TestTranslatedStreamBrokenOff(t *testing.T) {
	var gotHeader http.Header
	up := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Clone()
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5\",\"content\":[],\"usage\":{\"input_tokens\":100,\"output_tokens\":1}}}\n\n")
		io.WriteString(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"abcdefghijkl\"}}\n\n")
		w.(http.Flusher).Flush()
		hj, _, _ := http.NewResponseController(w).Hijack()
		hj.Close() // cut off mid-stream
	})
	gw := translatedRig(t, up.URL, false)
	res, rec := forwardAs(t, gw, wire.ChatCompletions, `{"model":"claude-sonnet-4-5","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		http.Header{"Openai-Organization": {"org-1"}, "Openai-Beta": {"x"}})
	if !res.Broken || len(res.Attempts) != 1 || res.Attempts[0].Outcome != "broken" || !res.Attempts[0].Estimated || res.UpstreamWire != wire.Messages {
		t.Fatalf("result %+v", res)
	}
	// 100 input tokens reported, 12 bytes of text = 4 output tokens at
	// 3 bytes a token: 300 + 60 = 360 µ$.
	if res.Attempts[0].Settled != 360 {
		t.Errorf("settled %d, want 360", res.Attempts[0].Settled)
	}
	if b := rec.Body.String(); !strings.Contains(b, `"content":"abcdefghijkl"`) || strings.Contains(b, "[DONE]") {
		t.Errorf("client got %s", b)
	}
	if gotHeader.Get("Openai-Organization") != "" || gotHeader.Get("Openai-Beta") != "" || gotHeader.Get("Anthropic-Version") == "" || gotHeader.Get("X-Api-Key") != "sk-ant" {
		t.Errorf("upstream headers %v", gotHeader)
	}
}

// TestTranslatedAnswerCached: the cache keeps the translated answer, and
// replays it in the client's wire without a call.
func TestTranslatedAnswerCached(t *testing.T) {
	up := newFake(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"cached hi"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":2}}`)
	})
	gw := translatedRig(t, up.URL, true)
	body := `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`
	res, rec := forwardAs(t, gw, wire.ChatCompletions, body, nil)
	if res.Refusal != nil || !strings.Contains(rec.Body.String(), `"object":"chat.completion"`) || res.Settled != 10*3+2*15 {
		t.Fatalf("first: %+v %s", res, rec.Body.String())
	}
	res2, rec2 := forwardAs(t, gw, wire.ChatCompletions, body, nil)
	if res2.CacheHit == "" || rec2.Body.String() != rec.Body.String() || up.calls.Load() != 1 {
		t.Fatalf("second: %+v %s (calls %d)", res2, rec2.Body.String(), up.calls.Load())
	}
}
