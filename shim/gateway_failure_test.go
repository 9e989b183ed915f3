package shim_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/ledger"
	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// protocolOf is the protocol of a request to the fake provider.
func protocolOf(r *http.Request) wire.Protocol {
	switch {
	case strings.HasSuffix(r.URL.Path, "/responses"):
		return wire.Responses
	case strings.HasSuffix(r.URL.Path, "/messages"):
		return wire.Messages
	}
	return wire.ChatCompletions
}

// breakOff answers as the provider does, but its connection drops in the
// middle: a stream after its first three events, a JSON answer after
// half of its bytes (the provider's server panics with
// http.ErrAbortHandler).
func breakOff(w http.ResponseWriter, r *http.Request, body []byte) {
	var in struct {
		Model  string `json:"model"`
		Stream bool   `json:"stream"`
	}
	_ = json.Unmarshal(body, &in)
	p := protocolOf(r)
	d := wire.Direct{ID: "up1", Model: in.Model, Text: upstreamText, Created: 1}
	if !in.Stream {
		b := wire.DirectJSON(p, d)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		w.Write(b[:len(b)/2])
	} else {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		for _, ev := range wire.DirectEvents(p, d)[:3] {
			w.Write(ev)
		}
	}
	w.(http.Flusher).Flush()
	panic(http.ErrAbortHandler)
}

// errorCode is the code an SDK error names: OpenAI's code field, or the
// code leading an Anthropic error's message.
func errorCode(err error) string {
	var oe *openai.Error
	if errors.As(err, &oe) {
		return oe.Code
	}
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		var env struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(ae.RawJSON()), &env)
		code, _, _ := strings.Cut(env.Error.Message, ":")
		return code
	}
	return ""
}

// readPattern is one way an application reads an answer with an official
// Go SDK; it returns the text read and the SDK's error.
type readPattern struct {
	name string
	p    wire.Protocol
	read func(t *testing.T, e *env) (string, error)
}

var readPatterns = []readPattern{
	{"chat/iterator", wire.ChatCompletions, func(t *testing.T, e *env) (string, error) {
		c := openaiClient(e, "key-granted", nil)
		s := c.Chat.Completions.NewStreaming(t.Context(), chatParams())
		text := ""
		for s.Next() {
			for _, c := range s.Current().Choices {
				text += c.Delta.Content
			}
		}
		return text, s.Err()
	}},
	{"chat/accumulator", wire.ChatCompletions, func(t *testing.T, e *env) (string, error) {
		c := openaiClient(e, "key-granted", nil)
		s := c.Chat.Completions.NewStreaming(t.Context(), chatParams())
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if len(acc.Choices) == 0 {
			return "", s.Err()
		}
		return acc.Choices[0].Message.Content, s.Err()
	}},
	{"chat/whole", wire.ChatCompletions, func(t *testing.T, e *env) (string, error) {
		c := openaiClient(e, "key-granted", nil)
		cc, err := c.Chat.Completions.New(t.Context(), chatParams())
		if err != nil {
			return "", err
		}
		return cc.Choices[0].Message.Content, nil
	}},
	{"responses/iterator", wire.Responses, func(t *testing.T, e *env) (string, error) {
		c := openaiClient(e, "key-granted", nil)
		s := c.Responses.NewStreaming(t.Context(), responsesParams())
		text := ""
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.output_text.delta" {
				text += ev.Delta
			}
		}
		return text, s.Err()
	}},
	{"responses/whole", wire.Responses, func(t *testing.T, e *env) (string, error) {
		c := openaiClient(e, "key-granted", nil)
		r, err := c.Responses.New(t.Context(), responsesParams())
		if err != nil {
			return "", err
		}
		return r.OutputText(), nil
	}},
	{"messages/iterator", wire.Messages, func(t *testing.T, e *env) (string, error) {
		c := anthropicClient(e, "key-granted", nil)
		s := c.Messages.NewStreaming(t.Context(), messageParams())
		text := ""
		for s.Next() {
			if d := s.Current(); d.Type == "content_block_delta" {
				text += d.Delta.Text
			}
		}
		return text, s.Err()
	}},
	{"messages/accumulator", wire.Messages, func(t *testing.T, e *env) (string, error) {
		c := anthropicClient(e, "key-granted", nil)
		s := c.Messages.NewStreaming(t.Context(), messageParams())
		msg := anthropic.Message{}
		for s.Next() {
			if err := msg.Accumulate(s.Current()); err != nil {
				return "", err
			}
		}
		if len(msg.Content) == 0 {
			return "", s.Err()
		}
		return msg.Content[0].Text, s.Err()
	}},
	{"messages/whole", wire.Messages, func(t *testing.T, e *env) (string, error) {
		c := anthropicClient(e, "key-granted", nil)
		m, err := c.Messages.New(t.Context(), messageParams())
		if err != nil {
			return "", err
		}
		return m.Content[0].Text, nil
	}},
}

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}
}

func responsesParams() responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-5", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")}}
}

func messageParams() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}}
}

// TestBrokenUpstreamBreaksTheClient: when the
// provider's connection drops mid-answer, every SDK read pattern raises,
// as it does against the provider directly — never the truncated text as a
// finished answer. A stream is cut off for the client (no terminating
// chunk); the receipt says broken and settles at an estimate of what was
// generated (no usage came). A whole answer cut off is a 502 the SDK must
// not retry, also settled at the reservation: the provider may have run
// it. On SQLite and Postgres.
func TestBrokenUpstreamBreaksTheClient(t *testing.T) {
	storetest.Each(t, testBrokenUpstreamBreaksTheClient)
}

func testBrokenUpstreamBreaksTheClient(t *testing.T, db *store.DB) {
	for _, rp := range readPatterns {
		t.Run(rp.name, func(t *testing.T) {
			e := newGatewayEnvOn(t, db, gwconf.Budgets{}, nil)
			e.up.respond = breakOff
			// Over HTTP/1.1 the connection is taken over and closed: the
			// handler returns, so the server's wrappers count the request.
			returned := make(chan struct{})
			h := e.srv.Config.Handler
			e.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() {
					if recover() == nil {
						close(returned)
					}
				}()
				h.ServeHTTP(w, r)
			})
			text, err := rp.read(t, e)
			if err == nil {
				t.Fatalf("the SDK read %q and no error", text)
			}
			select {
			case <-returned:
			case <-time.After(10 * time.Second):
				t.Fatal("the handler did not return")
			}
			rc := e.receipts(t, "key-granted")[0]
			if rc.Spend == nil || len(rc.Spend.Attempts) != 1 {
				t.Fatalf("receipt spend %+v", rc.Spend)
			}
			a := rc.Spend.Attempts[0]
			if strings.HasSuffix(rp.name, "/whole") {
				if a.Reserved <= 0 || a.Settled != a.Reserved || a.Estimated {
					t.Errorf("attempt %+v: want it settled at its reservation", a)
				}
				status, retry, _ := sdkError(err)
				if status != 502 || retry != "false" || a.Outcome != "uncertain" || rc.Decision != shim.DecisionFailed {
					t.Fatalf("whole answer cut off: status %d x-should-retry %q, attempt %+v, decision %s (%v)", status, retry, a, rc.Decision, err)
				}
				if code := errorCode(err); code != "upstream_incomplete" {
					t.Errorf("code %q (%v): want upstream_incomplete", code, err)
				}
				return
			}
			if status, _, _ := sdkError(err); status != 0 {
				t.Fatalf("a stream cut off became an HTTP error: %v", err)
			}
			if a.Outcome != "broken" || !rc.Broken || rc.Decision != shim.DecisionForward {
				t.Fatalf("receipt broken %v decision %s attempt %+v", rc.Broken, rc.Decision, a)
			}
			// No usage came: what was generated, estimated (item 4).
			if !a.Estimated || a.Settled > a.Reserved {
				t.Errorf("attempt %+v: want an estimate", a)
			}
		})
	}
}

// TestBrokenStreamOverHTTP2: over HTTP/2 the cut stream is a reset stream,
// which the SDK raises as an error.
func TestBrokenStreamOverHTTP2(t *testing.T) {
	e, _ := newGatewayEnv(t, gwconf.Budgets{})
	e.up.respond = breakOff
	srv := httptest.NewUnstartedServer(e.srv.Config.Handler)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	c := openai.NewClient(option.WithBaseURL(srv.URL+"/v1/"), option.WithAPIKey("key-granted"), option.WithMaxRetries(0), option.WithHTTPClient(srv.Client()))
	var hr *http.Response
	s := c.Chat.Completions.NewStreaming(t.Context(), chatParams(), option.WithResponseInto(&hr))
	for s.Next() {
	}
	if s.Err() == nil || hr == nil || hr.ProtoMajor != 2 {
		t.Fatalf("over HTTP/2 (%v): err %v", hr != nil && hr.ProtoMajor == 2, s.Err())
	}
	if rc := e.receipts(t, "key-granted")[0]; !rc.Broken {
		t.Fatalf("receipt %+v", rc)
	}
}

// TestBrokenUpstreamBreaksThePassThrough: without gateway routes, the
// pass-through forwarder cuts the client's stream as the provider's was
// cut, and its receipt says broken.
func TestBrokenUpstreamBreaksThePassThrough(t *testing.T) {
	for _, rp := range readPatterns {
		if strings.HasSuffix(rp.name, "/whole") || strings.HasSuffix(rp.name, "/accumulator") {
			continue
		}
		t.Run(rp.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.up.respond = breakOff
			if text, err := rp.read(t, e); err == nil {
				t.Fatalf("the SDK read %q and no error", text)
			}
			if rc := e.receipts(t, "key-granted")[0]; !rc.Broken || rc.Decision != shim.DecisionForward {
				t.Fatalf("receipt broken %v decision %s", rc.Broken, rc.Decision)
			}
		})
	}
}

// credentialRefused answers as the providers do to a wrong API key: 401
// with the provider's own error, naming part of the key.
func credentialRefused(w http.ResponseWriter, r *http.Request, _ []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(401)
	if protocolOf(r) == wire.Messages {
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-opera..."},"request_id":"req_011"}`)
		return
	}
	io.WriteString(w, `{"error":{"message":"Incorrect API key provided: sk-proj-opera*****************wxyz. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
}

// TestRouteCredentialRefused: an upstream 401 caused by
// the route's credential reaches the client as 502 upstream_auth_failed in
// its provider's envelope, not to be retried, without the provider's
// message (which names the operator's key); the message is logged for the
// operator; the route is reported unhealthy, and healthy again at its next
// answer. Nothing is charged. On SQLite and Postgres.
func TestRouteCredentialRefused(t *testing.T) {
	storetest.Each(t, testRouteCredentialRefused)
}

func testRouteCredentialRefused(t *testing.T, db *store.DB) {
	var logs strings.Builder
	var mu sync.Mutex
	var health []string
	e := newGatewayEnvOn(t, db, gwconf.Budgets{}, func(c *gateway.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: &logs, mu: &mu}, nil))
		c.OnRouteHealth = func(route string, healthy bool) {
			mu.Lock()
			health = append(health, fmt.Sprint(route, "=", healthy))
			mu.Unlock()
		}
	})
	e.up.respond = credentialRefused
	for _, rp := range readPatterns {
		if strings.HasSuffix(rp.name, "/accumulator") {
			continue
		}
		t.Run(rp.name, func(t *testing.T) {
			_, err := rp.read(t, e)
			status, retry, kind := sdkError(err)
			if status != 502 || retry != "false" || errorCode(err) != "upstream_auth_failed" || (rp.p == wire.Messages && kind != "api_error") {
				t.Fatalf("status %d x-should-retry %q code %q type %q (%v)", status, retry, errorCode(err), kind, err)
			}
			if strings.Contains(err.Error(), "sk-") || strings.Contains(err.Error(), "API key provided") {
				t.Fatalf("the provider's message reached the client: %v", err)
			}
			rc := e.receipts(t, "key-granted")[0]
			if a := rc.Spend.Attempts[0]; a.Outcome != "auth_failed" || a.Status != 401 || a.Settled != 0 || rc.Decision != shim.DecisionFailed {
				t.Fatalf("receipt %s attempt %+v", rc.Decision, a)
			}
		})
	}
	mu.Lock()
	logged := logs.String()
	mu.Unlock()
	if !strings.Contains(logged, "Incorrect API key provided: sk-proj-opera") || !strings.Contains(logged, "invalid x-api-key sk-ant-opera") {
		t.Errorf("the operator's log lacks the providers' messages:\n%s", logged)
	}
	e.up.respond = defaultRespond
	if _, err := call(t, e, "key-granted", wire.ChatCompletions, false, "gpt-4o", "hello", nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(health, " "); got != "openai=false anthropic=false openai=true" {
		t.Fatalf("route health reports %q", got)
	}
}

// syncWriter serializes writes to w.
type syncWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// clock is a settable clock for the gateway and the store.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// rateLimited answers as OpenAI does past a rate limit, without
// Retry-After.
func rateLimited(w http.ResponseWriter, _ *http.Request, _ []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(429)
	io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-1 on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
}

// TestRateLimitWithoutRetryAfterHoldsBriefly: an
// upstream 429 without Retry-After holds its model for 1 s, then 2, 4 …
// on consecutive 429s, capped at a minute, and back to 1 s once the model
// answered; the client is always told the hold's remaining time rounded up
// to the second, never more — on the upstream's 429 passed on, and on the
// gateway's own rate_limited while the hold runs. The holds are the
// store's: on SQLite and Postgres.
func TestRateLimitWithoutRetryAfterHoldsBriefly(t *testing.T) {
	storetest.Each(t, testRateLimitWithoutRetryAfterHoldsBriefly)
}

func testRateLimitWithoutRetryAfterHoldsBriefly(t *testing.T, db *store.DB) {
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	e := newGatewayEnvOn(t, db, gwconf.Budgets{}, func(c *gateway.Config) { c.Now = clk.Now })
	db.Now = clk.Now
	c := openaiClient(e, "key-granted", nil)
	ask := func() (retryAfter, code string) {
		t.Helper()
		_, err := c.Chat.Completions.New(t.Context(), chatParams())
		var oe *openai.Error
		if !errors.As(err, &oe) || oe.StatusCode != 429 {
			t.Fatalf("want a 429, got %v", err)
		}
		return oe.Response.Header.Get("Retry-After"), oe.Code
	}
	e.up.respond = rateLimited
	for _, secs := range []int{1, 2, 4, 8, 16, 32, 60, 60} {
		calls := e.up.calls()
		if ra, code := ask(); ra != strconv.Itoa(secs) || code != "rate_limit_exceeded" || e.up.calls() != calls+1 {
			t.Fatalf("upstream 429: Retry-After %q code %q, want %d s from the provider's answer", ra, code, secs)
		}
		// Within the hold: the gateway's own 429, with what remains.
		clk.add(time.Duration(secs)*time.Second - 300*time.Millisecond)
		if ra, code := ask(); ra != "1" || code != "rate_limited" || e.up.calls() != calls+1 {
			t.Fatalf("held with 0.3 s left: Retry-After %q code %q (upstream called %d times)", ra, code, e.up.calls()-calls)
		}
		clk.add(300 * time.Millisecond)
	}
	e.up.respond = defaultRespond
	if _, err := c.Chat.Completions.New(t.Context(), chatParams()); err != nil {
		t.Fatal(err)
	}
	e.up.respond = rateLimited
	if ra, _ := ask(); ra != "1" {
		t.Fatalf("after an answer: Retry-After %q, want the backoff back at 1 s", ra)
	}
	clk.add(200 * time.Millisecond)
	if ra, code := ask(); ra != "1" || code != "rate_limited" {
		t.Fatalf("held with 0.8 s left: Retry-After %q code %q", ra, code)
	}
}

// TestSlowAnswerOnTheLastStep: with one step, an answer
// slower than attempt_timeout (a nanosecond: every answer is) is waited for — the timeout only decides a
// failover the plan allows — and charged from its usage; the SDK, retries
// on, sends it once. With the route's own timeout, the answer that does not
// come in time is 502 upstream_incomplete, not to be retried, and settled
// at its reservation: the provider may have run it. On SQLite and Postgres.
func TestSlowAnswerOnTheLastStep(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newGatewayEnvOn(t, db, gwconf.Budgets{}, func(c *gateway.Config) { c.HeaderTimeout = time.Nanosecond })
		e.up.respond = defaultRespond // far past an attempt_timeout of a nanosecond
		c := openaiClient(e, "key-granted", nil, option.WithMaxRetries(2))
		cc, err := c.Chat.Completions.New(t.Context(), chatParams())
		if err != nil || cc.Choices[0].Message.Content != upstreamText || e.up.calls() != 1 {
			t.Fatalf("slow answer on the last step: %v (upstream called %d times)", err, e.up.calls())
		}
		rc := e.receipts(t, "key-granted")[0]
		if a := rc.Spend.Attempts; len(a) != 1 || a[0].Outcome != "answered" || a[0].Settled >= a[0].Reserved {
			t.Fatalf("attempts %+v: want it answered and settled from its usage", a)
		}
		first := rc.Spend.Settled

		// The route's own timeout bounds the wait.
		e = newGatewayEnvOn(t, db, gwconf.Budgets{}, func(c *gateway.Config) {
			r := c.Upstream.Routes["openai"]
			r.Timeout = "100ms"
			c.Upstream.Routes["openai"] = r
		})
		e.up.respond = func(w http.ResponseWriter, r *http.Request, _ []byte) { <-r.Context().Done() }
		c = openaiClient(e, "key-granted", nil, option.WithMaxRetries(2))
		_, err = c.Chat.Completions.New(t.Context(), chatParams())
		status, retry, _ := sdkError(err)
		if status != 502 || retry != "false" || errorCode(err) != "upstream_incomplete" || e.up.calls() != 1 {
			t.Fatalf("past the route's timeout: status %d x-should-retry %q code %q, upstream called %d times (%v)", status, retry, errorCode(err), e.up.calls(), err)
		}
		rc = e.receipts(t, "key-granted")[0]
		if a := rc.Spend.Attempts; len(a) != 1 || a[0].Outcome != "uncertain" || a[0].Settled != a[0].Reserved || rc.Decision != shim.DecisionFailed {
			t.Fatalf("attempts %+v", a)
		}
		rows, err := ledger.Of(db).Spend(t.Context(), "slot-1", "kg", time.Time{})
		if err != nil || len(rows) != 1 || rows[0].Attempts != 2 || rows[0].Settled != rc.Spend.Attempts[0].Reserved+first {
			t.Fatalf("spend %+v, %v", rows, err)
		}
	})
}

// TestClientCancelSettlesWhatWasGenerated: a client that
// stops a stream ("stop generating") stops the upstream call, and the
// attempt settles at what was generated: the provider's usage when it came
// before the client left, else an estimate from the deltas streamed (a
// token per three bytes, the input likewise from the request's bytes),
// marked estimated in the receipt and in the spend. On SQLite and
// Postgres.
func TestClientCancelSettlesWhatWasGenerated(t *testing.T) {
	for _, usageFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "no usage", true: "usage came"}[usageFirst], func(t *testing.T) {
			storetest.Each(t, func(t *testing.T, db *store.DB) {
				e := newGatewayEnvOn(t, db, gwconf.Budgets{}, nil)
				stopped := make(chan struct{})
				e.up.respond = func(w http.ResponseWriter, r *http.Request, _ []byte) {
					w.Header().Set("Content-Type", "text/event-stream")
					chunk := func(delta string) {
						fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}],\"usage\":null}\n\n", delta)
						w.(http.Flusher).Flush()
					}
					chunk(`{"role":"assistant","content":""}`)
					for _, s := range []string{"Hello", " wor", "ld!"} {
						chunk(`{"content":"` + s + `"}`)
					}
					if usageFirst {
						io.WriteString(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o\",\"choices\":[],\"usage\":{\"prompt_tokens\":50,\"completion_tokens\":3,\"total_tokens\":53}}\n\n")
						w.(http.Flusher).Flush()
					}
					<-r.Context().Done() // generating on, until the call is stopped
					close(stopped)
				}
				ctx, cancel := context.WithCancel(t.Context())
				c := openaiClient(e, "key-granted", nil)
				params := chatParams()
				if usageFirst {
					// The client sees the usage chunk, so the gateway read it
					// before the client left.
					params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				}
				s := c.Chat.Completions.NewStreaming(ctx, params)
				text := ""
				for s.Next() {
					ch := s.Current()
					if len(ch.Choices) > 0 {
						text += ch.Choices[0].Delta.Content
					}
					// Every delta the provider sent (and its usage, when it
					// sent it) went through the gateway: "stop generating".
					if text == "Hello world!" && (!usageFirst || ch.Usage.TotalTokens > 0) {
						break
					}
				}
				cancel()
				s.Close()
				select {
				case <-stopped:
				case <-time.After(10 * time.Second):
					t.Fatal("the upstream call was not stopped")
				}
				e.srv.Close() // waits for the request's handler: its receipt is stored
				rc := e.receipts(t, "key-granted")[0]
				a := rc.Spend.Attempts[0]
				price := gwconf.Price{Input: 2_000_000, CachedInput: 500_000, Output: 8_000_000}
				want := int64(price.Cost(gwconf.Usage{Input: 50, Output: 3}))
				if !usageFirst {
					in := (int64(len(e.up.last(t).Body)) + 2) / 3
					want = int64(price.Cost(gwconf.Usage{Input: in, Output: (5 + 4 + 3 + 2) / 3}))
				}
				if a.Outcome != "canceled" || a.Settled != want || a.Estimated == usageFirst || rc.Broken || rc.Decision != shim.DecisionForward {
					t.Fatalf("receipt %s broken %v attempt %+v: want canceled, settled %d, estimated %v", rc.Decision, rc.Broken, a, want, !usageFirst)
				}
				rows, err := ledger.Of(db).Spend(t.Context(), "slot-1", "kg", time.Time{})
				wantEst := want
				if usageFirst {
					wantEst = 0
				}
				if err != nil || len(rows) != 1 || rows[0].Settled != want || rows[0].Estimated != wantEst || rows[0].Open != 0 {
					t.Fatalf("spend %+v, %v: want %d settled, %d of it estimated", rows, err, want, wantEst)
				}
			})
		})
	}
}
