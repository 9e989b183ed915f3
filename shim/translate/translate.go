// Package translate carries a turn across the LLM wires: an OpenAI chat
// completions client served by an Anthropic messages route, an Anthropic
// messages client served by an OpenAI chat completions route, and, with
// chat's shape as the pivot, the Responses API (responses.go), Gemini
// (gemini.go) and Bedrock's Converse (bedrock.go). It translates the
// request (messages, system, content parts, images, tool calls and tool
// results, tools and tool_choice, the sampling bounds, reasoning and its
// signed blocks: thinking.go), the answer (text, reasoning, tool calls,
// the stop reason, usage), a streamed answer event by event, and error
// envelopes.
//
// What the other wire cannot say is refused before any upstream call with
// an *Error naming the field (an audio part, n > 1, logprobs, a server
// tool); what changes nothing the client can observe (a seed, a cache
// hint) is dropped.
//
// Every function here reads bytes from outside (a client's body, an
// upstream's answer or stream) and never panics on them: FuzzRequest,
// FuzzAnswer and FuzzStream hold that.
package translate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Error is a request the other wire cannot carry; Field names the part of
// the client's body (messages[2].content[1].type).
type Error struct {
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

func refuse(field, format string, args ...any) *Error {
	return &Error{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Supported reports whether a client of protocol p may be translated:
// chat completions and messages.
func Supported(p wire.Protocol) bool {
	return p == wire.ChatCompletions || p == wire.Messages
}

// Upstream is the protocol a translated request of client protocol p is
// sent in: messages for chat completions, chat completions for messages.
func Upstream(p wire.Protocol) wire.Protocol {
	if p == wire.Messages {
		return wire.ChatCompletions
	}
	return wire.Messages
}

// DefaultMaxTokens is the max_tokens a chat completions request without a
// bound gets on an Anthropic route (which requires one) when the route's
// model has no price bound (max_output_tokens) either.
const DefaultMaxTokens = 4096

// Options are what a translation needs besides the body.
type Options struct {
	// Model is the model to ask the upstream for ("": the client's).
	Model string
	// MaxTokens is the max_tokens of a chat completions request that sets
	// neither max_tokens nor max_completion_tokens, for an Anthropic
	// upstream (0: DefaultMaxTokens).
	MaxTokens int64
	// Reasoning: the chat completions request made goes on to a route
	// that reads reasoning in chat's shape (thinking.go), not to an
	// OpenAI route; a messages or Responses client's reasoning is carried
	// instead of refused or dropped.
	Reasoning bool
}

// Request translates the body of a client of protocol client into the
// other wire's request. An *Error says what cannot be carried.
func Request(client wire.Protocol, body []byte, o Options) ([]byte, error) {
	switch client {
	case wire.ChatCompletions:
		return chatToMessages(body, o)
	case wire.Messages:
		return messagesToChat(body, o)
	}
	return nil, refuse("", "the %s API is not translated", client)
}

// Answer translates an upstream's whole 2xx answer (in the other wire)
// into the client's protocol; created is the chat completion's created
// time (unix seconds).
func Answer(client wire.Protocol, body []byte, created int64) ([]byte, error) {
	switch client {
	case wire.ChatCompletions:
		return messageToCompletion(body, created)
	case wire.Messages:
		return completionToMessage(body)
	}
	return nil, fmt.Errorf("translate: the %s API is not translated", client)
}

// ErrorAnswer translates an upstream's error answer (any status but 2xx,
// in the other wire's envelope, or not one at all) into the client's
// envelope with the same status: the message is kept, and the upstream's
// error type becomes OpenAI's code.
func ErrorAnswer(client wire.Protocol, status int, body []byte) []byte {
	msg, typ := upstreamError(body)
	if msg == "" {
		msg = fmt.Sprintf("the upstream answered %d", status)
	}
	return errorEnvelope(client, status, typ, msg)
}

// errorEnvelope is an error in client's envelope: OpenAI's with typ as its
// code, or Anthropic's with the type its status has.
func errorEnvelope(client wire.Protocol, status int, typ, msg string) []byte {
	if client == wire.Messages {
		return wire.ErrorBody(wire.Messages, status, "", msg)
	}
	var code *string
	if typ != "" {
		code = &typ
	}
	return mustJSON(map[string]any{"error": map[string]any{
		"message": msg, "type": openAIType(status), "param": nil, "code": code}})
}

// openAIType is OpenAI's error type for status.
func openAIType(status int) string {
	var env struct {
		Error struct {
			Type string `json:"type"`
		} `json:"error"`
	}
	_ = json.Unmarshal(wire.ErrorBody(wire.ChatCompletions, status, "", "x"), &env)
	return env.Error.Type
}

// upstreamError reads the message and type (Anthropic's error.type, or
// OpenAI's error.code, else error.type) of an error body in either
// envelope; a body in neither gives its first 512 bytes as the message.
func upstreamError(body []byte) (msg, typ string) {
	var env struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && len(env.Error) > 0 {
		var e struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		}
		if json.Unmarshal(env.Error, &e) == nil {
			typ = e.Type
			if c, ok := e.Code.(string); ok && c != "" {
				typ = c
			}
			return e.Message, typ
		}
		var s string
		if json.Unmarshal(env.Error, &s) == nil {
			return s, ""
		}
	}
	b := bytes.TrimSpace(body)
	if len(b) > 512 {
		b = b[:512]
	}
	return string(bytes.ToValidUTF8(b, []byte("\uFFFD"))), ""
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only values this package builds
	}
	return b
}

// strOrNull is s as a JSON string, or nil for "".
func strOrNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// object decodes body as a JSON object into members, refusing what is not
// one.
func object(body []byte, field string) (map[string]json.RawMessage, *Error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil || m == nil {
		return nil, refuse(field, "want a JSON object")
	}
	return m, nil
}

// decode decodes raw into v, refusing it as field when it has the wrong
// shape.
func decode(raw json.RawMessage, v any, field, want string) *Error {
	if err := json.Unmarshal(raw, v); err != nil {
		return refuse(field, "want %s", want)
	}
	return nil
}

// requestMembers decodes a client's request body as its members, refusing
// (with refusal) a member the other wire neither carries nor may drop, and
// sets *model to the model the upstream is asked for: o.Model, else the
// client's.
func requestMembers(body []byte, o Options, model *string, carried, dropped map[string]bool, refusal string) (map[string]json.RawMessage, *Error) {
	m, e := object(body, "")
	if e != nil {
		return nil, e
	}
	for k := range m {
		if !carried[k] && !dropped[k] {
			return nil, refuse(k, "%s", refusal)
		}
	}
	if e := decode(m["model"], model, "model", "a string"); e != nil && !isNull(m["model"]) {
		return nil, e
	}
	if o.Model != "" {
		*model = o.Model
	}
	return m, nil
}

// number is member k of m as it stands when it is a number, nil when it is
// absent or null.
func number(m map[string]json.RawMessage, k string) (json.RawMessage, *Error) {
	raw := m[k]
	if isNull(raw) {
		return nil, nil
	}
	var f float64
	if e := decode(raw, &f, k, "a number"); e != nil {
		return nil, e
	}
	return raw, nil
}
