package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// echoKind is a provider the pipeline has never heard of, registered by
// this test alone: its own path (/echo prefixed), its own credential
// header (X-Echo-Key) and its own usage member ("spent": {"in", "out"}).
const echoKind upstream.Kind = "echo"

type echoProvider struct{}

func (echoProvider) Kind() upstream.Kind                                  { return echoKind }
func (echoProvider) Class() contract.Provider                             { return "" }
func (echoProvider) Speaks(p wire.Protocol, _ string) bool                { return p == wire.ChatCompletions }
func (echoProvider) Translator(wire.Protocol, string) provider.Translator { return nil }
func (echoProvider) Foreign(string) bool                                  { return false }
func (echoProvider) Meter(wire.Protocol) provider.Meter                   { return &echoMeter{} }
func (echoProvider) Failure(status int) (upstream.Failure, bool) {
	return upstream.FailureOfStatus(status)
}
func (echoProvider) Events(h http.Header, body io.Reader) (provider.Events, bool) {
	return provider.SSE(h, body)
}

func (echoProvider) Request(ctx context.Context, c provider.Call) (*http.Request, error) {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.Route.BaseURL, "/")+"/echo"+c.Path, strings.NewReader(string(c.Body)))
	if err != nil {
		return nil, err
	}
	r.Header.Set("X-Echo-Key", c.Key)
	return r, nil
}

// echoMeter reads {"spent":{"in":N,"out":M}} from an answer or an event.
type echoMeter struct {
	u    upstream.Usage
	seen bool
}

func (m *echoMeter) Observe(data []byte) bool {
	var d struct {
		Spent *struct{ In, Out int64 } `json:"spent"`
	}
	if json.Unmarshal(data, &d) == nil && d.Spent != nil {
		m.u, m.seen = upstream.Usage{Input: d.Spent.In, Output: d.Spent.Out}, true
	}
	return false
}
func (m *echoMeter) Delta([]byte)                        {}
func (m *echoMeter) Usage() (upstream.Usage, bool, bool) { return m.u, m.seen, m.seen }
func (m *echoMeter) Estimate(n int) upstream.Usage       { return upstream.Usage{Input: int64(n)} }

var registerEcho sync.Once

// TestANewProviderPlugsIn: a kind registered from outside the pipeline is
// routed to, sent its own credential on its own path, and settled at the
// usage its own meter reads, whole and streamed — with no file of
// shim/gateway knowing it.
func TestANewProviderPlugsIn(t *testing.T) {
	registerEcho.Do(func() { provider.Register(echoProvider{}) })
	var mu sync.Mutex
	var paths, keys []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths, keys = append(paths, r.URL.Path), append(keys, r.Header.Get("X-Echo-Key"))
		mu.Unlock()
		b, _ := io.ReadAll(r.Body)
		if strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n")
			fmt.Fprint(w, "data: {\"choices\":[],\"spent\":{\"in\":7,\"out\":3}}\n\n")
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"choices":[{"message":{"content":"hi"}}],"spent":{"in":11,"out":5}}`)
	}))
	defer up.Close()
	price := upstream.Price{Input: 1_000_000, Output: 2_000_000, MaxOutputTokens: 100}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"e": {Kind: echoKind, BaseURL: up.URL, Models: []string{"echo-1"}}},
		Plans:  map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{"echo-1": {{Route: "e"}}}}},
		Prices: map[string]upstream.Price{"echo/echo-1": price},
	}
	gw := gatewayOn(t, conf, map[string]string{"e": "sk-echo"})
	for _, c := range []struct {
		body string
		want upstream.Usage
	}{
		{`{"model":"echo-1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, upstream.Usage{Input: 11, Output: 5}},
		{`{"model":"echo-1","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, upstream.Usage{Input: 7, Output: 3}},
	} {
		pr, b := parsed(t, wire.ChatCompletions, c.body)
		rec := httptest.NewRecorder()
		res := gw.Forward(t.Context(), gateway.Writer{ResponseWriter: rec}, gateway.Request{Protocol: wire.ChatCompletions,
			Caller: caller("echo/echo-1"), Parsed: pr, Body: b, Header: http.Header{}, ID: fmt.Sprintf("rct_echo_%d", reqN.Add(1))})
		if res.Refusal != nil || res.Err != nil || rec.Code != 200 || !strings.Contains(rec.Body.String(), "hi") {
			t.Fatalf("%s: %+v %v %d %s", c.body, res.Refusal, res.Err, rec.Code, rec.Body)
		}
		if want := int64(price.Cost(c.want)); res.Settled != want {
			t.Fatalf("%s: settled %d, want %d (the echo meter's usage)", c.body, res.Settled, want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for i := range paths {
		if paths[i] != "/echo/v1/chat/completions" || keys[i] != "sk-echo" {
			t.Fatalf("call %d went to %s with key %q", i, paths[i], keys[i])
		}
	}
	if len(paths) != 2 {
		t.Fatalf("%d upstream calls, want 2", len(paths))
	}
}
