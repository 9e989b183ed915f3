package provider

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

func init() { Register(anthropic{}) }

// anthropic is the Anthropic messages API: the credential in X-Api-Key,
// an Anthropic-Version on every request (the client's, else 2023-06-01).
type anthropic struct{}

// AnthropicVersion is the Anthropic-Version sent when the client sent none.
const AnthropicVersion = "2023-06-01"

func (anthropic) Kind() upstream.Kind { return upstream.KindAnthropic }

func (anthropic) Class() contract.Provider { return contract.ProviderClaude }

func (anthropic) Speaks(p wire.Protocol, _ string) bool { return p == wire.Messages }

func (anthropic) Translator(client wire.Protocol, _ string) Translator {
	switch client {
	case wire.ChatCompletions:
		return translator{client: client, up: wire.Messages}
	case wire.Responses:
		return responsesViaChat{translator{client: wire.ChatCompletions, up: wire.Messages}}
	}
	return nil
}

func (anthropic) Request(ctx context.Context, c Call) (*http.Request, error) {
	r, err := newRequest(ctx, c, c.Path)
	if err != nil {
		return nil, err
	}
	r.Header.Set("Anthropic-Version", AnthropicVersion)
	if c.Key != "" {
		r.Header.Set("X-Api-Key", c.Key)
	}
	return r, nil
}

func (anthropic) Foreign(k string) bool { return strings.HasPrefix(k, "Openai-") }

func (anthropic) Events(h http.Header, body io.Reader) (Events, bool) { return SSE(h, body) }

func (anthropic) Meter(up wire.Protocol) Meter { return &usageMeter{p: up} }

func (anthropic) Failure(status int) (upstream.Failure, bool) {
	return upstream.FailureOfStatus(status)
}
