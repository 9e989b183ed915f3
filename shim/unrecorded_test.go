package shim_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	gwconf "github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// failingTurns is a TurnRecorder whose transaction fails, as a store that
// is full, gone or deadlocked past its retries does.
type failingTurns struct{ calls atomic.Int64 }

func (f *failingTurns) RecordTurn(context.Context, audit.Entry, *shim.Receipt, []shim.MemoryWrite) error {
	f.calls.Add(1)
	return errors.New("disk I/O error")
}

// TestAnswerWithheldWhenItsReceiptIsNotStored: when a turn's receipt and
// audit record cannot be stored, no client holds a finished answer — through
// the pass-through and the governed gateway, forwarded or answered directly,
// in each protocol read by its official SDK. A whole answer becomes a 503
// receipt_not_recorded without a receipt header (the SDK reports it as an
// API error); a stream is cut before its last event (the SDK reports a read
// error, never a clean end).
func TestAnswerWithheldWhenItsReceiptIsNotStored(t *testing.T) {
	for _, path := range []string{"upstreams", "gateway", "direct"} {
		for _, p := range []wire.Protocol{wire.ChatCompletions, wire.Responses, wire.Messages} {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s/%s/stream=%v", path, p, stream)
				t.Run(name, func(t *testing.T) {
					turns := &failingTurns{}
					e, key := envOnPath(t, path, func(c *shim.Config) { c.Turns = turns })
					prompt := "hello"
					if path == "direct" {
						e.provision(t, key, `{"id":"D","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days.","stop_reason":"end_turn"}}`)
						prompt = "refund please"
					}
					if stream {
						withheldStream(t, e, key, p, prompt)
					} else {
						withheldAnswer(t, e, key, p, prompt, path != "direct")
					}
					if turns.calls.Load() != 1 {
						t.Fatalf("RecordTurn called %d times, want 1", turns.calls.Load())
					}
					wantCalls := 1
					if path == "direct" {
						wantCalls = 0
					}
					if n := e.up.calls(); n != wantCalls {
						t.Fatalf("upstream called %d times, want %d", n, wantCalls)
					}
				})
			}
		}
	}
}

// withheldAnswer asserts the SDK of p gets a 503 receipt_not_recorded for
// a whole answer, and the raw answer carries no receipt header; ran: an
// upstream ran the request, so the SDK is told not to retry it.
func withheldAnswer(t *testing.T, e *env, key string, p wire.Protocol, prompt string, ran bool) {
	t.Helper()
	_, err := call(t, e, key, p, false, modelOf[p], prompt, nil)
	withheld(t, err, ran, upstreamText, "14 days")
}

// withheld asserts err is the SDK's API error for a 503
// receipt_not_recorded that names no receipt, sends none of the withheld
// response's headers, holds none of leaks, and tells the SDK not to retry
// exactly when ran.
func withheld(t *testing.T, err error, ran bool, leaks ...string) {
	t.Helper()
	var status int
	var raw string
	var hdr http.Header
	var oe *openai.Error
	var ae *anthropic.Error
	switch {
	case errors.As(err, &oe):
		status, raw, hdr = oe.StatusCode, oe.RawJSON(), oe.Response.Header
	case errors.As(err, &ae):
		status, raw, hdr = ae.StatusCode, ae.RawJSON(), ae.Response.Header
	default:
		t.Fatalf("the SDK got %v, want an API error", err)
	}
	if status != http.StatusServiceUnavailable || !strings.Contains(raw, shim.CodeReceiptNotRecorded) {
		t.Fatalf("the SDK got %d %s, want 503 %s", status, raw, shim.CodeReceiptNotRecorded)
	}
	for _, l := range leaks {
		if strings.Contains(raw, l) {
			t.Fatalf("the withheld response leaked %q into the error: %s", l, raw)
		}
	}
	if r := hdr.Get(shim.HeaderReceipt); r != "" {
		t.Fatalf("a withheld answer names receipt %s, which is not stored", r)
	}
	if noRetry := hdr.Get("X-Should-Retry") == "false"; noRetry != ran {
		t.Fatalf("x-should-retry %q for a response whose upstream ran=%v", hdr.Get("X-Should-Retry"), ran)
	}
	if hdr.Get("X-Upstream") != "" || hdr.Get("Retry-After") != "" {
		t.Fatalf("the withheld response's own headers were sent: %v", hdr)
	}
}

// withheldStream asserts a stream in p ends with a read error before its
// last event, read by the official SDK's own stream reader.
func withheldStream(t *testing.T, e *env, key string, p wire.Protocol, prompt string) {
	t.Helper()
	ctx := t.Context()
	var err error
	var events int
	switch p {
	case wire.ChatCompletions:
		c := openaiClient(e, key, nil)
		s := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: modelOf[p],
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)}})
		// Its last event is data: [DONE]; the chunk with the finish
		// reason comes before it, so only the read error tells the end.
		for s.Next() {
			events++
		}
		err = s.Err()
	case wire.Messages:
		c := anthropicClient(e, key, nil)
		s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: anthropic.Model(modelOf[p]), MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))}})
		for s.Next() {
			events++
			if s.Current().Type == "message_stop" {
				t.Fatal("the stream reached message_stop")
			}
		}
		err = s.Err()
	default:
		c := openaiClient(e, key, nil)
		s := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: modelOf[p],
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(prompt)}})
		for s.Next() {
			events++
			if s.Current().Type == "response.completed" {
				t.Fatal("the stream reached response.completed")
			}
		}
		err = s.Err()
	}
	if err == nil {
		t.Fatalf("the stream ended cleanly after %d events; want a read error", events)
	}
}

// failingHolds is a Holds whose store fails, as a gateway's ledger does
// when its database is gone: the request fails before any attempt.
type failingHolds struct{}

func (failingHolds) Hold(context.Context, string, time.Time) error {
	return errors.New("disk I/O error")
}
func (failingHolds) HeldUntil(context.Context, string) (time.Time, error) {
	return time.Time{}, errors.New("disk I/O error")
}

// TestRefusalWithheldWhenItsRecordIsNotStored: a refusal is recorded
// before it is given. When its receipt and audit record cannot be stored,
// the client gets 503 receipt_not_recorded in place of the refusal, read by
// each protocol's official SDK: the shim's own refusal (a contributor-tier
// model), the gateway's before any attempt (a key without the grant, a
// budget it would pass) and its 500 when its ledger fails, where the SDK
// may retry, as after an upstream that refused the route's credential
// (it did not run the request); and the gateway's after an upstream broke
// its answer off (it may have run it), where it may not.
func TestRefusalWithheldWhenItsRecordIsNotStored(t *testing.T) {
	granted := func(p wire.Protocol) string { return modelOf[p] }
	cases := []struct {
		name, key, code string
		model           func(wire.Protocol) string
		env             func(t *testing.T, tweak func(*shim.Config)) *env
		ran             bool // an upstream may have run the request
		upstream        int  // its calls
	}{
		{"contributor", "key-a", shim.CodeContributorRefused, func(wire.Protocol) string { return "x-contributor" },
			func(t *testing.T, tw func(*shim.Config)) *env { return newEnv(t, tw) }, false, 0},
		{"ungranted", "key-route", "model_not_granted", granted,
			func(t *testing.T, tw func(*shim.Config)) *env {
				e, _ := newGatewayEnv(t, gwconf.Budgets{}, tw)
				return e
			}, false, 0},
		{"over budget", "key-granted", "budget_exceeded", granted,
			func(t *testing.T, tw func(*shim.Config)) *env {
				e, _ := newGatewayEnv(t, gwconf.Budgets{Key: gwconf.Limit{Day: 1000}}, tw)
				return e
			}, false, 0},
		{"ledger failed", "key-granted", "internal error", granted,
			func(t *testing.T, tw func(*shim.Config)) *env {
				e, _ := newGatewayEnvWith(t, gwconf.Budgets{}, func(c *gateway.Config) { c.Holds = failingHolds{} }, tw)
				return e
			}, false, 0},
		{"upstream refused the credential", "key-granted", "upstream_auth_failed", granted,
			func(t *testing.T, tw func(*shim.Config)) *env {
				e, _ := newGatewayEnv(t, gwconf.Budgets{}, tw)
				e.up.respond = credentialRefused
				return e
			}, false, 1},
		{"answer broken off", "key-granted", "upstream_incomplete", granted,
			func(t *testing.T, tw func(*shim.Config)) *env {
				e, _ := newGatewayEnv(t, gwconf.Budgets{}, tw)
				e.up.respond = breakOff
				return e
			}, true, 1},
	}
	for _, c := range cases {
		for _, p := range wire.Protocols {
			t.Run(c.name+"/"+string(p), func(t *testing.T) {
				// The same refusal with a store that works, first: it is
				// the refusal this case means.
				e := c.env(t, func(*shim.Config) {})
				_, err := call(t, e, c.key, p, false, c.model(p), "hello", nil)
				var oe *openai.Error
				var ae *anthropic.Error
				if !(errors.As(err, &oe) && strings.Contains(oe.RawJSON(), c.code)) && !(errors.As(err, &ae) && strings.Contains(ae.RawJSON(), c.code)) {
					t.Fatalf("with a working store: %v, want the refusal %s", err, c.code)
				}

				turns := &failingTurns{}
				e = c.env(t, func(cf *shim.Config) { cf.Turns = turns })
				_, err = call(t, e, c.key, p, false, c.model(p), "hello", nil)
				withheld(t, err, c.ran, c.code)
				if turns.calls.Load() != 1 {
					t.Fatalf("RecordTurn called %d times, want 1", turns.calls.Load())
				}
				if n := e.up.calls(); n != c.upstream {
					t.Fatalf("upstream called %d times, want %d", n, c.upstream)
				}
			})
		}
	}
}
