package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// fakeOpenAI is the upstream: it counts calls, records the last body and
// the key it was sent, and answers one chat completion.
type fakeOpenAI struct {
	calls atomic.Int32
	body  atomic.Value
	auth  atomic.Value
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	b, _ := io.ReadAll(r.Body)
	f.body.Store(string(b))
	f.auth.Store(r.Header.Get("Authorization"))
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"from upstream"},"finish_reason":"stop"}]}`)
}

// TestShimThroughTheServer drives the LLM routes of `caduceus serve` with the
// official SDKs: a direct answer, a shimmed request forwarded to the
// configured upstream with its own key, refusals in each protocol's
// envelope, receipts, and the audit chain.
func TestShimThroughTheServer(t *testing.T) {
	up := &fakeOpenAI{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	env := map[string]string{"CADUCEUS_OPENAI_API_KEY": "sk-upstream-secret"}
	in := startEnv(t, func(k string) string { return env[k] }, "--upstream", "openai="+upstream.URL+"/v1")
	_, out, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure", "--harness", "claude-code")
	key := strings.TrimSpace(out)

	provision := func(doc string) {
		t.Helper()
		req, _ := http.NewRequest("POST", in.url+"/v1/provisions", strings.NewReader(doc))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Caduceus-Harness", "claude-code")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 201 {
			t.Fatalf("create provision: %d %s", resp.StatusCode, b)
		}
	}
	provision(`{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days.","stop_reason":"end_turn"}}`)
	provision(`{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	ctxReq, _ := http.NewRequest("POST", in.url+"/v1/context", strings.NewReader(`{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`))
	ctxReq.Header.Set("Authorization", "Bearer "+key)
	ctxReq.Header.Set("X-Caduceus-Harness", "claude-code")
	if resp, err := http.DefaultClient.Do(ctxReq); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create context: %v %v", resp, err)
	}

	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	ask := func(prompt, model string) (*openai.ChatCompletion, *http.Response, error) {
		var hr *http.Response
		resp, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}, option.WithResponseInto(&hr))
		return resp, hr, err
	}

	// Direct answer: no upstream call.
	resp, hr, err := ask("how do I get a refund?", "gpt-4o-mini")
	if err != nil || resp.Choices[0].Message.Content != "Refunds take 14 days." {
		t.Fatalf("direct answer: %v %+v", err, resp)
	}
	if hr.Header.Get("X-Caduceus-Receipt") == "" || hr.Header.Get("X-Caduceus-Overhead-Us") == "" || up.calls.Load() != 0 {
		t.Errorf("direct answer: receipt %q, upstream calls %d", hr.Header.Get("X-Caduceus-Receipt"), up.calls.Load())
	}
	// Shimmed and forwarded with the upstream's own key.
	resp, _, err = ask("please deploy the payments service", "gpt-4o-mini")
	if err != nil || resp.Choices[0].Message.Content != "from upstream" {
		t.Fatalf("forwarded: %v %+v", err, resp)
	}
	body := up.body.Load().(string)
	if !strings.Contains(body, "make deploy-staging") || !strings.Contains(body, "PROV-DEPLOY") || up.auth.Load() != "Bearer sk-upstream-secret" || strings.Contains(body, key) {
		t.Errorf("upstream got auth %q body %s", up.auth.Load(), body)
	}

	// A contributor model is refused (after the key, which is read from the
	// headers before the body; before anything is done with the body) and
	// the refusal has its receipt.
	_, _, err = ask("hello", "acme-Contributor-7b")
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 403 {
		t.Errorf("contributor model: %v", err)
	}
	noKey := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey("not-a-key"), option.WithMaxRetries(0))
	_, err = noKey.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if !errors.As(err, &oe) || oe.StatusCode != 401 {
		t.Errorf("bad key over chat completions: %v", err)
	}
	// The Anthropic SDK sees its own error envelope.
	ac := anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey("not-a-key"), aoption.WithMaxRetries(0))
	_, err = ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4", MaxTokens: 16,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 401 || !strings.Contains(ae.RawJSON(), `"type":"error"`) {
		t.Errorf("bad key over messages: %v", err)
	}
	// Anthropic messages with a good key: the direct answer in its protocol.
	ac = anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
	msg, err := ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("refund please"))}})
	if err != nil || msg.Content[0].Text != "Refunds take 14 days." || msg.StopReason != "end_turn" {
		t.Errorf("messages direct answer: %v %+v", err, msg)
	}

	// Receipts and the audit trail: one receipt per authenticated request
	// (the contributor refusal included).
	code, rc := in.do(t, "GET", "/v1/receipts", key, nil)
	if code != 200 || len(rc["receipts"].([]any)) != 4 || !strings.Contains(mustJSON(rc), `"code":"contributor_model_refused"`) {
		t.Errorf("receipts: %d %v", code, mustJSON(rc))
	}
	// Dry-run: nothing is forwarded, nothing persisted.
	calls := up.calls.Load()
	dr, _ := json.Marshal(map[string]any{"model": "gpt-4o-mini", "messages": []any{map[string]any{"role": "user", "content": "deploy now"}}})
	req, _ := http.NewRequest("POST", in.url+"/v1/dry-run?protocol=chat", bytes.NewReader(dr))
	req.Header.Set("Authorization", "Bearer "+key)
	dresp, err := http.DefaultClient.Do(req)
	if err != nil || dresp.StatusCode != 200 {
		t.Fatalf("dry-run: %v %v", dresp, err)
	}
	db, _ := io.ReadAll(dresp.Body)
	if !strings.Contains(string(db), "PROV-DEPLOY") || !strings.Contains(string(db), `"persisted":false`) || up.calls.Load() != calls {
		t.Errorf("dry-run: %s (upstream calls %d -> %d)", db, calls, up.calls.Load())
	}
	// Provisions are CAS-versioned: a stale If-Match changes nothing.
	send := func(method, path, ifMatch, body string) (int, string) {
		req, _ := http.NewRequest(method, in.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Caduceus-Harness", "claude-code")
		if ifMatch != "" {
			req.Header.Set("If-Match", ifMatch)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("ETag") + " " + string(b)
	}
	code, got := send("GET", "/v1/provisions/PROV-REFUNDS", "", "")
	etag, _, _ := strings.Cut(got, " ")
	if code != 200 || etag == "" {
		t.Fatalf("get provision: %d %s", code, got)
	}
	updated := `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 7 days.","stop_reason":"end_turn"}}`
	if code, got := send("PUT", "/v1/provisions/PROV-REFUNDS", "999", updated); code != 409 {
		t.Errorf("stale If-Match: %d %s", code, got)
	}
	if code, got := send("PUT", "/v1/provisions/PROV-REFUNDS", etag, updated); code != 200 {
		t.Errorf("update: %d %s", code, got)
	}
	if resp, _, err := ask("refund?", "gpt-4o-mini"); err != nil || resp.Choices[0].Message.Content != "Refunds take 7 days." {
		t.Errorf("updated provision not in force: %v %+v", err, resp)
	}
	_, got = send("GET", "/v1/provisions/PROV-REFUNDS", "", "")
	etag, _, _ = strings.Cut(got, " ")
	if code, got := send("DELETE", "/v1/provisions/PROV-REFUNDS", etag, ""); code != 204 {
		t.Errorf("delete: %d %s", code, got)
	}
	if code, _ := send("GET", "/v1/provisions/PROV-REFUNDS", "", ""); code != 404 {
		t.Errorf("deleted provision still there: %d", code)
	}
	if code, out, errOut := cli(t, "audit", "verify", "--data", in.data); code != 0 {
		t.Errorf("audit verify: %s %s", out, errOut)
	}
	_, tail, _ := cli(t, "audit", "tail", "--data", in.data, "--tenant", "slot-1", "--json", "-n", "200")
	if n := strings.Count(tail, `"action":"shim.proxy"`); n != 5 {
		t.Errorf("%d shim.proxy records; want 5 (the bad-key requests have no tenant)", n)
	}
}

func TestShimCLI(t *testing.T) {
	data := t.TempDir()
	bundle := t.TempDir() + "/bundle.yaml"
	req := t.TempDir() + "/req.json"
	os.WriteFile(bundle, []byte(`provisions:
  - id: PROV-DEPLOY
    triggers: {keyword: {any: [deploy]}}
    action: shim
    context_refs: ["verb:deploy"]
context:
  - {ref: "verb:deploy", kind: verb, title: Deploying, body: "Deploy with make deploy-staging first."}
`), 0o600)
	os.WriteFile(req, []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"deploy it"}],"x_unknown":1}`), 0o600)
	code, out, errOut := cli(t, "shim", "provisions", "apply", bundle, "--data", data, "--harness", "claude-code")
	if code != 0 {
		t.Fatalf("apply: %d %s %s", code, out, errOut)
	}
	code, out, errOut = cli(t, "shim", "dry-run", "--protocol", "chat", req, "--data", data)
	if code != 0 || !strings.Contains(out, "make deploy-staging") || !strings.Contains(out, "x_unknown") {
		t.Fatalf("dry-run: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := cli(t, "shim", "dry-run", "--protocol", "smtp", req, "--data", data); code != 2 || !strings.Contains(errOut, "protocol") {
		t.Errorf("bad protocol: %d %s", code, errOut)
	}
	os.WriteFile(bundle, []byte("provisions:\n  - id: X\n    action: teleport\n"), 0o600)
	if code, _, errOut := cli(t, "shim", "provisions", "apply", bundle, "--data", data, "--harness", "claude-code"); code == 0 {
		t.Errorf("a bad bundle applied: %s", errOut)
	}
}

// TestShimMemoryThroughTheServer: a three-turn conversation through the
// OpenAI SDK and `serve`: turn 1 fires a rule, turns 2 and 3 carry a stack trace;
// /v1/outcomes shows retry_error for the rule, /v1/insights proposes a
// candidate, /v1/memory holds the entities, and the active rules are
// unchanged. /v1/sync refuses a source outside the allowlist.
func TestShimMemoryThroughTheServer(t *testing.T) {
	up := &fakeOpenAI{}
	upstream := httptest.NewServer(up)
	defer upstream.Close()
	in := start(t, "--upstream", "openai="+upstream.URL+"/v1")
	_, out, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure", "--harness", "claude-code")
	key := strings.TrimSpace(out)
	for path, doc := range map[string]string{
		"/v1/context":    `{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`,
		"/v1/provisions": `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`,
	} {
		req, _ := http.NewRequest("POST", in.url+path, strings.NewReader(doc))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Caduceus-Harness", "claude-code")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 201 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("POST %s: %v %s", path, err, b)
		}
	}
	_, before := in.do(t, "GET", "/v1/provisions", key, nil)

	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0),
		option.WithHeader("X-Caduceus-Conversation", "conv-e2e-1"), option.WithHeader("X-Caduceus-Project", "payments"))
	msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("deploy the service in src/api/app.py")}
	turn := func() {
		t.Helper()
		if _, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: msgs}); err != nil {
			t.Fatal(err)
		}
	}
	turn()
	trace := "\nTraceback (most recent call last):\n  File \"/srv/api/app/config.py\", line 41, in load\nKeyError: 'DATABASE_URL'"
	msgs = append(msgs, openai.AssistantMessage("done"), openai.UserMessage("the deploy failed:"+trace))
	turn()
	msgs = append(msgs, openai.AssistantMessage("try again"), openai.UserMessage("the deploy still fails:"+trace))
	turn()

	_, oc1 := in.do(t, "GET", "/v1/outcomes", key, nil)
	if !strings.Contains(mustJSON(oc1), `"retry_error"`) || !strings.Contains(mustJSON(oc1), "PROV-DEPLOY") {
		t.Errorf("outcomes: %s", mustJSON(oc1))
	}
	_, mem := in.do(t, "GET", "/v1/memory?project=payments", key, nil)
	if !strings.Contains(mustJSON(mem), "src/api/app.py") || !strings.Contains(mustJSON(mem), "KeyError") {
		t.Errorf("memory: %s", mustJSON(mem))
	}
	_, ins := in.do(t, "GET", "/v1/insights", key, nil)
	if !strings.Contains(mustJSON(ins), `"status":"candidate"`) {
		t.Errorf("insights: %s", mustJSON(ins))
	}
	_, after := in.do(t, "GET", "/v1/provisions", key, nil)
	if mustJSON(before) != mustJSON(after) {
		t.Errorf("insights changed the active rules:\n%s\n%s", mustJSON(before), mustJSON(after))
	}
	// Another tenant sees none of it.
	_, other, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-2", "--scopes", "route")
	if _, m := in.do(t, "GET", "/v1/memory", strings.TrimSpace(other), nil); strings.Contains(mustJSON(m), "app.py") {
		t.Errorf("slot-2 sees slot-1's memory: %s", mustJSON(m))
	}
	sreq, _ := http.NewRequest("POST", in.url+"/v1/sync", strings.NewReader(`{"source":"http://169.254.169.254/latest"}`))
	sreq.Header.Set("Authorization", "Bearer "+key)
	sreq.Header.Set("X-Caduceus-Harness", "claude-code")
	resp, err := http.DefaultClient.Do(sreq)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode < 400 {
		t.Errorf("sync from a non-allowlisted URL: %d %s", resp.StatusCode, b)
	}
}
