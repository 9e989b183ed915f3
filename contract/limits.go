package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime"
	"strings"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/internal/swar"
)

// The input rule every edge shares (HTTP routes, MCP tool arguments, the
// CLI's files, the stores): a JSON document from outside is one value, valid
// UTF-8, no NUL character, no object with a key twice, and at most
// MaxJSONDepth arrays and objects deep. CheckJSON applies it before anything
// else reads the bytes, so a refusal names the problem and nothing is
// written.
const (
	// MaxJSONDepth is the deepest nesting of arrays and objects accepted
	// from outside.
	MaxJSONDepth = 256
	// MaxRecordDepth is the deepest nesting CanonicalJSON accepts: an
	// accepted input plus the few levels a stored record or audit payload
	// wraps around it. It is larger than MaxJSONDepth by RecordWrapDepth,
	// so a record of any accepted input can always be sealed.
	MaxRecordDepth = MaxJSONDepth + RecordWrapDepth
	// RecordWrapDepth is how many levels a record may add around an input.
	RecordWrapDepth = 64
)

// Codes of the input rule's refusals.
const (
	CodeBadUTF8          = "bad_utf8"
	CodeTooDeep          = "too_deep"
	CodeDuplicateKey     = "duplicate_key"
	CodeTrailingData     = "trailing_data"
	CodeNULCharacter     = "nul_character"
	CodeBadJSON          = "bad_json"
	CodeUnsupportedMedia = "unsupported_media_type"
)

// CheckJSON applies the input rule to b. It returns nil or an invalid
// *Error whose code is one of bad_utf8, too_deep, duplicate_key,
// trailing_data, nul_character or bad_json and whose message names the
// offset. It allocates only for objects with escaped keys or many members.
func CheckJSON(b []byte) error {
	if !utf8.Valid(b) {
		off := 0
		for off < len(b) {
			r, n := utf8.DecodeRune(b[off:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			off += n
		}
		return Invalidf(CodeBadUTF8, "the JSON is not valid UTF-8 (first bad byte at offset %d)", off)
	}
	c := checker{scanner{in: b}}
	c.space()
	if err := c.value(1); err != nil {
		return err
	}
	c.space()
	if c.pos != len(c.in) {
		return Invalidf(CodeTrailingData, "the JSON has data after its value at offset %d", c.pos)
	}
	return nil
}

// IsJSONMediaType reports whether a Content-Type header names JSON:
// application/json or any application/*+json, parameters allowed.
func IsJSONMediaType(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	return mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))
}

// checker applies the input rule in one pass over the bytes.
type checker struct{ scanner }

func (c *checker) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.bad("unexpected end of input")
	}
	switch ch := c.in[c.pos]; {
	case ch == '{' || ch == '[':
		if depth > MaxJSONDepth {
			return Invalidf(CodeTooDeep, "the JSON nests deeper than %d levels at offset %d", MaxJSONDepth, c.pos)
		}
		if ch == '{' {
			return c.object(depth)
		}
		return c.array(depth)
	case ch == '"':
		_, _, err := c.str()
		return err
	case ch == '-' || ('0' <= ch && ch <= '9'):
		return c.skipNumber()
	default:
		if c.skipLiteral() != "" {
			return nil
		}
		return c.bad(fmt.Sprintf("unexpected character %q", ch))
	}
}

func (c *checker) object(depth int) error {
	start := c.pos
	if c.open('}') {
		return nil
	}
	// Keys are compared as their raw bytes (unescaped keys point into the
	// input; only escaped ones are decoded), in a slice for small objects
	// and a map beyond 32 members.
	var small [16][]byte
	keys := small[:0]
	var many map[string]struct{}
	for {
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.bad("expected a string key")
		}
		key, escaped, err := c.str()
		if err != nil {
			return err
		}
		if escaped {
			var s string
			if err := json.Unmarshal(c.in[c.pos-len(key)-2:c.pos], &s); err != nil {
				return c.bad("bad key")
			}
			key = []byte(s)
		}
		dup := false
		if many != nil {
			_, dup = many[string(key)]
			many[string(key)] = struct{}{}
		} else {
			for _, k := range keys {
				if bytes.Equal(k, key) {
					dup = true
					break
				}
			}
			keys = append(keys, key)
			if len(keys) > 32 {
				many = make(map[string]struct{}, 2*len(keys))
				for _, k := range keys {
					many[string(k)] = struct{}{}
				}
			}
		}
		if dup {
			return Invalidf(CodeDuplicateKey, "the JSON object at offset %d has the key %q more than once", start, clipKey(string(key)))
		}
		c.space()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.bad("expected ':'")
		}
		c.pos++
		c.space()
		if err := c.value(depth + 1); err != nil {
			return err
		}
		done, ok := c.next('}')
		if !ok {
			return c.badNext('}', "")
		}
		if done {
			return nil
		}
	}
}

func clipKey(k string) string {
	if len(k) <= 64 {
		return k
	}
	n := 64
	for n > 0 && k[n]&0xC0 == 0x80 {
		n--
	}
	return k[:n] + "…"
}

func (c *checker) array(depth int) error {
	if c.open(']') {
		return nil
	}
	for {
		c.space()
		if err := c.value(depth + 1); err != nil {
			return err
		}
		done, ok := c.next(']')
		if !ok {
			return c.badNext(']', "")
		}
		if done {
			return nil
		}
	}
}

// str scans a string at c.pos and returns its raw contents (between the
// quotes) and whether it holds an escape.
func (c *checker) str() (raw []byte, escaped bool, err error) {
	c.pos++ // "
	start := c.pos
	for c.pos < len(c.in) {
		// The common run of plain bytes, scanned on locals.
		in, i := c.in, c.pos
		for i+8 <= len(in) && !swar.Special(swar.Load(in[i:])) {
			i += 8
		}
		for i < len(in) && in[i] >= 0x20 && in[i] != '"' && in[i] != '\\' {
			i++
		}
		c.pos = i
		if i == len(in) {
			break
		}
		ch := in[i]
		switch {
		case ch == '"':
			raw = c.in[start:c.pos]
			c.pos++
			return raw, escaped, nil
		case ch == '\\':
			escaped = true
			if c.pos+1 >= len(c.in) {
				return nil, false, c.bad("unexpected end of input in a string")
			}
			switch c.in[c.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				c.pos += 2
			case 'u':
				if c.pos+6 > len(c.in) || !isHex4(c.in[c.pos+2:c.pos+6]) {
					return nil, false, c.bad("bad \\u escape")
				}
				if string(c.in[c.pos+2:c.pos+6]) == "0000" {
					return nil, false, Invalidf(CodeNULCharacter, "the JSON has a NUL character (\\u0000) in a string at offset %d", c.pos)
				}
				c.pos += 6
			default:
				return nil, false, c.bad("bad escape")
			}
		case ch < 0x20:
			if ch == 0 {
				return nil, false, Invalidf(CodeNULCharacter, "the JSON has a NUL byte in a string at offset %d", c.pos)
			}
			return nil, false, c.bad("control character in a string")
		}
	}
	return nil, false, c.bad("unterminated string")
}

func isHex4(b []byte) bool {
	for _, ch := range b {
		if !('0' <= ch && ch <= '9' || 'a' <= ch && ch <= 'f' || 'A' <= ch && ch <= 'F') {
			return false
		}
	}
	return true
}
