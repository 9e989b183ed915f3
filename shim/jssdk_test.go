package shim_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// readWithJSSDKs reads e's answers with key in each read pattern of the
// official JavaScript SDKs (shimtest.ReadWithJSSDKs).
func readWithJSSDKs(t *testing.T, e *env, key string) map[string]shimtest.JSRead {
	return shimtest.ReadWithJSSDKs(t, e.srv.URL, key, modelOf[wire.ChatCompletions], modelOf[wire.Responses], modelOf[wire.Messages])
}

// TestWithheldThroughTheJSSDKs: an answer whose receipt and audit record
// cannot be stored reaches no reader of the official JavaScript SDKs as a
// finished answer, in any of their read patterns: create() rejects with
// the SDK's APIError for 503 receipt_not_recorded (and, the upstream
// having run, the SDK does not retry it: one upstream call per read);
// for await over a stream, finalChatCompletion(), finalResponse() and
// finalMessage() reject when the stream is cut before its last event.
func TestWithheldThroughTheJSSDKs(t *testing.T) {
	turns := &failingTurns{}
	e := newEnv(t, func(c *shim.Config) { c.Turns = turns })
	reads := readWithJSSDKs(t, e, "key-a")

	whole := []string{"openai/chat/create", "openai/responses/create", "anthropic/messages/create"}
	streamed := []string{"openai/chat/for-await", "openai/chat/finalChatCompletion", "openai/responses/for-await",
		"openai/responses/finalResponse", "anthropic/messages/for-await", "anthropic/messages/finalMessage"}
	if len(reads) != len(whole)+len(streamed) {
		t.Fatalf("read.mjs reported %d patterns, want %d: %+v", len(reads), len(whole)+len(streamed), reads)
	}
	for _, p := range whole {
		r := reads[p]
		if r.Outcome != "api_error" || r.Status != 503 || !strings.Contains(r.Body+r.Message, shim.CodeReceiptNotRecorded) {
			t.Errorf("%s: %+v, want the SDK's API error for 503 %s", p, r, shim.CodeReceiptNotRecorded)
		}
		if r.Receipt != nil {
			t.Errorf("%s: the withheld answer names receipt %s", p, *r.Receipt)
		}
		if r.ShouldRetry == nil || *r.ShouldRetry != "false" {
			t.Errorf("%s: x-should-retry %v, want false (the upstream ran)", p, r.ShouldRetry)
		}
		if strings.Contains(r.Body+r.Message, upstreamText) {
			t.Errorf("%s: the withheld answer leaked into the error: %+v", p, r)
		}
	}
	for _, p := range streamed {
		if r := reads[p]; r.Outcome != "error" {
			t.Errorf("%s: %+v, want an error thrown while reading the cut stream", p, r)
		}
	}
	n := len(whole) + len(streamed)
	if got := turns.calls.Load(); got != int64(n) {
		t.Errorf("RecordTurn called %d times for %d reads: an SDK retried", got, n)
	}
	if got := e.up.calls(); got != n {
		t.Errorf("upstream called %d times for %d reads: an SDK retried", got, n)
	}
}
