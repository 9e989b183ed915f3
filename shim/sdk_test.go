package shim_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimgate"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

func openaiClient(e *env, key string, rec *recorder, opts ...option.RequestOption) openai.Client {
	hc := &http.Client{}
	if rec != nil {
		hc.Transport = rec
	}
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(e.srv.URL + "/v1/"), option.WithAPIKey(key),
		option.WithMaxRetries(0), option.WithHTTPClient(hc)}, opts...)...)
}

func anthropicClient(e *env, key string, rec *recorder, opts ...aoption.RequestOption) anthropic.Client {
	hc := &http.Client{}
	if rec != nil {
		hc.Transport = rec
	}
	return anthropic.NewClient(append([]aoption.RequestOption{aoption.WithBaseURL(e.srv.URL), aoption.WithAPIKey(key),
		aoption.WithMaxRetries(0), aoption.WithHTTPClient(hc)}, opts...)...)
}

// result is what one SDK call produced, normalized across protocols.
type result struct {
	text   string
	stop   string
	header http.Header
}

// call sends prompt through the official SDK of protocol p.
func call(t *testing.T, e *env, key string, p wire.Protocol, stream bool, model, prompt string, rec *recorder) (result, error) {
	t.Helper()
	ctx := t.Context()
	var hr *http.Response
	switch p {
	case wire.ChatCompletions:
		c := openaiClient(e, key, rec)
		params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}}
		if !stream {
			resp, err := c.Chat.Completions.New(ctx, params, option.WithResponseInto(&hr))
			if err != nil {
				return result{}, err
			}
			return result{resp.Choices[0].Message.Content, resp.Choices[0].FinishReason, hr.Header}, nil
		}
		s := c.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&hr))
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			return result{}, err
		}
		return result{acc.Choices[0].Message.Content, acc.Choices[0].FinishReason, hr.Header}, nil
	case wire.Responses:
		c := openaiClient(e, key, rec)
		params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}}
		if !stream {
			resp, err := c.Responses.New(ctx, params, option.WithResponseInto(&hr))
			if err != nil {
				return result{}, err
			}
			return result{resp.OutputText(), string(resp.Status), hr.Header}, nil
		}
		s := c.Responses.NewStreaming(ctx, params, option.WithResponseInto(&hr))
		var deltas strings.Builder
		var final responses.Response
		last := ""
		for s.Next() {
			ev := s.Current()
			last = ev.Type
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
			case "response.completed":
				final = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			return result{}, err
		}
		if last != "response.completed" {
			t.Fatalf("responses stream ended with %q", last)
		}
		if final.OutputText() != deltas.String() {
			t.Fatalf("completed text %q != deltas %q", final.OutputText(), deltas.String())
		}
		return result{deltas.String(), string(final.Status), hr.Header}, nil
	default:
		c := anthropicClient(e, key, rec)
		params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}}
		if !stream {
			msg, err := c.Messages.New(ctx, params, aoption.WithResponseInto(&hr))
			if err != nil {
				return result{}, err
			}
			return result{msg.Content[0].Text, string(msg.StopReason), hr.Header}, nil
		}
		s := c.Messages.NewStreaming(ctx, params, aoption.WithResponseInto(&hr))
		msg := anthropic.Message{}
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Err(); err != nil {
			return result{}, err
		}
		return result{msg.Content[0].Text, string(msg.StopReason), hr.Header}, nil
	}
}

var modelOf = map[wire.Protocol]string{wire.ChatCompletions: "gpt-4o", wire.Responses: "gpt-5", wire.Messages: "claude-sonnet-4-5"}

func TestSDKDirectResponse(t *testing.T) {
	e := newEnv(t, nil)
	e.provision(t, "key-a", `{"id":"PROV-REFUND","priority":10,"triggers":{"keyword":{"any":["refund policy"]}},
		"action":"respond_directly","response":{"text":"Refunds are issued within 14 days of purchase.","stop_reason":"end_turn"}}`)
	wantStop := map[wire.Protocol]string{wire.ChatCompletions: "stop", wire.Responses: "completed", wire.Messages: "end_turn"}
	for _, p := range wire.Protocols {
		for _, stream := range []bool{false, true} {
			t.Run(string(p)+map[bool]string{false: "", true: "/stream"}[stream], func(t *testing.T) {
				res, err := call(t, e, "key-a", p, stream, modelOf[p], "What is your Refund Policy?", nil)
				if err != nil {
					t.Fatal(err)
				}
				if res.text != "Refunds are issued within 14 days of purchase." || res.stop != wantStop[p] {
					t.Fatalf("got text %q stop %q", res.text, res.stop)
				}
				if res.header.Get(shim.HeaderReceipt) == "" || res.header.Get(shim.HeaderOverhead) == "" {
					t.Fatalf("receipt headers missing: %v", res.header)
				}
			})
		}
	}
	if n := e.up.calls(); n != 0 {
		t.Fatalf("direct answers called the upstream %d times", n)
	}
	rs := e.receipts(t, "key-a")
	if len(rs) != 6 {
		t.Fatalf("%d receipts, want 6", len(rs))
	}
	for _, r := range rs {
		if r.Decision != shim.DecisionDirect || len(r.Fired) != 1 || r.Fired[0].ID != "PROV-REFUND" || r.Fired[0].Tier != 1 ||
			!strings.HasPrefix(r.ResponseSHA256, "sha256:") || r.RequestSHA256 == "" || r.AuditID == "" {
			t.Fatalf("bad receipt %+v", r)
		}
	}
	recs := e.audit.Records("slot-1")
	if len(recs) != 6 || recs[0].Outcome.Action != shim.AuditAction {
		t.Fatalf("audit has %d records (first action %q)", len(recs), recs[0].Outcome.Action)
	}
	var payload shim.Receipt
	if err := json.Unmarshal(recs[0].Payload, &payload); err != nil || payload.ID == "" || payload.Decision != shim.DecisionDirect {
		t.Fatalf("audit payload is not the receipt: %s", recs[0].Payload)
	}
}

// A tool-result last turn is never answered directly.
func TestDirectResponseOnlyAfterUserText(t *testing.T) {
	e := newEnv(t, nil)
	e.provision(t, "key-a", `{"id":"D","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"no"}}`)
	body := `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"refund please"},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"found"}]}]}`
	resp, _ := e.post(t, "key-a", "/v1/messages", body, nil)
	if resp.StatusCode != 200 || e.up.calls() != 1 {
		t.Fatalf("status %d, upstream calls %d: want a forward", resp.StatusCode, e.up.calls())
	}
	r := e.receipts(t, "key-a")[0]
	if r.Decision != shim.DecisionForward || len(r.Skipped) != 1 || r.Skipped[0].Reason != "last_turn_not_user_text" {
		t.Fatalf("receipt %+v", r)
	}
}

const deployBody = "Run make deploy-staging, wait for the canary, then make deploy-prod."

func expectedShim(id string, v int64) string {
	return shim.Marker(id, v) + "\n## Deploy guide [verb:deploy]\n" + deployBody + "\n</caduceus-shim>"
}

func TestSDKShimForwarded(t *testing.T) {
	e := newEnv(t, nil)
	e.context(t, "key-a", `{"ref":"verb:deploy","kind":"verb","title":"Deploy guide","body":"`+deployBody+`"}`)
	p := e.provision(t, "key-a", `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy","release"]}},"action":"shim","context_refs":["verb:deploy","noun:missing"]}`)
	for _, proto := range wire.Protocols {
		for _, stream := range []bool{false, true} {
			t.Run(string(proto)+map[bool]string{false: "", true: "/stream"}[stream], func(t *testing.T) {
				rec := &recorder{}
				res, err := call(t, e, "key-a", proto, stream, modelOf[proto], "please deploy the payments service", rec)
				if err != nil {
					t.Fatal(err)
				}
				if res.text != upstreamText || res.header.Get("X-Upstream") != "yes" {
					t.Fatalf("got %q from upstream (headers %v)", res.text, res.header)
				}
				got := e.up.last(t)
				sent := rec.last()
				want, err := wire.Inject(proto, sent, expectedShim(p.ID, p.Version))
				if err != nil {
					t.Fatal(err)
				}
				if string(got.Body) != string(want) {
					t.Fatalf("forwarded body\n%s\nwant (the SDK's bytes plus the shim)\n%s", got.Body, want)
				}
				checkPlacement(t, proto, got.Body)
				if proto == wire.Messages {
					if got.Header.Get("X-Api-Key") != "upstream-anthropic-key" || got.Header.Get("Authorization") != "" || got.Header.Get("Anthropic-Version") == "" {
						t.Fatalf("anthropic credentials not replaced: %v", got.Header)
					}
				} else if got.Header.Get("Authorization") != "Bearer upstream-openai-key" {
					t.Fatalf("openai credentials not replaced: %v", got.Header)
				}
				if got.Path != proto.Path() {
					t.Fatalf("upstream path %q, want %q", got.Path, proto.Path())
				}
			})
		}
	}
	r := e.receipts(t, "key-a")[0]
	if r.Decision != shim.DecisionForward || len(r.Shimmed) != 1 || r.Shimmed[0].Ref != "verb:deploy" ||
		r.Shimmed[0].SHA256 != "sha256:"+sha(deployBody) || len(r.MissingRefs) != 1 || r.ForwardedSHA256 == r.RequestSHA256 || r.UpstreamStatus != 200 {
		t.Fatalf("receipt %+v", r)
	}
}

func checkPlacement(t *testing.T, p wire.Protocol, body []byte) {
	t.Helper()
	var m struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Input []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"input"`
	}
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	switch p {
	case wire.ChatCompletions:
		n := len(m.Messages)
		if n < 2 || m.Messages[n-2].Role != "system" || !strings.Contains(string(m.Messages[n-2].Content), "caduceus-shim") || m.Messages[n-1].Role != "user" {
			t.Fatalf("chat: shim is not a system message right before the last user message: %s", body)
		}
	case wire.Responses:
		n := len(m.Input)
		if n < 2 || m.Input[n-2].Role != "developer" || !strings.Contains(string(m.Input[n-2].Content), "caduceus-shim") || m.Input[n-1].Role != "user" {
			t.Fatalf("responses: shim is not a developer message before the last user message: %s", body)
		}
	case wire.Messages:
		last := m.Messages[len(m.Messages)-1]
		var blocks []struct{ Type, Text string }
		if err := json.Unmarshal(last.Content, &blocks); err != nil || last.Role != "user" || blocks[0].Type != "text" || !strings.HasPrefix(blocks[0].Text, "<caduceus-shim") {
			t.Fatalf("messages: shim is not the first block of the last user message: %s", body)
		}
	}
}

// The upstream sends one event and waits until the SDK has it before
// sending the next: a buffering proxy would deadlock here.
func TestSDKStreamsEventByEvent(t *testing.T) {
	e := newEnv(t, nil)
	got := make(chan string, 16)
	e.up.respond = func(w http.ResponseWriter, r *http.Request, body []byte) {
		d := wire.Direct{ID: "x", Model: "m", Text: "one two three four five six seven eight nine", Created: 1}
		p := wire.ChatCompletions
		if strings.HasSuffix(r.URL.Path, "/messages") {
			p = wire.Messages
		}
		w.Header().Set("Content-Type", "text/event-stream")
		evs := wire.DirectEvents(p, d)
		for i, ev := range evs {
			_, _ = w.Write(ev)
			w.(http.Flusher).Flush()
			if i == len(evs)-1 || strings.Contains(string(ev), "event: ping") || strings.Contains(string(ev), "[DONE]") {
				continue // events the SDKs do not surface
			}
			select {
			case <-got:
			case <-time.After(5 * time.Second):
				return // the proxy buffered: the client never saw this event
			}
		}
	}
	t.Run("chat", func(t *testing.T) {
		oc := openaiClient(e, "key-a", nil)
		s := oc.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		n := 0
		start := time.Now()
		for s.Next() {
			n++
			got <- "ok"
		}
		if s.Err() != nil || n < 4 || time.Since(start) > 4*time.Second {
			t.Fatalf("%d events in %v, err %v", n, time.Since(start), s.Err())
		}
	})
	t.Run("messages", func(t *testing.T) {
		ac := anthropicClient(e, "key-a", nil)
		s := ac.Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{
			Model: "claude-x", MaxTokens: 5, Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		n := 0
		start := time.Now()
		msg := anthropic.Message{}
		for s.Next() {
			_ = msg.Accumulate(s.Current())
			n++
			got <- "ok"
		}
		if s.Err() != nil || n < 6 || time.Since(start) > 4*time.Second || msg.Content[0].Text != "one two three four five six seven eight nine" {
			t.Fatalf("%d events in %v, err %v, text %+v", n, time.Since(start), s.Err(), msg.Content)
		}
	})
}

func TestSDKContributorRefused(t *testing.T) {
	e := newEnv(t, nil)
	for _, p := range wire.Protocols {
		for _, stream := range []bool{false, true} {
			_, err := call(t, e, "key-a", p, stream, "acme-CONTRIBUTOR-7b", "hello", nil)
			var oe *openai.Error
			var ae *anthropic.Error
			switch {
			case p != wire.Messages && errors.As(err, &oe):
				if oe.StatusCode != 403 || oe.Code != shim.CodeContributorRefused || oe.Type != "permission_error" {
					t.Fatalf("%s: %+v", p, oe)
				}
			case p == wire.Messages && errors.As(err, &ae):
				if ae.StatusCode != 403 || !strings.Contains(ae.Error(), "permission_error") || !strings.Contains(ae.Error(), "contributor") {
					t.Fatalf("%s: %v", p, ae)
				}
			default:
				t.Fatalf("%s stream=%v: got %v, want an API error in the protocol's envelope", p, stream, err)
			}
		}
	}
	if e.up.calls() != 0 {
		t.Fatal("a contributor model reached the upstream")
	}
	rs := e.receipts(t, "key-a")
	if len(rs) != 6 || rs[0].Decision != shim.DecisionRefused || rs[0].Refusal.Code != shim.CodeContributorRefused {
		t.Fatalf("receipts %+v", rs)
	}
}

// TestEdgeSecret: with an edge secret, the server in front of the shim
// refuses an LLM request without it (the SDK sees a 403 in its envelope,
// code edge_auth_required) before the shim or the upstream sees it; with
// it, the request is answered, and the secret never goes upstream.
func TestEdgeSecret(t *testing.T) {
	db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "edge.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keys := auth.NewService(db.Keys(), nil, 0)
	key, _, err := keys.Create(t.Context(), auth.Spec{Tenant: "slot-1", Scopes: []contract.Scope{contract.ScopeRoute}})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{up: newUpstream(t)}
	svc := shim.New(shim.Config{Store: shimsql.New(db), Audit: db.Audit(), Upstreams: map[string]shim.Upstream{"openai": {BaseURL: e.up.URL}, "anthropic": {BaseURL: e.up.URL + "/v1"}}})
	srv := server.New(server.Config{Auth: keys, Audit: db.Audit(), Records: db.Audit(), Store: db,
		Routes: shimgate.New(shimgate.Config{Service: svc}).Routes(), EdgeSecret: "s3cret"})
	e.srv = httptest.NewServer(srv)
	defer e.srv.Close()
	_, err = call(t, e, key, wire.ChatCompletions, false, "gpt-4o", "hi", nil)
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 403 || oe.Code != server.CodeEdgeAuth {
		t.Fatalf("without x-edge-auth: %v", err)
	}
	resp, _ := e.post(t, key, "/v1/messages", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}]}`, map[string]string{"x-edge-auth": "wrong"})
	if resp.StatusCode != 403 {
		t.Fatalf("wrong secret: status %d", resp.StatusCode)
	}
	if e.up.calls() != 0 {
		t.Fatal("refused requests reached the upstream")
	}
	c := openaiClient(e, key, nil, option.WithHeader("x-edge-auth", "s3cret"))
	out, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if err != nil || out.Choices[0].Message.Content != upstreamText {
		t.Fatalf("with the secret: %v", err)
	}
	if h := e.up.last(t).Header; h.Get("X-Edge-Auth") != "" {
		t.Fatal("the edge secret was forwarded upstream")
	}
}

func TestBetaQueryPassedUpstream(t *testing.T) {
	e := newEnv(t, nil)
	resp, _ := e.post(t, "key-a", "/v1/messages?beta=true", `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}`,
		map[string]string{"anthropic-beta": "tools-2024-04-04"})
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := e.up.last(t)
	if got.Query != "beta=true" || got.Path != "/v1/messages" || got.Header.Get("Anthropic-Beta") != "tools-2024-04-04" {
		t.Fatalf("upstream got %s?%s beta header %q", got.Path, got.Query, got.Header.Get("Anthropic-Beta"))
	}
}

func TestTenantIsolationProxy(t *testing.T) {
	e := newEnv(t, nil)
	e.provision(t, "key-a", `{"id":"SAME","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"tenant A answer"}}`)
	res, err := call(t, e, "key-b", wire.ChatCompletions, false, "gpt-4o", "refund please", nil)
	if err != nil || res.text != upstreamText {
		t.Fatalf("tenant B got %q, %v: A's provision fired for B", res.text, err)
	}
	res, err = call(t, e, "key-a", wire.ChatCompletions, false, "gpt-4o", "refund please", nil)
	if err != nil || res.text != "tenant A answer" {
		t.Fatalf("tenant A got %q, %v", res.text, err)
	}
	// B may define its own provision with the same id; each sees its own
	e.provision(t, "key-b", `{"id":"SAME","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"tenant B answer"}}`)
	if res, _ := call(t, e, "key-b", wire.Messages, false, "claude-x", "refund please", nil); res.text != "tenant B answer" {
		t.Fatalf("tenant B got %q", res.text)
	}
	if res, _ := call(t, e, "key-a", wire.Messages, false, "claude-x", "refund please", nil); res.text != "tenant A answer" {
		t.Fatalf("tenant A got %q after B's write", res.text)
	}
	ra, rb := e.receipts(t, "key-a"), e.receipts(t, "key-b")
	if len(ra) != 2 || len(rb) != 2 {
		t.Fatalf("receipts: A %d, B %d; want 2 each", len(ra), len(rb))
	}
	for _, r := range rb {
		if r.Tenant != "slot-2" {
			t.Fatalf("B sees a receipt of %s", r.Tenant)
		}
	}
	if len(e.audit.Records("slot-2")) != 2 {
		t.Fatal("B's audit chain does not hold exactly B's requests")
	}
}

func TestOncePerConversation(t *testing.T) {
	e := newEnv(t, nil)
	e.context(t, "key-a", `{"ref":"verb:deploy","kind":"verb","title":"Deploy guide","body":"`+deployBody+`"}`)
	e.provision(t, "key-a", `{"id":"ONCE","once_per_conversation":true,"triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	c := openaiClient(e, "key-a", nil)
	history := []openai.ChatCompletionMessageParamUnion{openai.UserMessage("let us deploy the api")}
	var convs []string
	for turn := 1; turn <= 3; turn++ {
		var hr *http.Response
		out, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: history}, option.WithResponseInto(&hr))
		if err != nil {
			t.Fatal(err)
		}
		convs = append(convs, hr.Header.Get(shim.HeaderConversation))
		shimmed := strings.Contains(string(e.up.last(t).Body), "caduceus-shim")
		if shimmed != (turn == 1) {
			t.Fatalf("turn %d: shimmed=%v", turn, shimmed)
		}
		history = append(history, openai.AssistantMessage(out.Choices[0].Message.Content), openai.UserMessage("and deploy again, turn "+string(rune('0'+turn))))
	}
	if convs[0] == "" || convs[0] != convs[1] || convs[1] != convs[2] {
		t.Fatalf("derived conversation ids differ across turns: %v", convs)
	}
	rs := e.receipts(t, "key-a")
	if len(rs) != 3 || rs[0].Skipped[0].Reason != "once_per_conversation:ledger" || len(rs[2].Shimmed) != 1 {
		t.Fatalf("receipts %+v", rs)
	}
	// a new conversation (explicit header) gets it again
	resp, _ := e.post(t, "key-a", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"deploy"}]}`,
		map[string]string{shim.HeaderConversation: "conv-explicit-1"})
	if resp.StatusCode != 200 || !strings.Contains(string(e.up.last(t).Body), "caduceus-shim") {
		t.Fatal("a new conversation was not shimmed")
	}
	// a request already carrying the marker is not shimmed twice
	body := `{"model":"gpt-4o","messages":[{"role":"system","content":"` + strings.ReplaceAll(shim.Marker("ONCE", 1), `"`, `\"`) + `"},{"role":"user","content":"deploy"}]}`
	e.post(t, "key-a", "/v1/chat/completions", body, map[string]string{shim.HeaderConversation: "conv-explicit-2"})
	if n := strings.Count(string(e.up.last(t).Body), "caduceus-shim provision"); n != 1 {
		t.Fatalf("marker scan: %d markers forwarded, want the client's 1", n)
	}
}

func TestOfflineMakesNoProviderCall(t *testing.T) {
	provider := newUpstream(t) // counts embeddings and classifier calls
	provider.respond = func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			_, _ = w.Write([]byte(`{"data":[{"index":0,"embedding":[1,0]}]}`))
			return
		}
		_, _ = w.Write([]byte(`{"choices":[{"message":{"content":"{\"apply\":true,\"confidence\":0.99}"}}]}`))
	}
	e := newEnv(t, func(c *shim.Config) {
		c.Offline = true
		c.Embedder = &shim.OpenAIEmbedder{BaseURL: provider.URL, Model: "emb"}
		c.Classifier = &shim.ChatClassifier{BaseURL: provider.URL}
	})
	e.provision(t, "key-a", `{"id":"SEM","triggers":{"semantic":{"examples":["ship this to prod"],"threshold":0.5}},"action":"respond_directly","response":{"text":"semantic answer"}}`)
	e.provision(t, "key-a", `{"id":"MM","priority":5,"triggers":{"micromodel":{"model":"tiny","question":"is this about cats?"}},"action":"respond_directly","response":{"text":"classifier answer"}}`)
	res, err := call(t, e, "key-a", wire.Messages, false, "claude-x", "push the release out to production", nil)
	if err != nil || res.text != "semantic answer" {
		t.Fatalf("offline semantic (local embedder) answer: %q %v", res.text, err)
	}
	resp, body := e.post(t, "key-a", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"tell me about cats"}]}`, nil)
	if resp.StatusCode != 503 || !strings.Contains(string(body), shim.CodeOffline) {
		t.Fatalf("offline forward: %d %s", resp.StatusCode, body)
	}
	if provider.calls() != 0 || e.up.calls() != 0 {
		t.Fatalf("offline mode called providers: trigger provider %d, upstream %d", provider.calls(), e.up.calls())
	}
	r := e.receipts(t, "key-a")[0]
	found := false
	for _, s := range r.Skipped {
		found = found || s.ID == "MM" && s.Reason == "micromodel_offline"
	}
	if !found {
		t.Fatalf("the classifier skip is not recorded: %+v", r.Skipped)
	}

	// dry-run and preview never call providers either, even online
	online := newEnv(t, func(c *shim.Config) {
		c.Embedder = &shim.OpenAIEmbedder{BaseURL: provider.URL, Model: "emb"}
		c.Classifier = &shim.ChatClassifier{BaseURL: provider.URL}
	})
	online.provision(t, "key-a", `{"id":"MM","triggers":{"micromodel":{"model":"tiny","question":"cats?"}},"action":"respond_directly","response":{"text":"x"}}`)
	online.provision(t, "key-a", `{"id":"SEM","triggers":{"semantic":{"examples":["cats"]}},"action":"respond_directly","response":{"text":"y"}}`)
	for _, p := range wire.Protocols {
		body := map[wire.Protocol]string{wire.ChatCompletions: `{"model":"gpt-4o","messages":[{"role":"user","content":"cats"}]}`,
			wire.Responses: `{"model":"gpt-5","input":"cats"}`, wire.Messages: `{"model":"claude-x","messages":[{"role":"user","content":"cats"}]}`}[p]
		if _, err := online.svc.DryRun(t.Context(), callers["key-a"], p, []byte(body)); err != nil {
			t.Fatal(err)
		}
		if _, err := online.svc.Preview(t.Context(), p, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if provider.calls() != 0 || online.up.calls() != 0 {
		t.Fatalf("dry-run/preview called providers: %d, %d", provider.calls(), online.up.calls())
	}
}

func TestUpstreamNotConfiguredAndUnreachable(t *testing.T) {
	e := newEnv(t, func(c *shim.Config) {
		c.Upstreams = map[string]shim.Upstream{"openai": {BaseURL: "http://127.0.0.1:1"}}
	})
	resp, body := e.post(t, "key-a", "/v1/messages", `{"model":"claude-x","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 503 || !strings.Contains(string(body), "no anthropic upstream") {
		t.Fatalf("no anthropic upstream: %d %s", resp.StatusCode, body)
	}
	resp, body = e.post(t, "key-a", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, nil)
	if resp.StatusCode != 502 || !strings.Contains(string(body), shim.CodeUpstreamFailed) {
		t.Fatalf("unreachable upstream: %d %s", resp.StatusCode, body)
	}
	if rs := e.receipts(t, "key-a"); rs[0].Decision != shim.DecisionFailed {
		t.Fatalf("receipt %+v", rs[0])
	}
}
