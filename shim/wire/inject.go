package wire

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/caduceus-dev/caduceus/contract"
)

// Inject returns body with text added where DESIGN §7 places shimmed
// context: chat completions get a system message and responses a developer
// message right before the last user message; Anthropic messages get a text
// block at the start of the last user message (after any tool_result blocks,
// which the API requires first). Every other byte of body is unchanged.
// body must be a request Parse accepted.
func Inject(p Protocol, body []byte, text string) ([]byte, error) {
	top, err := objectMembers(body, span{0, len(body)})
	if err != nil {
		return nil, err
	}
	s, repl, err := injection(p, body, top, text)
	if err != nil {
		return nil, err
	}
	return splice(body, s, repl), nil
}

// injection is Inject's edit of body, whose top-level members are top: the
// span it replaces and what replaces it.
func injection(p Protocol, body []byte, top []member, text string) (span, []byte, error) {
	var none span
	quoted := quote(text)
	switch p {
	case ChatCompletions:
		msgs, ok := find(top, "messages")
		if !ok {
			return none, nil, fmt.Errorf("wire: field messages is required")
		}
		ins := append(append([]byte(`{"role":"system","content":`), quoted...), '}')
		return insertBeforeLastUser(body, msgs, ins, func(el []byte) bool { return roleOf(el) == "user" })
	case Responses:
		in, ok := find(top, "input")
		if !ok {
			return none, nil, fmt.Errorf("wire: field input is required")
		}
		if body[in.Start] == '"' {
			var b bytes.Buffer
			b.WriteString(`[{"role":"developer","content":`)
			b.Write(quoted)
			b.WriteString(`},{"role":"user","content":`)
			b.Write(body[in.Start:in.End])
			b.WriteString(`}]`)
			return in, b.Bytes(), nil
		}
		ins := append(append([]byte(`{"type":"message","role":"developer","content":`), quoted...), '}')
		return insertBeforeLastUser(body, in, ins, isResponsesUserMessage)
	case Messages:
		msgs, ok := find(top, "messages")
		if !ok {
			return none, nil, fmt.Errorf("wire: field messages is required")
		}
		els, err := arrayElements(body, msgs)
		if err != nil {
			return none, nil, err
		}
		block := append(append([]byte(`{"type":"text","text":`), quoted...), '}')
		for i := len(els) - 1; i >= 0; i-- {
			if roleOf(body[els[i].Start:els[i].End]) != "user" {
				continue
			}
			ms, err := objectMembers(body, els[i])
			if err != nil {
				return none, nil, err
			}
			content, ok := find(ms, "content")
			if !ok {
				return none, nil, fmt.Errorf("wire: messages[%d].content is required", i)
			}
			if body[content.Start] == '"' {
				var b bytes.Buffer
				b.WriteString(`[`)
				b.Write(block)
				b.WriteString(`,{"type":"text","text":`)
				b.Write(body[content.Start:content.End])
				b.WriteString(`}]`)
				return content, b.Bytes(), nil
			}
			parts, err := arrayElements(body, content)
			if err != nil {
				return none, nil, fmt.Errorf("wire: messages[%d].content must be a string or an array", i)
			}
			at := 0
			for at < len(parts) && typeOf(body[parts[at].Start:parts[at].End]) == "tool_result" {
				at++
			}
			if at < len(parts) {
				return span{parts[at].Start, parts[at].Start}, append(block, ','), nil
			}
			if len(parts) == 0 {
				at := bytes.IndexByte(body[content.Start:], '[') + content.Start + 1
				return span{at, at}, block, nil
			}
			end := parts[len(parts)-1].End
			return span{end, end}, append([]byte{','}, block...), nil
		}
		return none, nil, fmt.Errorf("wire: no user message to carry the context")
	}
	return none, nil, fmt.Errorf("wire: unknown protocol %q", p)
}

// insertBeforeLastUser inserts el before the last element of the array at
// arr that isUser accepts, or appends it when there is none.
func insertBeforeLastUser(body []byte, arr span, el []byte, isUser func([]byte) bool) (span, []byte, error) {
	els, err := arrayElements(body, arr)
	if err != nil {
		return span{}, nil, err
	}
	for i := len(els) - 1; i >= 0; i-- {
		if isUser(body[els[i].Start:els[i].End]) {
			return span{els[i].Start, els[i].Start}, append(el, ','), nil
		}
	}
	if len(els) == 0 {
		open := bytes.IndexByte(body[arr.Start:], '[') + arr.Start
		return span{open + 1, open + 1}, el, nil
	}
	end := els[len(els)-1].End
	return span{end, end}, append([]byte{','}, el...), nil
}

// memberString returns the string value of key in the object el, without
// decoding the rest of it.
func memberString(el []byte, key string) string {
	ms, err := objectMembers(el, span{0, len(el)})
	if err != nil {
		return ""
	}
	v, ok := find(ms, key)
	if !ok || el[v.Start] != '"' {
		return ""
	}
	raw := el[v.Start:v.End]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func roleOf(el []byte) string { return memberString(el, "role") }

func typeOf(el []byte) string { return memberString(el, "type") }

func isResponsesUserMessage(el []byte) bool {
	t := typeOf(el)
	return (t == "" || t == "message") && roleOf(el) == "user"
}

// quote encodes s as a JSON string without HTML escaping.
func quote(s string) []byte { return contract.AppendJSONString(nil, s) }
