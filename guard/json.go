package guard

import (
	"bytes"
	"encoding/json"
	"errors"
)

var errJSON = errors.New("guard: malformed json")

// Skip names the object members whose string values a JSON walk leaves
// alone: identifiers, enums and opaque payloads a provider checks (an
// Anthropic thinking block's signature, a reasoning item's
// encrypted_content, base64 image and file data).
var Skip = map[string]bool{
	"model": true, "role": true, "type": true, "id": true, "object": true,
	"tool_use_id": true, "tool_call_id": true, "call_id": true, "item_id": true,
	"signature": true, "encrypted_content": true, "data": true, "file_data": true,
	"media_type": true, "finish_reason": true, "stop_reason": true, "status": true,
	"previous_response_id": true, "system_fingerprint": true, "detail": true,
	"file_id": true, "cache_control": true, "reasoning_effort": true,
}

// RedactJSON runs r over every string value of the JSON document doc
// (member names and the values of Skip's members excepted) and returns doc
// with each string r changed re-encoded in place, every other byte as it
// was; changed is false (and out is doc) when r changed nothing. A doc
// that is not JSON is redacted as plain text, so nothing escapes a
// malformed answer.
func RedactJSON(doc []byte, r *Redactor) (out []byte, changed bool) {
	if r.want == 0 {
		return doc, false
	}
	w := jsonWalk{doc: doc, r: r}
	if _, err := w.value(0, ""); err != nil {
		s, ch := r.Redact(string(doc))
		if !ch {
			return doc, false
		}
		return []byte(s), true
	}
	if w.out == nil {
		return doc, false
	}
	w.out = append(w.out, doc[w.last:]...)
	return w.out, true
}

type jsonWalk struct {
	doc  []byte
	r    *Redactor
	out  []byte // nil until the first change
	last int    // doc[:last] is in out
}

func (w *jsonWalk) space(i int) int {
	for i < len(w.doc) {
		switch w.doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value walks the value at doc[i:], the value of member key ("" in an
// array or at the top), and returns the index past it.
func (w *jsonWalk) value(i int, key string) (int, error) {
	i = w.space(i)
	if i >= len(w.doc) {
		return 0, errJSON
	}
	switch w.doc[i] {
	case '{':
		return w.object(i + 1)
	case '[':
		return w.array(i+1, key)
	case '"':
		end, err := w.str(i)
		if err != nil {
			return 0, err
		}
		if !Skip[key] {
			w.redact(i, end)
		}
		return end, nil
	default:
		for i < len(w.doc) {
			switch w.doc[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, nil
			}
			i++
		}
		return i, nil
	}
}

func (w *jsonWalk) object(i int) (int, error) {
	i = w.space(i)
	if i < len(w.doc) && w.doc[i] == '}' {
		return i + 1, nil
	}
	for {
		i = w.space(i)
		if i >= len(w.doc) || w.doc[i] != '"' {
			return 0, errJSON
		}
		end, err := w.str(i)
		if err != nil {
			return 0, err
		}
		key, ok := decode(w.doc[i:end])
		if !ok {
			return 0, errJSON
		}
		i = w.space(end)
		if i >= len(w.doc) || w.doc[i] != ':' {
			return 0, errJSON
		}
		if i, err = w.value(i+1, key); err != nil {
			return 0, err
		}
		i = w.space(i)
		if i >= len(w.doc) {
			return 0, errJSON
		}
		switch w.doc[i] {
		case ',':
			i++
		case '}':
			return i + 1, nil
		default:
			return 0, errJSON
		}
	}
}

// array walks an array's items; an array of strings keeps its member's
// key, so ["a", "b"] under a skipped member is skipped too.
func (w *jsonWalk) array(i int, key string) (int, error) {
	i = w.space(i)
	if i < len(w.doc) && w.doc[i] == ']' {
		return i + 1, nil
	}
	for {
		var err error
		if i, err = w.value(i, key); err != nil {
			return 0, err
		}
		i = w.space(i)
		if i >= len(w.doc) {
			return 0, errJSON
		}
		switch w.doc[i] {
		case ',':
			i++
		case ']':
			return i + 1, nil
		default:
			return 0, errJSON
		}
	}
}

// str returns the index past the string starting at doc[i].
func (w *jsonWalk) str(i int) (int, error) {
	i++
	for i < len(w.doc) {
		j := bytes.IndexAny(w.doc[i:], "\"\\")
		if j < 0 {
			return 0, errJSON
		}
		i += j
		if w.doc[i] == '"' {
			return i + 1, nil
		}
		i += 2 // an escape
	}
	return 0, errJSON
}

// decode is the text of the JSON string s (quotes included).
func decode(s []byte) (string, bool) {
	if bytes.IndexByte(s, '\\') < 0 {
		return string(s[1 : len(s)-1]), true
	}
	var out string
	if json.Unmarshal(s, &out) != nil {
		return "", false
	}
	return out, true
}

func (w *jsonWalk) redact(start, end int) {
	text, ok := decode(w.doc[start:end])
	if !ok {
		text = string(w.doc[start+1 : end-1])
	}
	if isDataURL(text) {
		return // an inline image or file: bytes, not text
	}
	red, changed := w.r.Redact(text)
	if !changed {
		return
	}
	if w.out == nil {
		w.out = make([]byte, 0, len(w.doc)+64)
	}
	w.out = append(w.out, w.doc[w.last:start]...)
	w.out = appendString(w.out, red)
	w.last = end
}

// appendString appends s as a JSON string, escaping what JSON must and
// nothing else (no HTML escapes).
func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// isDataURL reports whether s is a base64 data: URL (an inline image or
// file).
func isDataURL(s string) bool {
	if len(s) < 5 || s[:5] != "data:" {
		return false
	}
	head := s[:min(len(s), 200)]
	return bytes.Contains([]byte(head), []byte(";base64,"))
}
