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

func init() { Register(openAI{}) }

// openAI is the OpenAI API: chat completions, Responses and embeddings,
// the credential as a bearer token.
type openAI struct{}

func (openAI) Kind() upstream.Kind { return upstream.KindOpenAI }

func (openAI) Class() contract.Provider { return contract.ProviderCodex }

func (openAI) Speaks(p wire.Protocol, _ string) bool {
	return p == wire.ChatCompletions || p == wire.Responses || p == wire.Embeddings
}

func (openAI) Translator(client wire.Protocol, _ string) Translator {
	if client == wire.Messages {
		return translator{client: client, up: wire.ChatCompletions}
	}
	return nil
}

func (openAI) Request(ctx context.Context, c Call) (*http.Request, error) {
	r, err := newRequest(ctx, c, c.Path)
	if err != nil {
		return nil, err
	}
	if c.Key != "" {
		r.Header.Set("Authorization", "Bearer "+c.Key)
	}
	return r, nil
}

func (openAI) Foreign(k string) bool { return strings.HasPrefix(k, "Anthropic-") }

func (openAI) Events(h http.Header, body io.Reader) (Events, bool) { return SSE(h, body) }

func (openAI) Meter(up wire.Protocol) Meter { return &usageMeter{p: up} }

func (openAI) Failure(status int) (upstream.Failure, bool) { return upstream.FailureOfStatus(status) }
