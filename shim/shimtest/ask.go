package shimtest

import (
	"context"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Ask sends one user message ("hi") to model at the Caduceus (or gateway)
// at url with key, as a client of wire p does with its official Go SDK
// (OpenAI's for chat completions and the Responses API, Anthropic's for
// messages), whole or streamed (a chat stream asking for its usage), and
// returns the answer's text as the SDK read it (a stream accumulated) and
// the receipt id its response carried.
func Ask(ctx context.Context, url, key string, p wire.Protocol, model string, stream bool) (text, receipt string, err error) {
	var hr *http.Response
	switch p {
	case wire.ChatCompletions:
		c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0), option.WithResponseInto(&hr))
		params := openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
		if !stream {
			r, err := c.Chat.Completions.New(ctx, params)
			if err != nil {
				return "", "", err
			}
			return r.Choices[0].Message.Content, hr.Header.Get("X-Caduceus-Receipt"), nil
		}
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil || len(acc.Choices) == 0 {
			return "", "", err
		}
		return acc.Choices[0].Message.Content, hr.Header.Get("X-Caduceus-Receipt"), nil
	case wire.Responses:
		c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0), option.WithResponseInto(&hr))
		params := responses.ResponseNewParams{Model: model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
		if !stream {
			r, err := c.Responses.New(ctx, params)
			if err != nil {
				return "", "", err
			}
			return r.OutputText(), hr.Header.Get("X-Caduceus-Receipt"), nil
		}
		s := c.Responses.NewStreaming(ctx, params)
		for s.Next() {
			if ev := s.Current(); ev.Type == "response.completed" {
				text = ev.AsResponseCompleted().Response.OutputText()
			}
		}
		return text, hr.Header.Get("X-Caduceus-Receipt"), s.Err()
	}
	c := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0), aoption.WithResponseInto(&hr))
	params := anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
	var m anthropic.Message
	if !stream {
		r, err := c.Messages.New(ctx, params)
		if err != nil {
			return "", "", err
		}
		m = *r
	} else {
		s := c.Messages.NewStreaming(ctx, params)
		for s.Next() {
			if err := m.Accumulate(s.Current()); err != nil {
				return "", "", err
			}
		}
		if err := s.Err(); err != nil {
			return "", "", err
		}
	}
	for _, b := range m.Content {
		text += b.Text
	}
	return text, hr.Header.Get("X-Caduceus-Receipt"), nil
}
