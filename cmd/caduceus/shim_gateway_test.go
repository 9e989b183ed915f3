package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/shimserve"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// fakeProvider answers chat completions, responses and messages like the
// providers do, usage included; fail, when set, answers every request with
// that status first (a Retry-After of 120 s with a 429).
type fakeProvider struct {
	name  string
	calls atomic.Int32
	fail  atomic.Int32
	last  atomic.Value // the last request body
	org   atomic.Value // the last OpenAI-Organization header
	// traceparent is the last call's W3C traceparent header.
	traceparent atomic.Value
}

func (f *fakeProvider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		// serve's startup check of the route's credential: not a call.
		if code := int(f.fail.Load()); code == 401 || code == 403 {
			w.WriteHeader(code)
			io.WriteString(w, `{"error":{"message":"`+f.name+` says no","type":"invalid_request_error","code":"invalid_api_key"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[]}`)
		return
	}
	f.calls.Add(1)
	b, _ := io.ReadAll(r.Body)
	f.last.Store(string(b))
	f.org.Store(r.Header.Get("OpenAI-Organization"))
	f.traceparent.Store(r.Header.Get("Traceparent"))
	if code := int(f.fail.Load()); code != 0 {
		if code == 429 {
			w.Header().Set("Retry-After", "120")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, `{"error":{"message":"`+f.name+` says no","type":"server_error"}}`)
		return
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	json.Unmarshal(b, &req)
	answer := "from " + f.name
	switch {
	case strings.HasSuffix(r.URL.Path, "/chat/completions") && req.Stream:
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":%q},\"finish_reason\":null}]}\n\n", req.Model, answer)
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", req.Model)
		if req.StreamOptions.IncludeUsage {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":1000,\"completion_tokens\":100,\"total_tokens\":1100}}\n\n", req.Model)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	case strings.HasSuffix(r.URL.Path, "/chat/completions"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100,"prompt_tokens_details":{"cached_tokens":400}}}`, req.Model, answer)
	case strings.HasSuffix(r.URL.Path, "/responses/input_tokens"):
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"response.input_tokens","input_tokens":42}`)
	case strings.HasPrefix(r.URL.Path, "/v1/responses/"):
		// A stored response: GET retrieves it, POST .../cancel cancels it.
		id, cancel := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/v1/responses/"), "/cancel")
		status := "completed"
		if cancel {
			status = "cancelled"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"response","created_at":1,"status":%q,"model":"gpt-4.1","output":[],"usage":null}`, id, status)
	case strings.HasSuffix(r.URL.Path, "/embeddings"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.25,-0.5,0.125]}],"model":%q,"usage":{"prompt_tokens":8,"total_tokens":8}}`, req.Model)
	case strings.HasSuffix(r.URL.Path, "/responses"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":%q,"output":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":%q,"annotations":[]}]}],"usage":{"input_tokens":1000,"input_tokens_details":{"cached_tokens":0},"output_tokens":100,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":1100}}`, req.Model, answer)
	case strings.HasSuffix(r.URL.Path, "/messages/count_tokens"):
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"input_tokens":42}`)
	case strings.HasSuffix(r.URL.Path, "/messages"):
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1000,"output_tokens":100}}`, req.Model, answer)
	default:
		http.NotFound(w, r)
	}
}

// shimDocBlock is the YAML block of docs/shim.md after the marker
// <!-- marker -->.
func shimDocBlock(t *testing.T, marker string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "shim.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- "+marker+" -->\n```yaml\n")
	if !ok {
		t.Fatalf("docs/shim.md has no %s block", marker)
	}
	block, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatalf("docs/shim.md: the %s block does not end", marker)
	}
	return block
}

// TestShimDocExampleRuns loads the configuration docs/shim.md shows, with
// its routes pointed at fake providers, and drives it with the official
// SDKs: grants, spend and budgets, failover, holds, /v1/models and
// /v1/spend — on SQLite, and on Postgres when it is available.
func TestShimDocExampleRuns(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { runDocExample(t, "") })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { runDocExample(t, storetest.FreshSchema(t, dsn)) })
	}
}

func runDocExample(t *testing.T, dsn string) {
	openaiUp, azureUp, anthropicUp := &fakeProvider{name: "openai"}, &fakeProvider{name: "azure"}, &fakeProvider{name: "anthropic"}
	for _, f := range []*fakeProvider{openaiUp, azureUp, anthropicUp} {
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		f.last.Store("")
		switch f {
		case openaiUp:
			t.Setenv("FAKE_OPENAI_URL", srv.URL+"/v1")
		case azureUp:
			t.Setenv("FAKE_AZURE_URL", srv.URL+"/v1")
		case anthropicUp:
			t.Setenv("FAKE_ANTHROPIC_URL", srv.URL)
		}
	}
	conf := shimDocBlock(t, "shim-example")
	for from, env := range map[string]string{"https://api.openai.com/v1": "FAKE_OPENAI_URL", "https://eu.example-azure-proxy.com/v1": "FAKE_AZURE_URL", "https://api.anthropic.com": "FAKE_ANTHROPIC_URL"} {
		if !strings.Contains(conf, from) {
			t.Fatalf("the example no longer names %s", from)
		}
		conf = strings.Replace(conf, from, os.Getenv(env), 1)
	}
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"OPENAI_API_KEY": "sk-openai", "AZURE_EU_KEY": "sk-azure", "ANTHROPIC_API_KEY": "sk-ant"}
	args := []string{"--config", file}
	if dsn != "" {
		args = append(args, "--store", dsn)
	}
	in := startEnv(t, func(k string) string { return env[k] }, args...)
	storeArgs := []string{"--data", in.data}
	if dsn != "" {
		storeArgs = []string{"--store", dsn}
	}
	mkKey := func(models string) (string, string) {
		t.Helper()
		a := append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route"}, storeArgs...)
		if models != "" {
			a = append(a, "--models", models)
		}
		code, out, errOut := cli(t, a...)
		if code != 0 {
			t.Fatalf("keys create: %d %s", code, errOut)
		}
		key := strings.TrimSpace(out)
		return key, strings.Split(key, "_")[1]
	}
	full, fullID := mkKey("openai/gpt-4.1,azure/gpt-4.1,anthropic/claude-sonnet-4-5")
	none, _ := mkKey("")

	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(full), option.WithMaxRetries(0), option.WithHeader("OpenAI-Organization", "org-42"))
	chat := func(c openai.Client, extra ...option.RequestOption) (*openai.ChatCompletion, *http.Response, error) {
		var hr *http.Response
		resp, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1", MaxTokens: openai.Int(200),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}}, append(extra, option.WithResponseInto(&hr))...)
		return resp, hr, err
	}

	// Granted: forwarded to the plan's first route with its key; the
	// organization header passes upstream.
	resp, hr, err := chat(oc)
	if err != nil || resp.Choices[0].Message.Content != "from openai" {
		t.Fatalf("granted chat: %v %+v", err, resp)
	}
	if hr.Header.Get("X-Caduceus-Receipt") == "" || openaiUp.org.Load() != "org-42" {
		t.Errorf("receipt %q, organization upstream %q", hr.Header.Get("X-Caduceus-Receipt"), openaiUp.org.Load())
	}

	// Not granted: refused before any upstream call, not to be retried.
	calls := openaiUp.calls.Load()
	noc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(none), option.WithMaxRetries(0))
	_, hr, err = chat(noc)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 403 || oe.Code != "model_not_granted" || openaiUp.calls.Load() != calls {
		t.Fatalf("ungranted chat: %v (upstream calls %d -> %d)", err, calls, openaiUp.calls.Load())
	}
	if oe.Response.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("ungranted refusal without x-should-retry: false")
	}

	// A stream's usage is asked upstream and not shown to a client that did
	// not ask for it.
	st := oc.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1", MaxTokens: openai.Int(200),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please")}})
	var text strings.Builder
	for st.Next() {
		ch := st.Current()
		if ch.Usage.TotalTokens != 0 || len(ch.Choices) == 0 {
			t.Errorf("the client got a usage chunk it did not ask for: %s", ch.RawJSON())
		}
		for _, c := range ch.Choices {
			text.WriteString(c.Delta.Content)
		}
	}
	if st.Err() != nil || text.String() != "from openai" || !strings.Contains(openaiUp.last.Load().(string), `"include_usage":true`) {
		t.Fatalf("stream: %v %q, upstream body %s", st.Err(), text.String(), openaiUp.last.Load())
	}

	// Responses and messages go through their plans too.
	rr, err := oc.Responses.New(t.Context(), responses.ResponseNewParams{Model: "gpt-4.1", MaxOutputTokens: openai.Int(200),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil || rr.OutputText() != "from openai" {
		t.Fatalf("responses: %v %+v", err, rr)
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey(full), aoption.WithMaxRetries(0))
	msg, err := ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if err != nil || msg.Content[0].Text != "from anthropic" {
		t.Fatalf("messages: %v %+v", err, msg)
	}

	// Token counting is forwarded to the granted route, at no cost.
	count, err := ac.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if err != nil || count.InputTokens != 42 {
		t.Fatalf("count_tokens: %v %+v", err, count)
	}

	// Definite failure (503) moves to the next route; a 429 holds the model
	// identity, so the next request skips it without calling it.
	openaiUp.fail.Store(503)
	if resp, _, err = chat(oc); err != nil || resp.Choices[0].Message.Content != "from azure" {
		t.Fatalf("after a 503: %v %+v", err, resp)
	}
	openaiUp.fail.Store(429)
	if resp, _, err = chat(oc); err != nil || resp.Choices[0].Message.Content != "from azure" {
		t.Fatalf("after a 429: %v %+v", err, resp)
	}
	calls = openaiUp.calls.Load()
	if resp, _, err = chat(oc); err != nil || resp.Choices[0].Message.Content != "from azure" || openaiUp.calls.Load() != calls {
		t.Fatalf("while held: %v %+v (held route called %d times more)", err, resp, openaiUp.calls.Load()-calls)
	}

	// Budget: a request whose maximum cost passes the key's $5 a day is
	// refused before the call.
	azureCalls := azureUp.calls.Load()
	_, err = oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1", MaxTokens: openai.Int(1_000_000),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("write a novel")}})
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Code != "budget_exceeded" || azureUp.calls.Load() != azureCalls {
		t.Fatalf("over budget: %v", err)
	}
	if oe.Response.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("budget refusal without x-should-retry: false")
	}

	// The models the key may use, in each SDK's shape.
	page, err := oc.Models.List(t.Context())
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "gpt-4.1" {
		t.Fatalf("openai models: %v %+v", err, page)
	}
	apage, err := ac.Models.List(t.Context(), anthropic.ModelListParams{})
	if err != nil || len(apage.Data) != 1 || apage.Data[0].ID != "claude-sonnet-4-5" {
		t.Fatalf("anthropic models: %v %+v", err, apage)
	}

	// Spend: per key and model identity, settled from the usage reported.
	// openai/gpt-4.1: chat 600×2 + 400×0.5 + 100×8 = 2200 µ$, stream
	// 1000×2 + 100×8 = 2800, responses 2800: 7800 in all; azure/gpt-4.1:
	// the three chats after the 503, the 429 and while held, 2200 each.
	req, _ := http.NewRequest("GET", in.url+"/v1/spend", nil)
	req.Header.Set("Authorization", "Bearer "+full)
	sresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var spend struct {
		Spend []struct {
			KeyID   string `json:"key_id"`
			Model   string `json:"model"`
			Settled int64  `json:"settled_microdollars"`
			Open    int64  `json:"open_microdollars"`
		} `json:"spend"`
	}
	json.NewDecoder(sresp.Body).Decode(&spend)
	sresp.Body.Close()
	got := map[string]int64{}
	for _, r := range spend.Spend {
		if r.KeyID != fullID || r.Open != 0 {
			t.Errorf("spend row %+v", r)
		}
		got[r.Model] = r.Settled
	}
	if got["openai/gpt-4.1"] != 7800 || got["azure/gpt-4.1"] != 3*2200 || got["anthropic/claude-sonnet-4-5"] != 1000*3+100*15 {
		t.Errorf("settled spend = %v", got)
	}
	code, out, errOut := cli(t, append([]string{"spend", "--tenant", "slot-1"}, storeArgs...)...)
	if code != 0 || !strings.Contains(out, "openai/gpt-4.1") || !strings.Contains(out, "0.007800") {
		t.Errorf("caduceus spend: %d %s %s", code, out, errOut)
	}

	// A route whose key the provider refuses: 502 upstream_auth_failed,
	// the provider's words kept from the client, the route unhealthy in
	// /metrics.
	anthropicUp.fail.Store(401)
	_, err = ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 502 || !strings.Contains(err.Error(), "upstream_auth_failed") || strings.Contains(err.Error(), "says no") ||
		ae.Response.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("refused route credential: %v", err)
	}
	_, err = ac.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if !errors.As(err, &ae) || ae.StatusCode != 502 || !strings.Contains(err.Error(), "upstream_auth_failed: ") ||
		!strings.Contains(err.Error(), "refused this route's credential") || strings.Contains(err.Error(), "says no") {
		t.Fatalf("count_tokens with a refused route credential: %v", err)
	}
	mresp, err := http.Get(in.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if !strings.Contains(string(metrics), `caduceus_shim_route_healthy{route="anthropic"} 0`) {
		t.Errorf("/metrics does not report the anthropic route unhealthy:\n%s", metrics)
	}
}

// TestShimKeyIsolationThroughTheServer: with shim.isolation: key, one key's
// provision answers that key only, is listed to it only, and each key's
// receipts are its own — on the real store, SQLite and Postgres.
func TestShimKeyIsolationThroughTheServer(t *testing.T) {
	run := func(t *testing.T, dsn string) {
		file := filepath.Join(t.TempDir(), "caduceus.yaml")
		if err := os.WriteFile(file, []byte("shim:\n  offline: true\n  isolation: key\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		args := []string{"--config", file}
		storeArgs := []string{}
		if dsn != "" {
			args = append(args, "--store", dsn)
			storeArgs = []string{"--store", dsn}
		}
		in := startEnv(t, noEnv, args...)
		if dsn == "" {
			storeArgs = []string{"--data", in.data}
		}
		mk := func() string {
			code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route,configure", "--harness", "claude-code"}, storeArgs...)...)
			if code != 0 {
				t.Fatalf("keys create: %s", errOut)
			}
			return strings.TrimSpace(out)
		}
		a, b := mk(), mk()
		do := func(key, method, path, body string) (int, string) {
			req, _ := http.NewRequest(method, in.url+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("X-Caduceus-Harness", "claude-code")
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(out)
		}
		if code, body := do(a, "POST", "/v1/provisions", `{"id":"PROV-A","triggers":{"keyword":{"any":["refund policy"]}},"action":"respond_directly","response":{"text":"A's answer"}}`); code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		chat := `{"model":"gpt-4o","messages":[{"role":"user","content":"what is the refund policy?"}]}`
		if code, body := do(a, "POST", "/v1/chat/completions", chat); code != 200 || !strings.Contains(body, "A's answer") {
			t.Fatalf("key A: %d %s", code, body)
		}
		if code, body := do(b, "POST", "/v1/chat/completions", chat); code != 503 || strings.Contains(body, "A's answer") {
			t.Fatalf("key B got A's provision: %d %s", code, body)
		}
		if _, body := do(b, "GET", "/v1/provisions", ""); strings.Contains(body, "PROV-A") {
			t.Fatalf("key B lists A's provision: %s", body)
		}
		_, ra := do(a, "GET", "/v1/receipts", "")
		_, rb := do(b, "GET", "/v1/receipts", "")
		idA, idB := strings.Split(a, "_")[1], strings.Split(b, "_")[1]
		if !strings.Contains(ra, idA) || strings.Contains(ra, idB) || !strings.Contains(rb, idB) || strings.Contains(rb, idA) {
			t.Fatalf("receipts cross keys:\nA %s\nB %s", ra, rb)
		}
	}
	t.Run("sqlite", func(t *testing.T) { run(t, "") })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { run(t, storetest.FreshSchema(t, dsn)) })
	}
}

// TestKeysGrants: keys create --models and keys grant set the grants keys
// list shows; a bad grant exits 2 naming it and creates nothing.
func TestKeysGrants(t *testing.T) {
	data := t.TempDir()
	if code, _, errOut := cli(t, "keys", "create", "--data", data, "--tenant", "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1"); code != 0 {
		t.Fatal(errOut)
	}
	if code, out, errOut := cli(t, "keys", "grant", "--data", data, "--tenant", "slot-1", "--models", "anthropic/claude-sonnet-4-5"); code != 0 || !strings.Contains(out, "anthropic/claude-sonnet-4-5") {
		t.Fatalf("keys grant: %d %s %s", code, out, errOut)
	}
	code, out, _ := cli(t, "keys", "list", "--data", data)
	if code != 0 || !strings.Contains(out, "anthropic/claude-sonnet-4-5,openai/gpt-4.1") {
		t.Fatalf("keys list:\n%s", out)
	}
	for _, bad := range []string{"openai/*-mini", "gpt-4.1", "openai/x-contributor"} {
		code, out, errOut := cli(t, "keys", "create", "--data", data, "--tenant", "slot-1", "--scopes", "route", "--models", bad)
		if code != 2 || out != "" || !strings.Contains(errOut, bad) {
			t.Errorf("--models %s: exit %d, %q %q", bad, code, out, errOut)
		}
	}
	if _, out, _ := cli(t, "keys", "list", "--data", data); strings.Count(out, "\n") != 2 {
		t.Errorf("a refused key was created:\n%s", out)
	}
}

// TestShimDocKindBlocksLoad: docs/shim.md's example block of each upstream
// kind (azure, gemini, vertex, bedrock) is a configuration serve takes:
// read as the config file is read, and checked as serve checks it.
func TestShimDocKindBlocksLoad(t *testing.T) {
	for _, kind := range []string{"azure", "gemini", "vertex", "bedrock"} {
		t.Run(kind, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "caduceus.yaml")
			if err := os.WriteFile(file, []byte(shimDocBlock(t, "shim-kind-"+kind)), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := readConfigFile(file)
			if err != nil {
				t.Fatalf("the %s block does not read: %v", kind, err)
			}
			shimCfg := cfg.sections.Of("shim").(*shimserve.Section)
			if err := shimCfg.CheckGateway(); err != nil {
				t.Fatalf("the %s block is refused: %v", kind, err)
			}
			for _, r := range shimCfg.Gateway.Routes {
				if string(r.Kind) != kind {
					t.Fatalf("the %s block has a route of kind %s", kind, r.Kind)
				}
			}
		})
	}
}

// TestStartupNamesEachKindsCredential: serve's startup log says where each
// route's credential comes from, by kind — a vertex route's key file, a
// bedrock route's AWS environment — and names what is missing, instead of
// calling a route without key_env unauthorized.
func TestStartupNamesEachKindsCredential(t *testing.T) {
	var logs bytes.Buffer
	sa := filepath.Join(t.TempDir(), "sa.json")
	a := &app{env: env{getenv: func(k string) string {
		return map[string]string{"AWS_ACCESS_KEY_ID": "AKID", "AWS_SECRET_ACCESS_KEY": "secret"}[k]
	}}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	a.shimSection().Gateway.Routes = map[string]upstream.Route{
		"vx": {Kind: provider.KindVertex, Project: "p", Location: "us-east5", CredentialsFile: sa, Models: []string{"m"}},
		"br": {Kind: provider.KindBedrock, Region: "us-east-1", Models: []string{"m"}},
	}
	registry.DescribeAll(a.host(nil), a.sections(), []string{"shim"})
	if got := logs.String(); !strings.Contains(got, `route=vx kind=vertex err="credentials_file `+sa+` cannot be read`) ||
		!strings.Contains(got, `route=br kind=bedrock provider=bedrock models=[m] key="from the AWS environment (AWS_ACCESS_KEY_ID)"`) ||
		strings.Contains(got, "without authorization") {
		t.Fatalf("startup log:\n%s", got)
	}
	if err := os.WriteFile(sa, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	a.getenv = func(string) string { return "" }
	registry.DescribeAll(a.host(nil), a.sections(), []string{"shim"})
	if got := logs.String(); !strings.Contains(got, `key="from credentials_file `+sa+`"`) ||
		!strings.Contains(got, `route=br kind=bedrock err="provider: bedrock: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set"`) {
		t.Fatalf("startup log:\n%s", got)
	}
}
