package wire

import (
	"encoding/json"
	"strings"

	"github.com/caduceus-dev/caduceus/internal/swar"
)

// The fast path below reads the common request in one validating pass
// plus span lookups, instead of encoding/json's validation and reflective
// decoding of the whole body. It gives up (ok false) on anything it is not
// sure to read exactly as encoding/json would — a null, a value of another
// type, a key that differs from a field name only in case, non-ASCII keys —
// and the caller then takes the encoding/json path, which also writes the
// error messages. FuzzFastParse checks that both paths agree.

// strPlain marks the bytes a JSON string may hold without a closer look.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// maxFastDepth bounds the validator's recursion; deeper input takes the
// encoding/json path.
const maxFastDepth = 512

// validJSON reports whether b is one JSON value (RFC 8259, as json.Valid
// accepts it) with surrounding space; false may also mean "not sure".
func validJSON(b []byte) bool {
	i, ok := validValue(b, skipSpace(b, 0), 0)
	return ok && skipSpace(b, i) == len(b)
}

func validValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return validString(b, i)
	case c == '{':
		if depth >= maxFastDepth {
			return 0, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i = skipSpace(b, i); i >= len(b) || b[i] != '"' {
				return 0, false
			}
			var ok bool
			if i, ok = validString(b, i); !ok {
				return 0, false
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return 0, false
			}
			if i, ok = validValue(b, skipSpace(b, i+1), depth+1); !ok {
				return 0, false
			}
			var done bool
			if i, done, ok = nextItem(b, i, len(b), '}'); done || !ok {
				return i, ok
			}
		}
	case c == '[':
		if depth >= maxFastDepth {
			return 0, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok, done bool
			if i, ok = validValue(b, skipSpace(b, i), depth+1); !ok {
				return 0, false
			}
			if i, done, ok = nextItem(b, i, len(b), ']'); done || !ok {
				return i, ok
			}
		}
	case c == 't':
		return validWord(b, i, "true")
	case c == 'f':
		return validWord(b, i, "false")
	case c == 'n':
		return validWord(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		return validNumber(b, i)
	}
	return 0, false
}

func validWord(b []byte, i int, w string) (int, bool) {
	if len(b)-i >= len(w) && string(b[i:i+len(w)]) == w {
		return i + len(w), true
	}
	return 0, false
}

func validString(b []byte, i int) (int, bool) {
	i++
	for i < len(b) {
		for i+8 <= len(b) && !swar.Special(swar.Load(b[i:])) {
			i += 8
		}
		for i < len(b) && strPlain[b[i]] {
			i++
		}
		if i >= len(b) {
			return 0, false
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return 0, false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return 0, false
				}
				for _, h := range b[i+2 : i+6] {
					if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
						return 0, false
					}
				}
				i += 6
			default:
				return 0, false
			}
		default: // a control byte
			return 0, false
		}
	}
	return 0, false
}

func validNumber(b []byte, i int) (int, bool) {
	digits := func(i int) int {
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		return i
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(i + 1)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(i + 1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

// fastKeys checks an object's keys: each must be one of fields or differ
// from every one of them beyond ASCII case (encoding/json would match it
// case-insensitively), be ASCII (encoding/json folds some non-ASCII
// letters onto ASCII ones), and occur once (encoding/json decodes a
// repeated field into what the first occurrence left).
func fastKeys(ms []member, fields ...string) bool {
	for i, m := range ms {
		for _, o := range ms[:i] {
			if o.Key == m.Key {
				return false
			}
		}
		for i := 0; i < len(m.Key); i++ {
			if m.Key[i] >= 0x80 {
				return false
			}
		}
		for _, f := range fields {
			if m.Key != f && strings.EqualFold(m.Key, f) {
				return false
			}
		}
	}
	return true
}

// fastString decodes the JSON string at s; ok is false for any other value.
func fastString(b []byte, s span) (string, bool) {
	raw := b[s.Start:s.End]
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if v, ok := plainString(raw); ok {
		return v, true
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}

// fastBool reads true or false at s.
func fastBool(b []byte, s span) (bool, bool) {
	switch string(b[s.Start:s.End]) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// parseChatFast fills in as json.Unmarshal(body, in) would, or reports
// that it cannot be sure. checked says body passed contract.CheckJSON,
// whose rule is stricter than validJSON's: the validation pass is skipped.
func parseChatFast(body []byte, in *chatIn, checked bool) bool {
	if !checked && !validJSON(body) {
		return false
	}
	top, err := objectMembers(body, span{0, len(body)})
	return err == nil && chatFromMembers(body, top, in)
}

// chatFromMembers is parseChatFast of a body known to be valid JSON whose
// top-level members are top.
func chatFromMembers(body []byte, top []member, in *chatIn) bool {
	if !fastKeys(top, "model", "stream", "messages", "tools") {
		return false
	}
	for _, m := range top {
		var ok bool
		switch m.Key {
		case "model":
			in.Model, ok = fastString(body, m.Value)
		case "stream":
			in.Stream, ok = fastBool(body, m.Value)
		case "messages":
			ok = chatMessagesFast(body, m.Value, in)
		case "tools":
			in.Tools = nil
			ok = body[m.Value.Start] == '[' && json.Unmarshal(body[m.Value.Start:m.Value.End], &in.Tools) == nil
		default:
			ok = true
		}
		if !ok {
			return false
		}
	}
	return true
}

func chatMessagesFast(body []byte, s span, in *chatIn) bool {
	if body[s.Start] != '[' {
		return false
	}
	els, err := arrayElements(body, s)
	if err != nil {
		return false
	}
	in.Messages = make([]chatInMessage, len(els))
	for i, el := range els {
		if body[el.Start] != '{' {
			return false
		}
		ms, err := objectMembers(body, el)
		if err != nil || !fastKeys(ms, "role", "content", "tool_calls") {
			return false
		}
		m := &in.Messages[i]
		for _, f := range ms {
			ok := true
			switch f.Key {
			case "role":
				m.Role, ok = fastString(body, f.Value)
			case "content":
				m.Content = json.RawMessage(body[f.Value.Start:f.Value.End:f.Value.End])
			case "tool_calls":
				m.ToolCalls = nil
				ok = body[f.Value.Start] == '[' && json.Unmarshal(body[f.Value.Start:f.Value.End], &m.ToolCalls) == nil
			}
			if !ok {
				return false
			}
		}
	}
	return true
}
