package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
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
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, Invalidf("bad_json", "not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, Invalidf("bad_json", "not valid JSON: trailing data after the value")
	}
	var buf bytes.Buffer
	buf.Grow(len(raw))
	if err := writeCanonical(&buf, tree); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case json.Number:
		buf.WriteString(x.String())
	case string:
		writeString(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k)
			buf.WriteByte(':')
			if err := writeCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("contract: canonical json: unexpected %T", v)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	if plainString(s) {
		buf.WriteByte('"')
		buf.WriteString(s)
		buf.WriteByte('"')
		return
	}
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a Go string always encodes
	buf.Truncate(buf.Len() - 1) // Encode appends a newline
}

// plainString reports whether s encodes as itself between quotes: printable
// ASCII without '"' or '\\'. Anything else takes encoding/json's path, which
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
