package shim_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
)

// key-granted holds grants for the models the SDK tests ask for.
func init() {
	callers["key-granted"] = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_9999999999999999", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kg", Scopes: []contract.Scope{contract.ScopeRoute}, Harness: "claude-code",
		Grants: []string{"anthropic/claude-sonnet-4-5", "openai/gpt-4o", "openai/gpt-5"}}
}

// newGatewayEnv is newEnv whose forwarding goes through a gateway over a
// SQLite ledger: one route per provider to the fake upstream, one plan;
// tweaks change the shim's configuration further.
func newGatewayEnv(t *testing.T, budgets gwconf.Budgets, tweaks ...func(*shim.Config)) (*env, *store.DB) {
	return newGatewayEnvWith(t, budgets, nil, tweaks...)
}

// newGatewayEnvWith is newGatewayEnv whose gateway configuration gw
// changes further (nil: none).
func newGatewayEnvWith(t *testing.T, budgets gwconf.Budgets, gw func(*gateway.Config), tweaks ...func(*shim.Config)) (*env, *store.DB) {
	db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return newGatewayEnvOn(t, db, budgets, gw, tweaks...), db
}

// newGatewayEnvOn is newGatewayEnvWith over the store db.
func newGatewayEnvOn(t *testing.T, db *store.DB, budgets gwconf.Budgets, gw func(*gateway.Config), tweaks ...func(*shim.Config)) *env {
	price := gwconf.Price{Input: 2_000_000, CachedInput: 500_000, Output: 8_000_000, MaxOutputTokens: 4096}
	e := newEnv(t, func(c *shim.Config) {
		conf := gwconf.Config{
			Routes: map[string]gwconf.Route{
				"openai":    {Kind: gwconf.KindOpenAI, BaseURL: "http://placeholder.invalid", Models: []string{"gpt-4o", "gpt-5"}},
				"anthropic": {Kind: gwconf.KindAnthropic, BaseURL: "http://placeholder.invalid", Models: []string{"claude-sonnet-4-5"}},
			},
			Plans: map[string]gwconf.Plan{"main": {Failover: gwconf.FailoverDefinite, Models: map[string][]gwconf.Step{
				"gpt-4o": {{Route: "openai"}}, "gpt-5": {{Route: "openai"}}, "claude-sonnet-4-5": {{Route: "anthropic"}}}}},
			Prices:  map[string]gwconf.Price{"openai/gpt-4o": price, "openai/gpt-5": price, "anthropic/claude-sonnet-4-5": price},
			Budgets: budgets,
		}
		// The fake upstream exists once newEnv made it: point the routes at it.
		for name, r := range conf.Routes {
			r.BaseURL = c.Upstreams["openai"].BaseURL
			conf.Routes[name] = r
		}
		if err := conf.Validate(); err != nil {
			t.Fatal(err)
		}
		gc := gateway.Config{Upstream: conf, Ledger: ledger.Of(db), Holds: ledger.Of(db),
			Keys: map[string]string{"openai": "sk-route-openai", "anthropic": "sk-route-anthropic"}}
		if gw != nil {
			gw(&gc)
		}
		c.Gateway = gateway.New(gc)
		for _, tw := range tweaks {
			tw(c)
		}
	})
	return e
}

// TestGatewayThroughTheSDKs: every protocol, streaming and not, through the
// gateway with the official SDKs — answered and accounted on the receipt
// for a granted key; refused before any upstream call, in the protocol's
// envelope and not to be retried, for a key without the grant.
func TestGatewayThroughTheSDKs(t *testing.T) {
	e, db := newGatewayEnv(t, gwconf.Budgets{})
	for _, p := range wire.Protocols {
		for _, stream := range []bool{false, true} {
			t.Run(string(p)+map[bool]string{false: "", true: "/stream"}[stream], func(t *testing.T) {
				before := e.up.calls()
				res, err := call(t, e, "key-granted", p, stream, modelOf[p], "hello gateway", nil)
				if err != nil || res.text != upstreamText {
					t.Fatalf("granted: %v %q", err, res.text)
				}
				if e.up.calls() != before+1 {
					t.Fatalf("upstream calls %d -> %d", before, e.up.calls())
				}
				last := e.up.last(t)
				if got := last.Header.Get("Authorization") + last.Header.Get("X-Api-Key"); !strings.HasPrefix(strings.TrimPrefix(got, "Bearer "), "sk-route-") {
					t.Errorf("upstream credential %q, want the route's key", got)
				}
				rc := e.receipts(t, "key-granted")[0]
				if rc.Spend == nil || len(rc.Spend.Attempts) != 1 || rc.Spend.Attempts[0].Outcome != "answered" ||
					rc.Spend.Reserved <= 0 || rc.Spend.Settled > rc.Spend.Reserved || rc.Upstream != map[bool]string{true: "anthropic", false: "openai"}[p == wire.Messages] {
					t.Fatalf("receipt spend %+v upstream %q", rc.Spend, rc.Upstream)
				}

				_, err = call(t, e, "key-route", p, stream, modelOf[p], "hello gateway", nil)
				status, retry, kind := sdkError(err)
				if status != 403 || retry != "false" || (p == wire.Messages && kind != "permission_error") || e.up.calls() != before+1 {
					t.Fatalf("ungranted: status %d x-should-retry %q type %q (%v)", status, retry, kind, err)
				}
			})
		}
	}
	rows, err := ledger.Of(db).Spend(t.Context(), "slot-1", "kg", time.Time{})
	if err != nil || len(rows) != 3 {
		t.Fatalf("spend rows %+v, %v", rows, err)
	}
}

// TestGatewayBudgetRefusal: a request that cannot reserve within the key's
// budget is 429 budget_exceeded in each envelope, never retried, never sent.
func TestGatewayBudgetRefusal(t *testing.T) {
	e, _ := newGatewayEnv(t, gwconf.Budgets{Key: gwconf.Limit{Day: 1000}})
	for _, p := range wire.Protocols {
		_, err := call(t, e, "key-granted", p, false, modelOf[p], "hello gateway", nil)
		status, retry, kind := sdkError(err)
		if status != 429 || retry != "false" || (p == wire.Messages && kind != "rate_limit_error") {
			t.Fatalf("%s over budget: status %d x-should-retry %q type %q (%v)", p, status, retry, kind, err)
		}
		var oe *openai.Error
		if named := errors.As(err, &oe) && oe.Code == "budget_exceeded" || strings.Contains(err.Error(), `"message":"budget_exceeded: `); !named {
			t.Errorf("%s: %v does not name budget_exceeded", p, err)
		}
	}
	if e.up.calls() != 0 {
		t.Fatalf("the upstream was called %d times past the budget", e.up.calls())
	}
}

// sdkError reads an SDK error: its status, x-should-retry header and (for
// Anthropic) the envelope's error type.
func sdkError(err error) (status int, retry, kind string) {
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.StatusCode, oe.Response.Header.Get("X-Should-Retry"), oe.Type
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		var env struct {
			Error struct {
				Type string `json:"type"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(ae.RawJSON()), &env)
		return ae.StatusCode, ae.Response.Header.Get("X-Should-Retry"), env.Error.Type
	}
	return 0, "", ""
}

// TestKeyIsolation: under shim.isolation key, one key's provisions shape and
// are seen by that key only, and its receipts are its own; under tenant
// isolation every key of the tenant shares them.
func TestKeyIsolation(t *testing.T) {
	const refund = `{"id":"PROV-REFUND","triggers":{"keyword":{"any":["refund policy"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days.","stop_reason":"end_turn"}}`
	for _, iso := range []shim.Isolation{shim.IsolationKey, shim.IsolationTenant} {
		t.Run(string(iso), func(t *testing.T) {
			e := newEnv(t, func(c *shim.Config) { c.Isolation = iso })
			e.provision(t, "key-a", refund)
			if res, err := call(t, e, "key-a", wire.ChatCompletions, false, "gpt-4o", "what is the refund policy?", nil); err != nil || res.text != "Refunds take 14 days." {
				t.Fatalf("the writing key: %v %q", err, res.text)
			}
			res, err := call(t, e, "key-route", wire.ChatCompletions, false, "gpt-4o", "what is the refund policy?", nil)
			if err != nil {
				t.Fatal(err)
			}
			provs, err := e.svc.ListProvisions(t.Context(), callers["key-route"])
			if err != nil {
				t.Fatal(err)
			}
			seen := false
			for _, p := range provs {
				seen = seen || p.ID == "PROV-REFUND"
			}
			others := 0
			for _, rc := range e.receipts(t, "key-route") {
				if rc.KeyID != "kr" {
					others++
				}
			}
			if iso == shim.IsolationKey {
				if res.text != upstreamText || seen || others != 0 {
					t.Fatalf("key isolation: another key got %q, sees the provision %v, sees %d receipts of another key", res.text, seen, others)
				}
			} else if res.text != "Refunds take 14 days." || !seen || others == 0 {
				t.Fatalf("tenant isolation: another key got %q, sees the provision %v, sees %d receipts of another key", res.text, seen, others)
			}
		})
	}
}

// TestDirectStreamHonoursIncludeUsage: a streamed direct chat answer ends
// with the usage chunk a client asked for with stream_options.include_usage,
// and has none when it did not ask.
func TestDirectStreamHonoursIncludeUsage(t *testing.T) {
	e := newEnv(t, nil)
	e.provision(t, "key-a", `{"id":"PROV-REFUND","triggers":{"keyword":{"any":["refund policy"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days.","stop_reason":"end_turn"}}`)
	for _, ask := range []bool{true, false} {
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("refund policy?")}}
		if ask {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		c := openaiClient(e, "key-a", nil)
		s := c.Chat.Completions.NewStreaming(t.Context(), params)
		usage, text := 0, ""
		for s.Next() {
			ch := s.Current()
			if ch.JSON.Usage.Valid() {
				usage++
				if len(ch.Choices) != 0 {
					t.Errorf("the usage chunk has choices: %s", ch.RawJSON())
				}
			}
			for _, c := range ch.Choices {
				text += c.Delta.Content
			}
		}
		if s.Err() != nil || text != "Refunds take 14 days." {
			t.Fatalf("stream: %v %q", s.Err(), text)
		}
		if want := map[bool]int{true: 1, false: 0}[ask]; usage != want {
			t.Errorf("include_usage %v: %d usage chunks, want %d", ask, usage, want)
		}
	}
}

// TestDirectAnswerFitsResponseFormat: a request asking for structured
// output gets a direct answer only when the text is valid for it; otherwise
// the provision is skipped and the request goes upstream.
func TestDirectAnswerFitsResponseFormat(t *testing.T) {
	e := newEnv(t, nil)
	e.provision(t, "key-a", `{"id":"PROV-PLAIN","priority":20,"triggers":{"keyword":{"any":["refund policy"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)
	e.provision(t, "key-a", `{"id":"PROV-JSON","priority":10,"triggers":{"keyword":{"any":["refund policy"]}},"action":"respond_directly","response":{"text":"{\"days\": 14}"}}`)
	ask := func(format openai.ChatCompletionNewParamsResponseFormatUnion) string {
		t.Helper()
		c := openaiClient(e, "key-a", nil)
		resp, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("refund policy?")}, ResponseFormat: format})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message.Content
	}
	if got := ask(openai.ChatCompletionNewParamsResponseFormatUnion{}); got != "Refunds take 14 days." {
		t.Fatalf("free text: %q", got)
	}
	obj := shared.ResponseFormatJSONObjectParam{}
	if got := ask(openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &obj}); got != `{"days": 14}` {
		t.Fatalf("json_object: %q", got)
	}
	schema := func(s map[string]any) openai.ChatCompletionNewParamsResponseFormatUnion {
		return openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "answer", Schema: s}}}
	}
	if got := ask(schema(map[string]any{"type": "object", "required": []string{"days"}, "properties": map[string]any{"days": map[string]any{"type": "integer"}}})); got != `{"days": 14}` {
		t.Fatalf("json_schema the text fits: %q", got)
	}
	if got := ask(schema(map[string]any{"type": "object", "required": []string{"weeks"}})); got != upstreamText {
		t.Fatalf("json_schema no text fits: %q, want the upstream's answer", got)
	}
	var skipped []string
	for _, s := range e.receipts(t, "key-a")[0].Skipped {
		skipped = append(skipped, s.ID+":"+s.Reason)
	}
	if strings.Join(skipped, ",") != "PROV-PLAIN:response_format_mismatch,PROV-JSON:response_format_mismatch" {
		t.Errorf("skipped: %v", skipped)
	}
}

// TestMessagesNeedMaxTokens: like the Messages API, a request without
// max_tokens is refused, in Anthropic's envelope, not to be retried.
func TestMessagesNeedMaxTokens(t *testing.T) {
	e := newEnv(t, nil)
	resp, body := e.post(t, "key-a", "/v1/messages", `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, nil)
	var env struct {
		Type  string `json:"type"`
		Error struct {
			Type, Message string
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || resp.StatusCode != 400 || env.Error.Type != "invalid_request_error" ||
		env.Error.Message != "invalid_request: max_tokens: Field required" || resp.Header.Get("X-Should-Retry") != "false" {
		t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-Should-Retry"), body)
	}
	if e.up.calls() != 0 {
		t.Fatal("forwarded without max_tokens")
	}
}

// TestOpenAIOrganizationAndProjectPassUpstream: the SDK's organization and
// project headers reach the provider.
func TestOpenAIOrganizationAndProjectPassUpstream(t *testing.T) {
	e := newEnv(t, nil)
	c := openaiClient(e, "key-a", nil, option.WithOrganization("org-7"), option.WithProject("proj-9"))
	if _, err := c.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}); err != nil {
		t.Fatal(err)
	}
	if h := e.up.last(t).Header; h.Get("OpenAI-Organization") != "org-7" || h.Get("OpenAI-Project") != "proj-9" {
		t.Fatalf("upstream headers %v", h)
	}
}

// TestStreamHeadersBeforeTheFirstEvent: a forwarded stream's status and
// headers reach the client while the provider is still thinking.
func TestStreamHeadersBeforeTheFirstEvent(t *testing.T) {
	e := newEnv(t, nil)
	release := make(chan struct{})
	e.up.respond = func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		<-release
		defaultRespond(w, r, body)
	}
	req, _ := http.NewRequestWithContext(t.Context(), "POST", e.srv.URL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hello"}]}`))
	req.Header.Set("Authorization", "Bearer key-a")
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	select {
	case resp := <-got:
		close(release)
		if resp == nil || resp.StatusCode != 200 || resp.Header.Get(shim.HeaderReceipt) == "" {
			t.Fatalf("headers: %+v", resp)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "[DONE]") {
			t.Fatalf("stream %s", b)
		}
	case <-time.After(10 * time.Second):
		close(release)
		t.Fatal("no headers while the provider had sent none of its events")
	}
}

// TestGatewayUncertainFailoverWithTheSDK: an Anthropic stream that breaks
// before its first event moves to the next route when the plan says
// uncertain and the caller holds the next model's grant; the SDK sees one
// clean stream. The broken attempt may have run: it settles at its
// reservation. A 429 with Retry-After holds the first route's model, so
// the next request does not try it.
func TestGatewayUncertainFailoverWithTheSDK(t *testing.T) {
	var flakyCalls atomic.Int32
	mode := atomic.Value{}
	mode.Store("break")
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		flakyCalls.Add(1)
		io.Copy(io.Discard, r.Body)
		if mode.Load() == "429" {
			w.Header().Set("Retry-After", "30")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(429)
			io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // the connection drops before any event
	}))
	defer flaky.Close()
	db, err := store.Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "gw.db"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	callers["key-both"] = contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_8888888888888888", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID: "kboth", Scopes: []contract.Scope{contract.ScopeRoute}, Grants: []string{"anthropic/claude-sonnet-4-5", "bedrock/claude-sonnet-4-5"}}
	price := gwconf.Price{Input: 3_000_000, Output: 15_000_000, MaxOutputTokens: 4096}
	e := newEnv(t, func(c *shim.Config) {
		conf := gwconf.Config{
			Routes: map[string]gwconf.Route{
				"flaky":  {Kind: gwconf.KindAnthropic, BaseURL: flaky.URL, Models: []string{"claude-sonnet-4-5"}},
				"steady": {Kind: gwconf.KindAnthropic, Provider: "bedrock", BaseURL: c.Upstreams["anthropic"].BaseURL, Models: []string{"claude-sonnet-4-5"}},
			},
			Plans: map[string]gwconf.Plan{"main": {Failover: gwconf.FailoverUncertain, Models: map[string][]gwconf.Step{
				"claude-sonnet-4-5": {{Route: "flaky"}, {Route: "steady"}}}}},
			Prices: map[string]gwconf.Price{"anthropic/claude-sonnet-4-5": price, "bedrock/claude-sonnet-4-5": price},
		}
		if err := conf.Validate(); err != nil {
			t.Fatal(err)
		}
		c.Gateway = gateway.New(gateway.Config{Upstream: conf, Ledger: ledger.Of(db), Holds: ledger.Of(db)})
	})
	res, err := call(t, e, "key-both", wire.Messages, true, "claude-sonnet-4-5", "hello", nil)
	if err != nil || res.text != upstreamText || flakyCalls.Load() != 1 {
		t.Fatalf("after a broken stream: %v %q (flaky calls %d)", err, res.text, flakyCalls.Load())
	}
	rc := e.receipts(t, "key-both")[0]
	if len(rc.Spend.Attempts) != 2 || rc.Spend.Attempts[0].Outcome != "uncertain" || rc.Spend.Attempts[0].Settled != rc.Spend.Attempts[0].Reserved || rc.Spend.Attempts[1].Outcome != "answered" {
		t.Fatalf("attempts %+v", rc.Spend.Attempts)
	}
	// Without the next model's grant nothing can take over: the stream's
	// headers go out at once and the broken stream reaches the SDK as it
	// came (an error); the next route is not called.
	steady, before := e.up.calls(), flakyCalls.Load()
	ac := anthropicClient(e, "key-granted", nil)
	st := ac.Messages.NewStreaming(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}})
	events := 0
	for st.Next() {
		events++
	}
	if events != 0 || st.Err() == nil || flakyCalls.Load() != before+1 || e.up.calls() != steady {
		t.Fatalf("without the grant: %d events, %v; next route called %d times", events, st.Err(), e.up.calls()-steady)
	}
	// A 429 holds anthropic/claude-sonnet-4-5: the next request skips it.
	mode.Store("429")
	if res, err = call(t, e, "key-both", wire.Messages, false, "claude-sonnet-4-5", "hello", nil); err != nil || res.text != upstreamText {
		t.Fatalf("after a 429: %v", err)
	}
	calls := flakyCalls.Load()
	if res, err = call(t, e, "key-both", wire.Messages, false, "claude-sonnet-4-5", "hello", nil); err != nil || res.text != upstreamText || flakyCalls.Load() != calls {
		t.Fatalf("while held: %v, flaky called %d more", err, flakyCalls.Load()-calls)
	}
	if until, _ := ledger.Of(db).HeldUntil(t.Context(), "anthropic/claude-sonnet-4-5"); time.Until(until) < 20*time.Second {
		t.Fatalf("held until %v, want about 30s from now", until)
	}
}
