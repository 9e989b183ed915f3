package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// flaky answers 503 to the next failNext calls, then as its provider.
type flaky struct {
	*fakeProvider
	failNext atomic.Int32
	calls    atomic.Int32
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		f.calls.Add(1)
		if f.failNext.Add(-1) >= 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte(`{"error":{"message":"overloaded","type":"server_error"}}`))
			return
		}
	}
	f.fakeProvider.ServeHTTP(w, r)
}

// TestShimBreadthExample: the configuration docs/shim.md shows for
// patterns, retries, the cache, rate limits and prices, served by
// `caduceus serve` with its routes at fake providers, through the
// official OpenAI and Anthropic SDKs.
func TestShimBreadthExample(t *testing.T) {
	conf := shimDocBlock(t, "shim-breadth-example")
	oa := &flaky{fakeProvider: &fakeProvider{name: "openai"}}
	an := &flaky{fakeProvider: &fakeProvider{name: "anthropic"}}
	for from, f := range map[string]*flaky{"https://api.openai.com/v1": oa, "https://api.anthropic.com": an} {
		f.last.Store("")
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		if !strings.Contains(conf, from) {
			t.Fatalf("the example no longer names %s", from)
		}
		to := srv.URL
		if strings.HasSuffix(from, "/v1") {
			to += "/v1"
		}
		conf = strings.Replace(conf, from, to, 1)
	}
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant"}
	in := startEnv(t, func(k string) string { return env[k] }, "--config", file)
	code, out, errOut := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route",
		"--models", "openai/gpt-4.1*,openai/o3,openai/text-embedding-3-small,anthropic/claude-sonnet-4-5*")
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, errOut)
	}
	key := strings.TrimSpace(out)
	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	chat := func(model, text string) (*http.Response, error) {
		var resp *http.Response
		_, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(200),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}, option.WithResponseInto(&resp))
		return resp, err
	}
	// The rpm's window is a UTC minute: begin well before it ends.
	startEarlyInMinute(40)
	var receipts []string

	// A dated snapshot the pattern serves, then the same request again:
	// from the cache, no upstream call.
	first, err := chat("gpt-4.1-2025-04-14", "hello")
	if err != nil {
		t.Fatalf("a dated snapshot: %v", err)
	}
	receipts = append(receipts, first.Header.Get("X-Caduceus-Receipt"))
	calls := oa.calls.Load()
	again, err := chat("gpt-4.1-2025-04-14", "hello")
	if err != nil || again.Header.Get("X-Caduceus-Cache") != "hit" || oa.calls.Load() != calls {
		t.Fatalf("the same request again: %v, cache %q, %d more upstream calls", err, again.Header.Get("X-Caduceus-Cache"), oa.calls.Load()-calls)
	}
	// 503 twice, then an answer: one answer for the client, three calls.
	oa.failNext.Store(2)
	calls = oa.calls.Load()
	retried, err := chat("gpt-4.1", "retry me")
	if err != nil || oa.calls.Load()-calls != 3 {
		t.Fatalf("an upstream answering 503 twice: %v, %d calls", err, oa.calls.Load()-calls)
	}
	receipts = append(receipts, retried.Header.Get("X-Caduceus-Receipt"))
	o3, err := chat("o3", "think")
	if err != nil {
		t.Fatalf("o3: %v", err)
	}
	receipts = append(receipts, o3.Header.Get("X-Caduceus-Receipt"))
	var eh *http.Response
	if _, err := oc.Embeddings.New(t.Context(), openai.EmbeddingNewParams{Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("embed me")}}, option.WithResponseInto(&eh)); err != nil {
		t.Fatalf("an embedding: %v", err)
	}
	receipts = append(receipts, eh.Header.Get("X-Caduceus-Receipt"))
	var ah *http.Response
	if _, err := ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5-20250929", MaxTokens: 200,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}, aoption.WithResponseInto(&ah)); err != nil {
		t.Fatalf("a Claude snapshot: %v", err)
	}
	receipts = append(receipts, ah.Header.Get("X-Caduceus-Receipt"))
	sent := 6

	// What each settled, as the receipts say. The fakes report 1,000
	// input tokens (OpenAI chat: 400 of them cached) and 100 output;
	// embeddings 8 input.
	type att struct {
		model   string
		outcome string
	}
	settled, attempts := map[string]float64{}, map[string][]att{}
	_, body := in.do(t, "GET", "/v1/receipts", in.adminKey, nil)
	for _, r := range body["receipts"].([]any) {
		rc := r.(map[string]any)
		sp, ok := rc["spend"].(map[string]any)
		if !ok {
			continue
		}
		id := rc["id"].(string)
		settled[id] = sp["settled_microdollars"].(float64)
		for _, a := range sp["attempts"].([]any) {
			a := a.(map[string]any)
			attempts[id] = append(attempts[id], att{a["model"].(string), a["outcome"].(string)})
		}
	}
	for i, want := range []struct {
		what   string
		micros float64
		model  string
		tries  int
	}{
		{"the snapshot (600×2 + 400×0.5 + 100×8)", 2200, "openai/gpt-4.1-2025-04-14", 1},
		{"the retried turn", 2200, "openai/gpt-4.1", 3},
		{"o3 (600×2 + 400×0.5 + 100×8 + the $0.001 fee)", 3200, "openai/o3", 1},
		{"the embedding (8 × $0.02 a million, rounded up)", 1, "openai/text-embedding-3-small", 1},
		{"the Claude snapshot (1,000×3 + 100×15)", 4500, "anthropic/claude-sonnet-4-5-20250929", 1},
	} {
		id := receipts[i]
		a := attempts[id]
		if settled[id] != want.micros || len(a) != want.tries || a[len(a)-1].model != want.model || a[len(a)-1].outcome != "answered" {
			t.Errorf("%s: settled %v µ$, attempts %v; want %v µ$, %d attempts ending answered by %s", want.what, settled[id], a, want.micros, want.tries, want.model)
		}
	}

	// The key's rpm of 10: the five requests above that went upstream
	// count (the cache's answer does not), five more are answered, the
	// next is refused with the provider's headers and reaches no provider.
	calls = oa.calls.Load()
	answered := 0
	for ; sent <= 12; sent++ {
		_, err := chat("gpt-4.1-mini", "count me "+strconv.Itoa(sent))
		var e *openai.Error
		if err == nil {
			answered++
			continue
		}
		if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "rate_limit_exceeded" ||
			e.Response.Header.Get("X-Ratelimit-Limit-Requests") != "10" || e.Response.Header.Get("Retry-After") == "" {
			t.Fatalf("request %d past the rpm: %v", sent+1, err)
		}
		break
	}
	if answered != 5 || oa.calls.Load()-calls != 5 {
		t.Fatalf("with 5 of the minute's requests counted, %d more answered before a refusal (want 5; rpm 10), %d upstream calls", answered, oa.calls.Load()-calls)
	}
}
