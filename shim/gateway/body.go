package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// withoutNullUsage drops a chat completions chunk's "usage": null member,
// which an upstream asked for include_usage writes into every chunk and a
// client that did not ask never sees from the provider; every other byte is
// kept. ok is false when the chunk has no such member (data returned as is).
func withoutNullUsage(data []byte) (out []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return data, false
	}
	open := int(dec.InputOffset()) // just after '{'
	prevEnd := open
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return data, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return data, false
		}
		end := int(dec.InputOffset())
		if k, _ := t.(string); k != "usage" || string(raw) != "null" {
			prevEnd = end
			continue
		}
		if prevEnd != open { // not the first member: drop from the comma before it
			return splice(data, prevEnd, end, nil), true
		}
		// The first member: drop through the comma after it, if any.
		rest := bytes.TrimLeft(data[end:], " \t\r\n")
		if len(rest) > 0 && rest[0] == ',' {
			rest = bytes.TrimLeft(rest[1:], " \t\r\n")
		}
		return splice(data, open, len(data)-len(rest), nil), true
	}
	return data, false
}

// rawUsage is the usage object of the three protocols.
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

// meter collects the usage an answer reports: the usage field of a JSON
// answer, or of the stream's events (a chat stream's final usage chunk, a
// responses stream's response.completed, an Anthropic stream's
// message_start and message_delta — counts only grow, so the largest seen
// of each is the total).
type meter struct {
	p    wire.Protocol
	u    upstream.Usage
	seen bool
	// final: the answer's whole usage came (a JSON answer's, a chat
	// stream's usage chunk, a responses stream's terminal response, an
	// Anthropic message_delta), not only message_start's early count.
	final bool
	// delta counts the bytes of generated text a stream's events carried
	// (deltaBytes).
	delta int64
}

// bytesPerToken is what an estimate takes a token to be: about what the
// providers' tokenizers give for English text and code (CJK runs nearer 3
// bytes a token, prose in English nearer 4).
const bytesPerToken = 3

// estimate is the usage of an answer cut short before its usage came: the
// input the upstream reported (message_start), else the request's bytes
// at bytesPerToken, and the output it reported or the deltas read at
// bytesPerToken, whichever is more. Reasoning a provider does not stream
// is not seen, so it is not counted.
func (m *meter) estimate(requestBytes int) upstream.Usage {
	u := m.u
	if !m.seen {
		u.Input = (int64(requestBytes) + bytesPerToken - 1) / bytesPerToken
	}
	u.Output = max(u.Output, (m.delta+bytesPerToken-1)/bytesPerToken)
	return u
}

// deltaKeys are the members whose string values carry generated text in
// a protocol's stream events: chat's delta content, tool call arguments
// and refusal; the Responses API's *.delta events; Anthropic's text,
// thinking and tool input deltas.
var deltaKeys = map[wire.Protocol][][]byte{
	wire.ChatCompletions: {[]byte(`"content":"`), []byte(`"arguments":"`), []byte(`"refusal":"`)},
	wire.Responses:       {[]byte(`"delta":"`)},
	wire.Messages:        {[]byte(`"text":"`), []byte(`"thinking":"`), []byte(`"partial_json":"`)},
}

// deltaBytes is how many bytes of generated text one stream event's data
// carries: the lengths of the string values of p's deltaKeys, an escape
// counted as one byte. It scans, never parses: it runs on every event.
func deltaBytes(p wire.Protocol, data []byte) int64 {
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

// observe reads one JSON document (an answer or an event's data) and
// reports whether it is a chat stream's usage-only chunk (no choices).
// Only the usage object is decoded: the document around it (a whole
// answer, a responses stream's terminal response) is scanned.
func (m *meter) observe(data []byte) (usageOnly bool) {
	if !bytes.Contains(data, []byte(`"usage"`)) {
		return false
	}
	top, ok := wire.Members(data, "usage", "response", "message", "choices")
	if !ok {
		return false
	}
	raw, final := present(top[0]), true // the whole usage: an answer's, a chunk's, a message_delta's
	if raw == nil {
		for i, parent := range top[1:3] { // a responses stream's response, Anthropic's message_start
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

// readAll reads at most max bytes of r.
func readAll(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > max {
		return b, errors.New("gateway: upstream answer too large")
	}
	return b, nil
}

// responseID is the id of a Responses API answer in data: a JSON answer's
// own id ({"id":"resp_...","object":"response",...}), or the response.id
// of a stream event (response.created carries it first). "" when data
// names none.
func responseID(data []byte) string {
	if !bytes.Contains(data, []byte(`"resp`)) {
		return ""
	}
	var d struct {
		ID       string `json:"id"`
		Object   string `json:"object"`
		Response *struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &d) != nil {
		return ""
	}
	if d.Response != nil {
		return d.Response.ID
	}
	if d.Object == "response" {
		return d.ID
	}
	return ""
}

// splice is b with b[start:end] replaced by repl.
func splice(b []byte, start, end int, repl []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(repl))
	out = append(out, b[:start]...)
	out = append(out, repl...)
	return append(out, b[end:]...)
}
