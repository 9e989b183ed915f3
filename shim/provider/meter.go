package provider

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// sseEvents reads a text/event-stream answer.
type sseEvents struct{ r *wire.SSEReader }

func (s sseEvents) Next() (wire.SSE, error) { return s.r.Next() }

// SSE reads body as server-sent events when h says it is a stream (the
// Events of every kind whose streams are text/event-stream).
func SSE(h http.Header, body io.Reader) (Events, bool) {
	if !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		return nil, false
	}
	return sseEvents{wire.NewSSEReader(body)}, true
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// rawUsage is the usage object of the three wires.
type rawUsage struct {
	PromptTokens             int64            `json:"prompt_tokens"`
	CompletionTokens         int64            `json:"completion_tokens"`
	PromptTokensDetails      cachedDetails    `json:"prompt_tokens_details"`
	CompletionTokensDetails  reasoningDetails `json:"completion_tokens_details"`
	OutputTokensDetails      reasoningDetails `json:"output_tokens_details"`
	InputTokens              int64            `json:"input_tokens"`
	OutputTokens             int64            `json:"output_tokens"`
	InputTokensDetails       cachedDetails    `json:"input_tokens_details"`
	CacheReadInputTokens     int64            `json:"cache_read_input_tokens"`
	CacheCreationInputTokens int64            `json:"cache_creation_input_tokens"`
}

// cachedDetails is OpenAI's prompt_tokens_details / input_tokens_details
// (absent or null: zero, as encoding/json leaves a struct on null).
type cachedDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

// reasoningDetails is OpenAI's completion_tokens_details /
// output_tokens_details (absent or null: zero).
type reasoningDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

// usage is r as billed: OpenAI counts cached input inside its input total,
// Anthropic beside it.
func (r rawUsage) usage(p wire.Protocol) upstream.Usage {
	switch p {
	case wire.ChatCompletions, wire.Embeddings:
		cached := r.PromptTokensDetails.CachedTokens
		return upstream.Usage{Input: r.PromptTokens - cached, CachedInput: cached, Output: r.CompletionTokens, Reasoning: r.CompletionTokensDetails.ReasoningTokens}
	case wire.Responses:
		cached := r.InputTokensDetails.CachedTokens
		return upstream.Usage{Input: r.InputTokens - cached, CachedInput: cached, Output: r.OutputTokens, Reasoning: r.OutputTokensDetails.ReasoningTokens}
	default:
		return upstream.Usage{Input: r.InputTokens, CachedInput: r.CacheReadInputTokens, CacheWrite: r.CacheCreationInputTokens, Output: r.OutputTokens}
	}
}

// usageMeter is the Meter of the OpenAI and Anthropic wires: it collects
// the usage field of a JSON answer, or of the stream's events (a chat
// stream's final usage chunk, a Responses stream's response.completed, an
// Anthropic stream's message_start and message_delta — counts only grow,
// so the largest seen of each is the total).
type usageMeter struct {
	p    wire.Protocol
	u    upstream.Usage
	seen bool
	// final: the answer's whole usage came (a JSON answer's, a chat
	// stream's usage chunk, a Responses stream's terminal response, an
	// Anthropic message_delta), not only message_start's early count.
	final bool
	// delta counts the bytes of generated text a stream's events carried
	// (DeltaBytes).
	delta int64
}

func (m *usageMeter) Usage() (upstream.Usage, bool, bool) { return m.u, m.seen, m.final }

func (m *usageMeter) Delta(data []byte) { m.delta += DeltaBytes(m.p, data) }

// BytesPerToken is what an estimate takes a token to be: about what the
// providers' tokenizers give for English text and code (CJK runs nearer 3
// bytes a token, prose in English nearer 4).
const BytesPerToken = 3

// Estimate is the usage of an answer cut short before its usage came: the
// input the upstream reported (message_start), else the request's bytes
// at BytesPerToken, and the output it reported or the deltas read at
// BytesPerToken, whichever is more. Reasoning a provider does not stream
// is not seen, so it is not counted.
func (m *usageMeter) Estimate(requestBytes int) upstream.Usage {
	u := m.u
	if !m.seen {
		u.Input = (int64(requestBytes) + BytesPerToken - 1) / BytesPerToken
	}
	u.Output = max(u.Output, (m.delta+BytesPerToken-1)/BytesPerToken)
	return u
}

// deltaKeys are the members whose string values carry generated text in
// a wire's stream events: chat's delta content, tool call arguments and
// refusal; the Responses API's *.delta events; Anthropic's text, thinking
// and tool input deltas.
var deltaKeys = map[wire.Protocol][][]byte{
	wire.ChatCompletions: {[]byte(`"content":"`), []byte(`"arguments":"`), []byte(`"refusal":"`)},
	wire.Responses:       {[]byte(`"delta":"`)},
	wire.Messages:        {[]byte(`"text":"`), []byte(`"thinking":"`), []byte(`"partial_json":"`)},
}

// DeltaBytes is how many bytes of generated text one stream event's data
// carries: the lengths of the string values of p's deltaKeys, an escape
// counted as one byte. It scans, never parses: it runs on every event.
func DeltaBytes(p wire.Protocol, data []byte) int64 {
	var n int64
	for _, key := range deltaKeys[p] {
		for rest := data; ; {
			i := bytes.Index(rest, key)
			if i < 0 {
				break
			}
			rest = rest[i+len(key):]
			j := 0
			for j < len(rest) && rest[j] != '"' {
				if rest[j] == '\\' {
					j++
				}
				j++
				n++
			}
			rest = rest[min(j, len(rest)):]
		}
	}
	return n
}

// Observe reads one JSON document (an answer or an event's data) and
// reports whether it is a chat stream's usage-only chunk (no choices).
// Only the usage object is decoded: the document around it (a whole
// answer, a Responses stream's terminal response) is scanned.
func (m *usageMeter) Observe(data []byte) (usageOnly bool) {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return false
	}
	top, ok := wire.Members(data, "usage", "response", "message", "choices")
	if !ok {
		return false
	}
	raw, final := present(top[0]), true // the whole usage: an answer's, a chunk's, a message_delta's
	if raw == nil {
		for i, parent := range top[1:3] { // a Responses stream's response, Anthropic's message_start
			if parent = present(parent); parent == nil {
				continue
			}
			if u, ok := wire.Members(parent, "usage"); ok && present(u[0]) != nil {
				raw, final = u[0], i == 0
				break
			}
		}
	}
	if raw == nil {
		return false
	}
	var ru rawUsage
	if json.Unmarshal(raw, &ru) != nil {
		return false
	}
	m.final = m.final || final
	u := ru.usage(m.p)
	m.u.Input = max(m.u.Input, u.Input)
	m.u.CachedInput = max(m.u.CachedInput, u.CachedInput)
	m.u.Output = max(m.u.Output, u.Output)
	m.u.CacheWrite = max(m.u.CacheWrite, u.CacheWrite)
	m.u.Reasoning = max(m.u.Reasoning, u.Reasoning)
	m.seen = true
	return m.p == wire.ChatCompletions && present(top[0]) != nil && bytes.Equal(bytes.TrimSpace(top[3]), []byte("[]"))
}

// present is v, or nil when v is absent or JSON null.
func present(v []byte) []byte {
	if string(v) == "null" {
		return nil
	}
	return v
}
