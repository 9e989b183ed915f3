package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/caduceus-dev/caduceus/store/storetest"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// providerServe starts serve with the shim as a gateway over fake OpenAI
// and Anthropic providers (gpt-4.1, claude-sonnet-4-5) and extra config
// lines under shim:, and returns it with a key granted both models.
func providerServe(t *testing.T, shimExtra string, args ...string) (*instance, string) {
	t.Helper()
	return providerServeEnv(t, noEnv, shimExtra, args...)
}

// providerServeEnv is providerServe with an environment.
func providerServeEnv(t *testing.T, getenv func(string) string, shimExtra string, args ...string) (*instance, string) {
	t.Helper()
	oa, an := httptest.NewServer(&fakeProvider{name: "openai"}), httptest.NewServer(&fakeProvider{name: "anthropic"})
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	conf := fmt.Sprintf(`shim:
  routes:
    openai: {kind: openai, base_url: %s/v1, models: [gpt-4.1]}
    anthropic: {kind: anthropic, base_url: %s, models: [claude-sonnet-4-5]}
  plans:
    main:
      failover: none
      models:
        gpt-4.1: [{route: openai}]
        claude-sonnet-4-5: [{route: anthropic}]
  prices:
    openai/gpt-4.1: {input: 2, output: 8, max_output_tokens: 4096}
    anthropic/claude-sonnet-4-5: {input: 3, output: 15, max_output_tokens: 4096}
%s`, oa.URL, an.URL, shimExtra)
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	in := startEnv(t, getenv, append([]string{"--config", file}, args...)...)
	in.storeArgs = storeArgsOf(in, args)
	code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route",
		"--models", "openai/gpt-4.1,anthropic/claude-sonnet-4-5"}, in.storeArgs...)...)
	if code != 0 {
		t.Fatalf("keys create: %s", errOut)
	}
	return in, strings.TrimSpace(out)
}

// storeArgsOf are the flags that name in's store to another command: its
// --store when serve was given one, else its data directory.
func storeArgsOf(in *instance, serveArgs []string) []string {
	for i, a := range serveArgs {
		if a == "--store" && i+1 < len(serveArgs) {
			return []string{"--store", serveArgs[i+1], "--data", in.data}
		}
	}
	return []string{"--data", in.data}
}

// eachStore runs fn on SQLite (no flag: serve's data directory) and, when
// the tests have Postgres, on a fresh Postgres schema (--store DSN).
func eachStore(t *testing.T, fn func(t *testing.T, serveArgs ...string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t) })
	if dsn := os.Getenv(storetest.EnvPostgres); dsn != "" {
		t.Run("postgres", func(t *testing.T) { fn(t, "--store", storetest.FreshSchema(t, dsn)) })
	}
}

// TestProviderRoutesAnswerInTheProvidersShape: every
// answer on a provider route — Caduceus's own refusals, and 404s for
// provider endpoints it does not serve — is an error the official SDKs
// parse, in OpenAI's envelope by default and Anthropic's when the request
// carries anthropic-version, led by its code, with the request id header
// each SDK reads. The trail API is out of the providers' namespace:
// OpenAI's conversations.retrieve gets OpenAI's 404.
func TestProviderRoutesAnswerInTheProvidersShape(t *testing.T) {
	in, key := providerServe(t, "")
	oc := func(key string) openai.Client {
		return openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	}
	ac := func(key string) anthropic.Client {
		return anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	}
	openaiErr := func(what string, err error, status int, code string) {
		t.Helper()
		var e *openai.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: not an OpenAI API error: %v", what, err)
			return
		}
		if e.StatusCode != status || e.Code != code || !strings.HasPrefix(e.Message, code+": ") || e.Response.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: %d code %q message %q request id %q; want %d %s", what, e.StatusCode, e.Code, e.Message, e.Response.Header.Get("X-Request-Id"), status, code)
		}
	}
	anthropicErr := func(what string, err error, status int, code string) {
		t.Helper()
		var e *anthropic.Error
		if !errors.As(err, &e) {
			t.Errorf("%s: not an Anthropic API error: %v", what, err)
			return
		}
		if e.StatusCode != status || !strings.Contains(e.RawJSON(), `"message":"`+code+`: `) || e.RequestID == "" {
			t.Errorf("%s: %d %s request id %q; want %d %s", what, e.StatusCode, e.RawJSON(), e.RequestID, status, code)
		}
	}

	const badKey = "cad_0123456789abcdef_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	oGood, oBad, aGood, aBad := oc(key), oc(badKey), ac(key), ac(badKey)
	// A bad key on /v1/models, in each SDK's shape.
	_, err := oBad.Models.List(t.Context())
	openaiErr("openai models with a bad key", err, 401, "bad_key")
	_, err = aBad.Models.List(t.Context(), anthropic.ModelListParams{})
	anthropicErr("anthropic models with a bad key", err, 401, "bad_key")
	// The models, when the key is good.
	page, err := oGood.Models.List(t.Context())
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != "gpt-4.1" {
		t.Errorf("openai models: %+v %v", page, err)
	}

	// One model: granted ones only, in each SDK's shape.
	if m, err := oGood.Models.Get(t.Context(), "gpt-4.1"); err != nil || m.ID != "gpt-4.1" || m.OwnedBy != "openai" {
		t.Errorf("openai models.retrieve: %+v %v", m, err)
	}
	_, err = oGood.Models.Get(t.Context(), "gpt-9")
	openaiErr("openai models.retrieve of an unrouted model", err, 404, "model_not_found")
	if m, err := aGood.Models.Get(t.Context(), "claude-sonnet-4-5", anthropic.ModelGetParams{}); err != nil || m.ID != "claude-sonnet-4-5" {
		t.Errorf("anthropic models.retrieve: %+v %v", m, err)
	}
	_, err = aGood.Models.Get(t.Context(), "gpt-4.1", anthropic.ModelGetParams{})
	anthropicErr("anthropic models.retrieve of an OpenAI model", err, 404, "model_not_found")
	_, ungranted, _ := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1"}, in.storeArgs...)...)
	aOther := ac(strings.TrimSpace(ungranted))
	_, err = aOther.Models.Get(t.Context(), "claude-sonnet-4-5", anthropic.ModelGetParams{})
	anthropicErr("anthropic models.retrieve of a model the key is not granted", err, 404, "model_not_found")

	// Provider endpoints this server does not serve: 404s the SDKs read.
	_, err = oGood.Files.List(t.Context(), openai.FileListParams{})
	openaiErr("openai files", err, 404, "no_route")
	_, err = oGood.Conversations.Get(t.Context(), "conv_0123456789abcdef0123456789abcdef")
	openaiErr("openai conversations.retrieve", err, 404, "no_route")
	_, err = aGood.Beta.Files.List(t.Context(), anthropic.BetaFileListParams{})
	anthropicErr("anthropic files", err, 404, "no_route")

	// count_tokens refusals.
	_, err = aGood.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "acme-contributor-7b",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	anthropicErr("count_tokens of a contributor model", err, 403, "contributor_model_refused")
	_, err = aBad.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{
		Model: "claude-sonnet-4-5", Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	anthropicErr("count_tokens with a bad key", err, 401, "bad_key")

	// The shim's own refusal names its receipt as the request id.
	_, err = oGood.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-9",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	openaiErr("openai chat with an unrouted model", err, 404, "model_not_found")
	var e *openai.Error
	if errors.As(err, &e) && e.Response.Header.Get("X-Request-Id") != e.Response.Header.Get("X-Caduceus-Receipt") {
		t.Errorf("the refusal's request id %q is not its receipt %q", e.Response.Header.Get("X-Request-Id"), e.Response.Header.Get("X-Caduceus-Receipt"))
	}

	// The management API keeps its problems, and the trail its new path.
	resp, err := http.Get(in.url + "/v1/trader/nowhere")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("an unknown management path answers %s: %s", resp.Header.Get("Content-Type"), b)
	}
	if code, body := in.do(t, "GET", "/v1/trail/conversations", in.adminKey, nil); code != 200 || body["conversations"] == nil {
		t.Errorf("GET /v1/trail/conversations: %d %v", code, body)
	}
}

// TestBrowserAppsAndLargeRequests: with
// shim.cors.allowed_origins, a preflight from an allowed origin is answered
// without a key or the edge secret, any other origin's is refused, and the
// real request still needs both (its refusals readable by the page); a
// provider route takes bodies up to shim.max_request_bytes (default 32
// MiB, past the 16 MiB it took before) and refuses a larger one with 413
// in the provider's envelope.
func TestBrowserAppsAndLargeRequests(t *testing.T) {
	const origin = "https://app.example.com"
	env := map[string]string{"CADUCEUS_EDGE_SECRET": "edge-secret-of-the-proxy"}
	in, key := providerServeEnv(t, func(k string) string { return env[k] }, "  cors: {allowed_origins: ["+origin+"]}\n")
	send := func(method, path, body string, hdr ...string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, in.url+path, strings.NewReader(body))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	preflight := []string{"Origin", origin, "Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "authorization,content-type"}
	resp, _ := send("OPTIONS", "/v1/chat/completions", "", preflight...)
	if resp.StatusCode != 204 || resp.Header.Get("Access-Control-Allow-Origin") != origin || resp.Header.Get("Access-Control-Allow-Headers") != "authorization,content-type" {
		t.Errorf("preflight from %s: %d %v", origin, resp.StatusCode, resp.Header)
	}
	resp, _ = send("OPTIONS", "/v1/chat/completions", "", "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight from another origin: %d %v", resp.StatusCode, resp.Header)
	}
	resp, _ = send("OPTIONS", "/v1/admin/keys", "", preflight...)
	if resp.StatusCode != 403 || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight on the management API: %d %v", resp.StatusCode, resp.Header)
	}
	chat := `{"model":"gpt-4.1","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	resp, body := send("POST", "/v1/chat/completions", chat, "Origin", origin, "Authorization", "Bearer "+key, "Content-Type", "application/json")
	if resp.StatusCode != 403 || !strings.Contains(body, "edge_auth_required") || resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("the real request without the edge secret: %d %s %v", resp.StatusCode, body, resp.Header)
	}
	edge := []string{"Origin", origin, "X-Edge-Auth", env["CADUCEUS_EDGE_SECRET"], "Content-Type", "application/json"}
	resp, body = send("POST", "/v1/chat/completions", chat, edge...)
	if resp.StatusCode != 401 || !strings.Contains(body, "missing_key") || resp.Header.Get("Access-Control-Allow-Origin") != origin {
		t.Errorf("the real request without a key: %d %s", resp.StatusCode, body)
	}
	resp, body = send("POST", "/v1/chat/completions", chat, append(edge, "Authorization", "Bearer "+key)...)
	if resp.StatusCode != 200 || resp.Header.Get("Access-Control-Allow-Origin") != origin || !strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "X-Request-Id") {
		t.Errorf("the real request: %d %s %v", resp.StatusCode, body, resp.Header)
	}

	big := func(n int) string {
		return `{"model":"gpt-4.1","max_tokens":10,"messages":[{"role":"user","content":"` + strings.Repeat("a", n) + `"}]}`
	}
	resp, body = send("POST", "/v1/chat/completions", big(20<<20), append(edge, "Authorization", "Bearer "+key)...)
	if resp.StatusCode != 200 {
		t.Errorf("a 20 MiB request: %d %.300s", resp.StatusCode, body)
	}
	resp, body = send("POST", "/v1/chat/completions", big(33<<20), append(edge, "Authorization", "Bearer "+key)...)
	if resp.StatusCode != 413 || !strings.Contains(body, `"error":{"message":"`) || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("a 33 MiB request: %d %.300s %v", resp.StatusCode, body, resp.Header)
	}
}

// TestEmbeddingsThroughTheGateway: POST /v1/embeddings is forwarded like a
// chat completion — the caller's grant, a reservation priced per input
// token (no output), the key's budget, failover along the plan, a receipt
// — with the official OpenAI SDK.
func TestEmbeddingsThroughTheGateway(t *testing.T) { eachStore(t, testEmbeddingsThroughTheGateway) }

func testEmbeddingsThroughTheGateway(t *testing.T, serveArgs ...string) {
	up := &fakeProvider{name: "openai"}
	down := &fakeProvider{name: "down"}
	down.fail.Store(503)
	upSrv, downSrv := httptest.NewServer(up), httptest.NewServer(down)
	t.Cleanup(upSrv.Close)
	t.Cleanup(downSrv.Close)
	conf := fmt.Sprintf(`shim:
  routes:
    down: {kind: openai, provider: backup, base_url: %s/v1, models: [text-embedding-3-small]}
    openai: {kind: openai, base_url: %s/v1, models: [text-embedding-3-small]}
  plans:
    main:
      failover: definite
      models:
        text-embedding-3-small: [{route: down}, {route: openai}]
  prices:
    backup/text-embedding-3-small: {input: 20}
    openai/text-embedding-3-small: {input: 20}
  budgets:
    key: {day: 0.01}
`, downSrv.URL, upSrv.URL)
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, append([]string{"--config", file}, serveArgs...)...)
	mk := func(models string) string {
		t.Helper()
		code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route", "--models", models}, storeArgsOf(in, serveArgs)...)...)
		if code != 0 {
			t.Fatalf("keys create: %s", errOut)
		}
		return strings.TrimSpace(out)
	}
	key := mk("backup/text-embedding-3-small,openai/text-embedding-3-small")
	client := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	var hr *http.Response
	emb, err := client.Embeddings.New(t.Context(), openai.EmbeddingNewParams{Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("the quick brown fox")}}, option.WithResponseInto(&hr))
	if err != nil || len(emb.Data) != 1 || len(emb.Data[0].Embedding) != 3 || emb.Usage.PromptTokens != 8 {
		t.Fatalf("embeddings: %+v %v", emb, err)
	}
	if down.calls.Load() != 1 || up.calls.Load() != 1 {
		t.Errorf("calls: down %d, openai %d; want the failover from the first step to the second", down.calls.Load(), up.calls.Load())
	}
	receipt := hr.Header.Get("X-Caduceus-Receipt")
	code, body := in.do(t, "GET", "/v1/receipts", key, nil)
	if code != 200 {
		t.Fatalf("receipts: %d %v", code, body)
	}
	var rc map[string]any
	for _, r := range body["receipts"].([]any) {
		if m := r.(map[string]any); m["id"] == receipt {
			rc = m
		}
	}
	if rc == nil || rc["protocol"] != "embeddings" || rc["decision"] != "forward" {
		t.Fatalf("receipt %s: %v", receipt, rc)
	}
	spend := rc["spend"].(map[string]any)
	// 8 input tokens at $20 per million: 160 microdollars; no output.
	if spend["settled_microdollars"].(float64) != 160 {
		t.Errorf("settled %v, want 160 (8 input tokens at $20/M)", spend["settled_microdollars"])
	}

	// Budgeted: an input whose bound (a token a byte, at $20/M) passes
	// the key's $0.01 a day is refused before any call.
	calls := up.calls.Load()
	_, err = client.Embeddings.New(t.Context(), openai.EmbeddingNewParams{Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String(strings.Repeat("word ", 200))}})
	var be *openai.Error
	if !errors.As(err, &be) || be.StatusCode != 429 || be.Code != "budget_exceeded" || up.calls.Load() != calls {
		t.Errorf("an embedding past the budget: %v (calls %d -> %d)", err, calls, up.calls.Load())
	}

	// Not granted: refused before any call.
	other := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(mk("openai/gpt-4.1")), option.WithMaxRetries(0))
	_, err = other.Embeddings.New(t.Context(), openai.EmbeddingNewParams{Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")}})
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 403 || e.Code != "model_not_granted" {
		t.Errorf("an ungranted key: %v", err)
	}
}

// TestResponsesRetrievedFromTheRouteThatServedThem: GET /v1/responses/{id}
// and POST /v1/responses/{id}/cancel reach the route that served the
// answer, for the caller's tenant only; POST /v1/responses/input_tokens
// is counted by a route of the plan — with the official OpenAI SDK.
func TestResponsesRetrievedFromTheRouteThatServedThem(t *testing.T) {
	eachStore(t, testResponsesRetrieved)
}

func testResponsesRetrieved(t *testing.T, serveArgs ...string) {
	in, key := providerServe(t, "", serveArgs...)
	client := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	resp, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "gpt-4.1",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil || resp.ID != "resp_1" {
		t.Fatalf("responses.create: %+v %v", resp, err)
	}
	got, err := client.Responses.Get(t.Context(), resp.ID, responses.ResponseGetParams{})
	if err != nil || got.ID != "resp_1" || got.Status != "completed" {
		t.Errorf("responses.retrieve: %+v %v", got, err)
	}
	cancelled, err := client.Responses.Cancel(t.Context(), resp.ID)
	if err != nil || cancelled.Status != "cancelled" {
		t.Errorf("responses.cancel: %+v %v", cancelled, err)
	}
	n, err := client.Responses.InputTokens.Count(t.Context(), responses.InputTokenCountParams{Model: openai.String("gpt-4.1"),
		Input: responses.InputTokenCountParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil || n.InputTokens != 42 {
		t.Errorf("responses.inputTokens.count: %+v %v", n, err)
	}
	// An answer this tenant never got is not found, in OpenAI's shape.
	var e *openai.Error
	_, err = client.Responses.Get(t.Context(), "resp_someone_elses", responses.ResponseGetParams{})
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "not_found" {
		t.Errorf("responses.retrieve of an unknown id: %v", err)
	}
	code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-2", "--scopes", "route", "--models", "openai/gpt-4.1"}, in.storeArgs...)...)
	if code != 0 {
		t.Fatal(errOut)
	}
	other := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(strings.TrimSpace(out)), option.WithMaxRetries(0))
	_, err = other.Responses.Get(t.Context(), resp.ID, responses.ResponseGetParams{})
	if !errors.As(err, &e) || e.StatusCode != 404 {
		t.Errorf("another tenant retrieves resp_1: %v", err)
	}
}

// TestStartupCheckFindsARefusedRouteCredential: serve asks each gateway
// route's upstream for its models at start; a route whose credential the
// upstream refuses is logged as an error and shown unhealthy in /metrics
// before any client meets it, and a good route healthy.
func TestStartupCheckFindsARefusedRouteCredential(t *testing.T) {
	bad, good := &fakeProvider{name: "bad"}, &fakeProvider{name: "good"}
	bad.fail.Store(401)
	badSrv, goodSrv := httptest.NewServer(bad), httptest.NewServer(good)
	t.Cleanup(badSrv.Close)
	t.Cleanup(goodSrv.Close)
	conf := fmt.Sprintf(`shim:
  routes:
    stale: {kind: openai, base_url: %s/v1, key_env: STALE_KEY, models: [gpt-4.1]}
    fresh: {kind: anthropic, base_url: %s, key_env: FRESH_KEY, models: [claude-sonnet-4-5]}
  plans:
    main:
      failover: none
      models:
        gpt-4.1: [{route: stale}]
        claude-sonnet-4-5: [{route: fresh}]
  prices:
    openai/gpt-4.1: {input: 2, output: 8, max_output_tokens: 4096}
    anthropic/claude-sonnet-4-5: {input: 3, output: 15, max_output_tokens: 4096}
`, badSrv.URL, goodSrv.URL)
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"STALE_KEY": "sk-revoked", "FRESH_KEY": "sk-good"}
	in := startEnv(t, func(k string) string { return env[k] }, "--config", file)
	in.stderr.await(t, regexp.MustCompile(`shim route unhealthy: the upstream refused its credential.*route=stale`), in.done)
	in.stderr.await(t, regexp.MustCompile(`shim route checked.*route=fresh`), in.done)
	resp, err := http.Get(in.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`caduceus_shim_route_healthy{route="stale"} 0`, `caduceus_shim_route_healthy{route="fresh"} 1`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(in.stderr.String(), "sk-revoked") || strings.Contains(in.stderr.String(), "sk-good") {
		t.Error("the log shows a route's key")
	}
}

// TestGatewayRetriesAStep: a plan's retries try a step again after a
// definite failure of the moment (503 before any byte), with backoff, so
// the client sees one answer; when every try fails, the answer carries
// x-should-retry: false and the SDK does not repeat what Caduceus did.
func TestGatewayRetriesAStep(t *testing.T) {
	var calls, failFirst atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"object":"list","data":[]}`)
			return
		}
		if n := calls.Add(1); n <= failFirst.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(503)
			io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","code":null}}`)
			return
		}
		(&fakeProvider{name: "openai"}).ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	conf := fmt.Sprintf(`shim:
  routes:
    openai: {kind: openai, base_url: %s/v1, models: [gpt-4.1]}
  plans:
    main:
      failover: none
      retries: 2
      retry_backoff: 1ms
      models:
        gpt-4.1: [{route: openai}]
  prices:
    openai/gpt-4.1: {input: 2, output: 8, max_output_tokens: 4096}
`, up.URL)
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, "--config", file)
	code, out, errOut := cli(t, "keys", "create", "--tenant", "slot-1", "--scopes", "route", "--data", in.data, "--models", "openai/gpt-4.1")
	if code != 0 {
		t.Fatal(errOut)
	}
	key := strings.TrimSpace(out)
	params := openai.ChatCompletionNewParams{Model: "gpt-4.1", MaxTokens: openai.Int(10),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}

	// Two 503s, then an answer: one answer for the client, who did not retry.
	failFirst.Store(2)
	client := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	cc, err := client.Chat.Completions.New(t.Context(), params)
	if err != nil || cc.Choices[0].Message.Content != "from openai" || calls.Load() != 3 {
		t.Fatalf("retried step: %v (upstream called %d times)", err, calls.Load())
	}

	// Every try fails: the upstream's 503 is the answer, with
	// x-should-retry: false, and the SDK (2 retries of its own) sends it once.
	calls.Store(0)
	failFirst.Store(100)
	client = openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(2))
	_, err = client.Chat.Completions.New(t.Context(), params)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 503 || e.Response.Header.Get("X-Should-Retry") != "false" || calls.Load() != 3 {
		t.Errorf("every try failed: %v, upstream called %d times (want 3: one try and two retries)", err, calls.Load())
	}
}

// TestModelPatterns: a route and a plan may serve a pattern
// ("gpt-4.1*"), priced per pattern, so a dated snapshot needs no new
// config; it is served, granted and charged as the identity asked for
// (openai/gpt-4.1-2025-04-14). An exact grant does not reach a snapshot;
// an explicit pattern grant does.
func TestModelPatterns(t *testing.T) {
	up := httptest.NewServer(&fakeProvider{name: "openai"})
	t.Cleanup(up.Close)
	conf := fmt.Sprintf(`shim:
  routes:
    openai: {kind: openai, base_url: %s/v1, models: ["gpt-4.1*"]}
  plans:
    main:
      failover: none
      models:
        "gpt-4.1*": [{route: openai}]
  prices:
    "openai/gpt-4.1*": {input: 2, output: 8, max_output_tokens: 4096}
`, up.URL)
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, "--config", file)
	mk := func(models string) openai.Client {
		code, out, errOut := cli(t, "keys", "create", "--tenant", "slot-1", "--scopes", "route", "--data", in.data, "--models", models)
		if code != 0 {
			t.Fatal(errOut)
		}
		return openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(strings.TrimSpace(out)), option.WithMaxRetries(0))
	}
	params := func(model string) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: model, MaxTokens: openai.Int(10), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	}
	pattern, exact := mk("openai/gpt-4.1*"), mk("openai/gpt-4.1")
	var hr *http.Response
	cc, err := pattern.Chat.Completions.New(t.Context(), params("gpt-4.1-2025-04-14"), option.WithResponseInto(&hr))
	if err != nil || cc.Choices[0].Message.Content != "from openai" {
		t.Fatalf("a dated snapshot through the pattern: %v", err)
	}
	if _, err := exact.Chat.Completions.New(t.Context(), params("gpt-4.1")); err != nil {
		t.Errorf("the exact model with an exact grant: %v", err)
	}
	var e *openai.Error
	if _, err := exact.Chat.Completions.New(t.Context(), params("gpt-4.1-2025-04-14")); !errors.As(err, &e) || e.StatusCode != 403 || e.Code != "model_not_granted" {
		t.Errorf("a snapshot with only the exact grant: %v", err)
	}
	if _, err := pattern.Chat.Completions.New(t.Context(), params("gpt-5")); !errors.As(err, &e) || e.StatusCode != 404 || e.Code != "model_not_found" {
		t.Errorf("a model no pattern routes: %v", err)
	}
	code, body := in.do(t, "GET", "/v1/receipts", in.adminKey, nil)
	if code != 200 {
		t.Fatal(body)
	}
	for _, r := range body["receipts"].([]any) {
		rc := r.(map[string]any)
		if rc["id"] != hr.Header.Get("X-Caduceus-Receipt") {
			continue
		}
		att := rc["spend"].(map[string]any)["attempts"].([]any)[0].(map[string]any)
		// The fake reports 1,000 input tokens (400 cached, free here: the
		// pattern's price has no cached rate) and 100 output, at the
		// pattern's $2/$8 per million: 600×2 + 100×8 = 2,000 µ$.
		if att["model"] != "openai/gpt-4.1-2025-04-14" || att["settled_microdollars"].(float64) != 2000 {
			t.Errorf("the snapshot's attempt: %v", att)
		}
	}
}

// TestPricesAsProvidersBillThroughTheSDKs: Anthropic's cache writes are
// charged at their own price, OpenAI's reasoning tokens at theirs, and a
// per-request fee on each answer — as the receipts say, with the official
// SDKs.
func TestPricesAsProvidersBillThroughTheSDKs(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodGet:
			io.WriteString(w, `{"object":"list","data":[]}`)
		case strings.HasSuffix(r.URL.Path, "/messages"):
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":1000,"cache_creation_input_tokens":4000,"cache_read_input_tokens":2000,"output_tokens":100}}`)
		default:
			io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"o3","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1000,"completion_tokens":500,"total_tokens":1500,"completion_tokens_details":{"reasoning_tokens":300}}}`)
		}
	}))
	t.Cleanup(up.Close)
	conf := fmt.Sprintf(`shim:
  routes:
    openai: {kind: openai, base_url: %[1]s/v1, models: [o3]}
    anthropic: {kind: anthropic, base_url: %[1]s, models: [claude-sonnet-4-5]}
  plans:
    main:
      failover: none
      models:
        o3: [{route: openai}]
        claude-sonnet-4-5: [{route: anthropic}]
  prices:
    openai/o3: {input: 2, output: 8, reasoning: 10, per_request: 0.001, max_output_tokens: 1000}
    anthropic/claude-sonnet-4-5: {input: 3, cached_input: 0.3, cache_write: 3.75, output: 15, max_output_tokens: 1000}
`, up.URL)
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, "--config", file)
	code, out, errOut := cli(t, "keys", "create", "--tenant", "slot-1", "--scopes", "route", "--data", in.data, "--models", "openai/o3,anthropic/claude-sonnet-4-5")
	if code != 0 {
		t.Fatal(errOut)
	}
	key := strings.TrimSpace(out)
	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ac := anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	var oh, ah *http.Response
	if _, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "o3", MaxCompletionTokens: openai.Int(600),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("think")}}, option.WithResponseInto(&oh)); err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 200,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("cache me"))}}, aoption.WithResponseInto(&ah)); err != nil {
		t.Fatal(err)
	}
	settled := map[string]float64{}
	_, body := in.do(t, "GET", "/v1/receipts", in.adminKey, nil)
	for _, r := range body["receipts"].([]any) {
		rc := r.(map[string]any)
		if sp, ok := rc["spend"].(map[string]any); ok {
			settled[rc["id"].(string)] = sp["settled_microdollars"].(float64)
		}
	}
	// o3: 1,000 input at $2, 200 output at $8, 300 reasoning at $10, and
	// the $0.001 fee: 2,000 + 1,600 + 3,000 + 1,000.
	if got := settled[oh.Header.Get("X-Caduceus-Receipt")]; got != 7600 {
		t.Errorf("o3 settled %v µ$, want 7,600", got)
	}
	// claude: 1,000 input at $3, 2,000 cache reads at $0.30, 4,000 cache
	// writes at $3.75, 100 output at $15: 3,000 + 600 + 15,000 + 1,500.
	if got := settled[ah.Header.Get("X-Caduceus-Receipt")]; got != 20100 {
		t.Errorf("claude settled %v µ$, want 20,100", got)
	}
}

// TestRateLimitsPerKeyAndTenant: a key's rpm and a tenant's tpm (beside
// their budgets) are enforced before any upstream call: 429
// rate_limit_exceeded in the provider's envelope, with Retry-After (the
// rest of the minute, at most 60) and the provider's rate-limit headers,
// which the official SDKs read; on SQLite and Postgres.
func TestRateLimitsPerKeyAndTenant(t *testing.T) { eachStore(t, testRateLimits) }

func testRateLimits(t *testing.T, serveArgs ...string) {
	in, key := providerServe(t, `  budgets:
    key: {rpm: 2}
    tenant: {tpm: 2000}
`, serveArgs...)
	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt-4.1", MaxTokens: openai.Int(10), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
	// The windows are UTC minutes: start with the minute's end well ahead,
	// so the requests below share one.
	startEarlyInMinute(50)
	for i := range 2 {
		if _, err := oc.Chat.Completions.New(t.Context(), params); err != nil {
			t.Fatalf("request %d within the rpm: %v", i, err)
		}
	}
	_, err := oc.Chat.Completions.New(t.Context(), params)
	var e *openai.Error
	if !errors.As(err, &e) || e.StatusCode != 429 || e.Code != "rate_limit_exceeded" {
		t.Fatalf("the third request in a minute with rpm 2: %v", err)
	}
	h := e.Response.Header
	ra, _ := strconv.Atoi(h.Get("Retry-After"))
	if ra < 1 || ra > 60 || h.Get("X-Ratelimit-Limit-Requests") != "2" || h.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Errorf("the refusal's headers: %v", h)
	}
	// The tenant's tpm: the fake reports 1,100 tokens an answer, so two
	// answers pass 2,000; another key of the tenant is refused for tokens.
	_, other, _ := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route", "--models", "anthropic/claude-sonnet-4-5"}, in.storeArgs...)...)
	ac := anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey(strings.TrimSpace(other)), aoption.WithMaxRetries(0))
	_, err = ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 429 || !strings.Contains(ae.RawJSON(), "rate_limit_exceeded: shim: tokens per minute of tenant") ||
		ae.Response.Header.Get("Anthropic-Ratelimit-Tokens-Limit") != "2000" || ae.Response.Header.Get("Anthropic-Ratelimit-Tokens-Remaining") != "0" {
		t.Errorf("another key past the tenant's tpm: %v", err)
	}
}

// TestResponseCache: with a plan's cache, a request equal to an earlier
// one (key order aside) is answered from it — the same bytes, a stream as
// the same events — without an upstream call or a charge, its receipt
// naming the original; Cache-Control: no-cache goes upstream; another
// tenant has its own cache. Official OpenAI SDK, SQLite and Postgres.
func TestResponseCache(t *testing.T) { eachStore(t, testResponseCache) }

func testResponseCache(t *testing.T, serveArgs ...string) {
	up := &fakeProvider{name: "openai"}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	conf := fmt.Sprintf(`shim:
  routes:
    openai: {kind: openai, base_url: %s/v1, models: [gpt-4.1]}
  plans:
    main:
      failover: none
      cache: {ttl: 10m}
      models:
        gpt-4.1: [{route: openai}]
  prices:
    openai/gpt-4.1: {input: 2, output: 8, max_output_tokens: 4096}
`, upSrv.URL)
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	in := start(t, append([]string{"--config", file}, serveArgs...)...)
	storeArgs := storeArgsOf(in, serveArgs)
	mk := func(tenant string) string {
		code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", tenant, "--scopes", "route", "--models", "openai/gpt-4.1"}, storeArgs...)...)
		if code != 0 {
			t.Fatal(errOut)
		}
		return strings.TrimSpace(out)
	}
	key := mk("slot-1")
	post := func(key, body string, hdr ...string) (*http.Response, string) {
		req, _ := http.NewRequest("POST", in.url+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"gpt-4.1","max_tokens":20,"stream":%v,"messages":[{"role":"user","content":"cache me"}]}`, stream)
		same := fmt.Sprintf(`{"messages":[{"content":"cache me","role":"user"}],"stream":%v,"max_tokens":20,"model":"gpt-4.1"}`, stream)
		calls := up.calls.Load()
		first, firstBody := post(key, body)
		hit, hitBody := post(key, same)
		if first.StatusCode != 200 || hit.StatusCode != 200 || hitBody != firstBody || hit.Header.Get("X-Caduceus-Cache") != "hit" || up.calls.Load() != calls+1 {
			t.Fatalf("stream %v: first %d, hit %d %q, same bytes %v, upstream calls %d", stream, first.StatusCode, hit.StatusCode, hit.Header.Get("X-Caduceus-Cache"), hitBody == firstBody, up.calls.Load()-calls)
		}
		// The hit's receipt names the first and charged nothing.
		_, rs := in.do(t, "GET", "/v1/receipts", key, nil)
		for _, r := range rs["receipts"].([]any) {
			rc := r.(map[string]any)
			if rc["id"] != hit.Header.Get("X-Caduceus-Receipt") {
				continue
			}
			if rc["cache_hit"] != first.Header.Get("X-Caduceus-Receipt") || rc["spend"].(map[string]any)["settled_microdollars"].(float64) != 0 {
				t.Errorf("stream %v: the hit's receipt %v", stream, rc)
			}
		}
		// no-cache goes upstream.
		if resp, _ := post(key, body, "Cache-Control", "no-cache"); resp.Header.Get("X-Caduceus-Cache") != "" || up.calls.Load() != calls+2 {
			t.Errorf("stream %v: no-cache answered from the cache (%d calls)", stream, up.calls.Load()-calls)
		}
	}
	// The official SDK reads a hit as any answer.
	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt-4.1", MaxTokens: openai.Int(5), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("sdk")}}
	a, err := oc.Chat.Completions.New(t.Context(), params)
	calls := up.calls.Load()
	b, err2 := oc.Chat.Completions.New(t.Context(), params)
	if err != nil || err2 != nil || a.Choices[0].Message.Content != b.Choices[0].Message.Content || up.calls.Load() != calls {
		t.Errorf("the SDK's second call: %v %v (upstream calls %d)", err, err2, up.calls.Load()-calls)
	}
	// Another tenant has a cache of its own.
	if resp, _ := post(mk("slot-2"), `{"model":"gpt-4.1","max_tokens":20,"stream":false,"messages":[{"role":"user","content":"cache me"}]}`); resp.Header.Get("X-Caduceus-Cache") != "" {
		t.Error("another tenant got slot-1's cached answer")
	}
}
