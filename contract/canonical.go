package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// CanonicalJSON returns v as canonical JSON: object keys sorted bytewise, no
// insignificant whitespace, numbers kept as written (integers and decimals are
// not reformatted), strings escaped as encoding/json does without HTML
// escaping. Two values that mean the same JSON document give the same bytes,
// which is what idempotency keys and the audit hash chain compare.
func CanonicalJSON(v any) ([]byte, error) {
	var raw []byte
	switch x := v.(type) {
	case json.RawMessage:
		raw = x
	case []byte:
		raw = x
	default:
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return nil, fmt.Errorf("contract: canonical json: %w", err)
		}
	}
	c := canonicalizer{scanner: scanner{in: raw}}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	c.space()
	if err := c.value(&buf, 0); err != nil {
		return nil, err
	}
	c.space()
	if c.pos != len(c.in) {
		return nil, Invalidf("bad_json", "not valid JSON: trailing data after the value at offset %d", c.pos)
	}
	return buf.Bytes(), nil
}

// canonicalizer rewrites JSON into canonical form in one pass, without
// building a tree of maps: objects collect their members' canonical bytes
// and emit them sorted by key. Strings and numbers keep the meaning
// encoding/json gives them (a string holding an escape or a non-ASCII byte
// is decoded by encoding/json, so invalid UTF-8 becomes U+FFFD exactly as
// json.Unmarshal does; numbers are copied as written after a grammar
// check). Duplicate keys keep the last value, as a map would.
type canonicalizer struct {
	scanner
	scratch []byte // see object
}

// maxDepth bounds the nesting CanonicalJSON accepts: MaxRecordDepth, the
// input rule's limit plus room for the record that wraps an input.
const maxDepth = MaxRecordDepth

func (c *canonicalizer) value(out *bytes.Buffer, depth int) error {
	if depth > maxDepth {
		return c.bad("nesting too deep")
	}
	if c.pos >= len(c.in) {
		return c.bad("unexpected end of input")
	}
	switch ch := c.in[c.pos]; {
	case ch == '{':
		return c.object(out, depth)
	case ch == '[':
		return c.array(out, depth)
	case ch == '"':
		key, err := c.stringBytes()
		if err != nil {
			return err
		}
		writeStringBytes(out, key)
		return nil
	case ch == '-' || ('0' <= ch && ch <= '9'):
		// A number is copied as written, after its grammar is checked.
		start := c.pos
		if err := c.skipNumber(); err != nil {
			return err
		}
		out.Write(c.in[start:c.pos])
		return nil
	default:
		if lit := c.skipLiteral(); lit != "" {
			out.WriteString(lit)
			return nil
		}
		return c.bad(fmt.Sprintf("unexpected character %q", ch))
	}
}

// member is an object member whose canonical value was written to the
// output at [start, end) before the members are sorted. key is its
// decoded name: for a name without escapes, a slice of the input.
type member struct {
	key        []byte
	start, end int
}

func compareMembers(a, b member) int { return bytes.Compare(a.key, b.key) }

func (c *canonicalizer) object(out *bytes.Buffer, depth int) error {
	if c.open('}') {
		out.WriteString("{}")
		return nil
	}
	// Values are written to out as they are read, then the object is
	// re-emitted with its members sorted: one copy per object, not one
	// buffer per member.
	objStart := out.Len()
	var small [16]member
	members := small[:0]
	for {
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.bad("expected a string key")
		}
		key, err := c.stringBytes()
		if err != nil {
			return err
		}
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.bad("expected ':' after an object key")
		}
		c.pos++
		c.space()
		start := out.Len()
		if err := c.value(out, depth+1); err != nil {
			return err
		}
		members = append(members, member{key, start - objStart, out.Len() - objStart})
		done, ok := c.next('}')
		if !ok {
			return c.badNext('}', " in an object")
		}
		if done {
			break
		}
	}
	// Objects encoded from Go structs and maps mostly arrive sorted.
	if !slices.IsSortedFunc(members, compareMembers) {
		// Stable: among duplicates the last one is last, and wins.
		slices.SortStableFunc(members, compareMembers)
	}
	// The values move through a scratch buffer the canonicalizer reuses:
	// nested objects have finished with it before their parent starts.
	c.scratch = append(c.scratch[:0], out.Bytes()[objStart:]...)
	vals := c.scratch
	out.Truncate(objStart)
	out.WriteByte('{')
	first := true
	for i, m := range members {
		if i+1 < len(members) && bytes.Equal(members[i+1].key, m.key) {
			continue
		}
		if !first {
			out.WriteByte(',')
		}
		first = false
		writeStringBytes(out, m.key)
		out.WriteByte(':')
		out.Write(vals[m.start:m.end])
	}
	out.WriteByte('}')
	return nil
}

// stringBytes reads a string (an object key or a value) at c.pos: a slice of the
// input when it is plain printable ASCII, else its decoded value.
func (c *canonicalizer) stringBytes() ([]byte, error) {
	start := c.pos + 1
	for i := start; i < len(c.in); i++ {
		ch := c.in[i]
		if ch == '"' {
			c.pos = i + 1
			return c.in[start:i], nil
		}
		if ch < 0x20 || ch >= 0x7f || ch == '\\' {
			break
		}
	}
	s, err := c.str()
	return []byte(s), err
}

func (c *canonicalizer) array(out *bytes.Buffer, depth int) error {
	out.WriteByte('[')
	if c.open(']') {
		out.WriteByte(']')
		return nil
	}
	for n := 0; ; n++ {
		if n > 0 {
			out.WriteByte(',')
		}
		c.space()
		if err := c.value(out, depth+1); err != nil {
			return err
		}
		done, ok := c.next(']')
		if !ok {
			return c.badNext(']', " in an array")
		}
		if done {
			out.WriteByte(']')
			return nil
		}
	}
}

// str reads the JSON string at c.pos and returns its value.
func (c *canonicalizer) str() (string, error) {
	start := c.pos
	c.pos++ // opening quote
	plain := true
	for c.pos < len(c.in) {
		ch := c.in[c.pos]
		switch {
		case ch == '"':
			c.pos++
			if plain {
				return string(c.in[start+1 : c.pos-1]), nil
			}
			var s string
			if err := json.Unmarshal(c.in[start:c.pos], &s); err != nil {
				return "", Invalidf("bad_json", "not valid JSON: bad string at offset %d", start)
			}
			return s, nil
		case ch == '\\':
			plain = false
			c.pos += 2
			continue
		case ch < 0x20:
			return "", c.bad("control character in a string")
		case ch >= 0x80:
			plain = false
		}
		c.pos++
	}
	return "", Invalidf("bad_json", "not valid JSON: unterminated string at offset %d", start)
}

func writeStringBytes(buf *bytes.Buffer, s []byte) {
	if plainBytes(s) {
		buf.WriteByte('"')
		buf.Write(s)
		buf.WriteByte('"')
		return
	}
	writeString(buf, string(s))
}

func plainBytes(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func writeString(buf *bytes.Buffer, s string) {
	if plainString(s) {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return
	}
	buf.Write(AppendJSONString(buf.AvailableBuffer(), s))
}

// plainString reports whether s encodes as itself between quotes: printable
// ASCII without '"' or '\\'. Anything else takes AppendJSONString, which
// also escapes U+2028, U+2029 and invalid UTF-8.
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// SHA256 returns the schema form "sha256:<hex>" of the digest of b.
func SHA256(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// WriteJSONString writes s as a JSON string exactly as CanonicalJSON does.
func WriteJSONString(buf *bytes.Buffer, s string) { writeString(buf, s) }
