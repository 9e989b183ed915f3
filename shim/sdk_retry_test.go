package shim_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caduceus-dev/caduceus/shim"
)

// TestSDKsDoNotRetryDeterministicRefusals: the official SDKs, with their
// retries on (they retry a 503 by default), send an offline refusal once:
// the refusal says x-should-retry: false, and the Anthropic envelope's type
// is not overloaded_error.
func TestSDKsDoNotRetryDeterministicRefusals(t *testing.T) {
	e := newEnv(t, func(c *shim.Config) { c.Offline = true })
	oRec, aRec := &recorder{}, &recorder{}
	oc := openaiClient(e, "key-a", oRec, option.WithMaxRetries(3))
	_, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4o",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("openai: %v", err)
	}
	ac := anthropicClient(e, "key-a", aRec, aoption.WithMaxRetries(3))
	_, err = ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-x", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("anthropic: %v", err)
	}
	if got := ae.Type(); got == "overloaded_error" {
		t.Fatalf("anthropic error type %q for an offline refusal", got)
	}
	if n, m := len(oRec.bodies), len(aRec.bodies); n != 1 || m != 1 {
		t.Fatalf("requests sent: openai %d, anthropic %d; want 1 each (no retry)", n, m)
	}
	if n := len(e.receipts(t, "key-a")); n != 2 {
		t.Fatalf("%d receipts, want 2", n)
	}
}
