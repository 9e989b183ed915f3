package provider

import (
	"github.com/caduceus-dev/caduceus/shim/translate"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// viaChat carries a messages client to a provider whose translator takes a
// chat completions client (Gemini's): through chat's shape, both ways, by
// the translations shim/translate already has (messages to chat, then
// chat to the upstream; the answer, its errors and its stream back the
// same way). What chat cannot say is refused as it is for a messages
// client of an OpenAI route.
type viaChat struct{ next Translator }

func (v viaChat) Upstream() wire.Protocol { return v.next.Upstream() }

func (v viaChat) Request(body []byte, model string, maxTokens int64) ([]byte, error) {
	// The route reads reasoning in chat's shape: the client's thinking
	// goes on, and its earlier turns' thinking blocks go back.
	chat, err := translate.Request(wire.Messages, body, translate.Options{Model: model, MaxTokens: maxTokens, Reasoning: true})
	if err != nil {
		return nil, err
	}
	return v.next.Request(chat, model, maxTokens)
}

func (v viaChat) Answer(body []byte, created int64) ([]byte, error) {
	chat, err := v.next.Answer(body, created)
	if err != nil {
		return nil, err
	}
	return translate.Answer(wire.Messages, chat, created)
}

func (v viaChat) ErrorAnswer(status int, body []byte) []byte {
	return translate.ErrorAnswer(wire.Messages, status, v.next.ErrorAnswer(status, body))
}

func (v viaChat) Stream(_ bool, created int64) Stream {
	// The chat stream in between asks for its usage chunk: the messages
	// stream's message_delta carries it.
	return &chainedStream{first: v.next.Stream(true, created), second: translate.NewStream(wire.Messages, false, created)}
}

// chainedStream is a stream translated twice: the upstream's events into
// chat's, chat's into the client's.
type chainedStream struct{ first, second Stream }

func (c *chainedStream) pipe(evs []wire.SSE) []wire.SSE {
	var out []wire.SSE
	for _, ev := range evs {
		out = append(out, c.second.Event(ev)...)
	}
	return out
}

func (c *chainedStream) Event(ev wire.SSE) []wire.SSE { return c.pipe(c.first.Event(ev)) }

func (c *chainedStream) End() []wire.SSE { return append(c.pipe(c.first.End()), c.second.End()...) }

// responsesViaChat carries a Responses API client to a provider whose
// translator takes a chat completions client (Anthropic's, Gemini's):
// the request to chat (translate.ResponsesToChat) and on; the answer back
// to chat and into a Response (translate.ChatToResponse); the stream
// back through chat into response events (translate.ResponsesStream).
// Errors are in OpenAI's envelope, the Responses API's own.
type responsesViaChat struct{ next Translator }

func (v responsesViaChat) Upstream() wire.Protocol { return v.next.Upstream() }

func (v responsesViaChat) Request(body []byte, model string, maxTokens int64) ([]byte, error) {
	chat, err := translate.ResponsesToChat(body, translate.Options{Model: model})
	if err != nil {
		return nil, err
	}
	return v.next.Request(chat, model, maxTokens)
}

func (v responsesViaChat) Answer(body []byte, created int64) ([]byte, error) {
	chat, err := v.next.Answer(body, created)
	if err != nil {
		return nil, err
	}
	return translate.ChatToResponse(chat, created)
}

func (v responsesViaChat) ErrorAnswer(status int, body []byte) []byte {
	return v.next.ErrorAnswer(status, body)
}

func (v responsesViaChat) Stream(_ bool, created int64) Stream {
	return &chainedStream{first: v.next.Stream(true, created), second: translate.NewResponsesStream(created)}
}
