package gateway

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestRateHeadersInTheProvidersNames: a refusal names its windows as the
// provider does — OpenAI's x-ratelimit-{limit,remaining,reset}-{requests,
// tokens} with the reset as a duration, Anthropic's
// anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset} with the
// reset as an RFC 3339 time — remaining never below zero, and a window
// with no limit not named at all.
func TestRateHeadersInTheProvidersNames(t *testing.T) {
	now := time.Date(2026, 12, 1, 18, 0, 30, 0, time.UTC)
	both := upstream.RateWindow{RPM: 2, Requests: 3, TPM: 2000, Tokens: 1500}
	for _, tc := range []struct {
		p    wire.Protocol
		w    upstream.RateWindow
		want http.Header
	}{
		{wire.ChatCompletions, both, http.Header{
			"X-Ratelimit-Limit-Requests": {"2"}, "X-Ratelimit-Remaining-Requests": {"0"}, "X-Ratelimit-Reset-Requests": {"30s"},
			"X-Ratelimit-Limit-Tokens": {"2000"}, "X-Ratelimit-Remaining-Tokens": {"500"}, "X-Ratelimit-Reset-Tokens": {"30s"},
		}},
		{wire.Messages, both, http.Header{
			"Anthropic-Ratelimit-Requests-Limit": {"2"}, "Anthropic-Ratelimit-Requests-Remaining": {"0"}, "Anthropic-Ratelimit-Requests-Reset": {"2026-12-01T18:01:00Z"},
			"Anthropic-Ratelimit-Tokens-Limit": {"2000"}, "Anthropic-Ratelimit-Tokens-Remaining": {"500"}, "Anthropic-Ratelimit-Tokens-Reset": {"2026-12-01T18:01:00Z"},
		}},
		{wire.Responses, upstream.RateWindow{TPM: 10, Tokens: 10}, http.Header{
			"X-Ratelimit-Limit-Tokens": {"10"}, "X-Ratelimit-Remaining-Tokens": {"0"}, "X-Ratelimit-Reset-Tokens": {"30s"},
		}},
	} {
		if got := rateHeaders(tc.p, tc.w, now, 30*time.Second); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v: got %v, want %v", tc.p, got, tc.want)
		}
	}
}
