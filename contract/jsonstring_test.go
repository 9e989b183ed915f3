package contract

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// encodingJSON is what encoding/json writes for s with HTML escaping off.
func encodingJSON(s string) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

var jsonStringCases = []string{
	"", "plain ascii", `quote " and \ backslash`, "tab\tnew\nline\rcr\bbs\fff", "\x00\x01\x1f\x7f",
	"<html> & 'x'", "é ✓ 日本", "\u2028\u2029", "bad \xff\xfe utf-8 \xc3", "emoji 🙂 \U0010ffff",
}

// TestAppendJSONStringIsEncodingJSON: the escaper writes what encoding/json
// writes, HTML escaping off, for every kind of character it treats apart.
func TestAppendJSONStringIsEncodingJSON(t *testing.T) {
	for _, s := range jsonStringCases {
		if got, want := AppendJSONString([]byte("x"), s), append([]byte("x"), encodingJSON(s)...); !bytes.Equal(got, want) {
			t.Errorf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
		var b bytes.Buffer
		WriteJSONString(&b, s)
		if got, want := b.Bytes(), encodingJSON(s); !bytes.Equal(got, want) {
			t.Errorf("WriteJSONString(%q) = %s, want %s", s, got, want)
		}
	}
}

func FuzzAppendJSONString(f *testing.F) {
	for _, s := range jsonStringCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendJSONString(nil, s), encodingJSON(s); !bytes.Equal(got, want) {
			t.Fatalf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
	})
}

// BenchmarkAppendJSONString compares the escaper ("hand") with
// encoding/json's Encoder, HTML escaping off ("encoding_json"), on a
// receipt-sized string with a few characters to escape.
func BenchmarkAppendJSONString(b *testing.B) {
	s := strings.Repeat(`user said "deploy it" to prod\n`, 8) + "é ✓"
	b.Run("hand", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		b.SetBytes(int64(len(s)))
		contracttest.Loop(b, func() { buf = AppendJSONString(buf[:0], s) })
	})
	b.Run("encoding_json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		b.SetBytes(int64(len(s)))
		contracttest.Loop(b, func() {
			buf.Reset()
			_ = enc.Encode(s)
		})
	})
}
