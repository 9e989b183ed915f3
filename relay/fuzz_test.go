package relay

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzSplitter feeds arbitrary bytes, cut at an arbitrary point, through the
// frame splitter: it must never panic, and every frame it yields must
// re-encode (known types) and parse back to the same type.
func FuzzSplitter(f *testing.F) {
	files, _ := filepath.Glob("testdata/frames/*.json")
	for _, file := range files {
		b, _ := os.ReadFile(file)
		f.Add(b, uint16(len(b)/2))
	}
	f.Add([]byte("{\"type\":\"x\"}\n\n{bad\n"), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		c := int(cut) % (len(data) + 1)
		var s Splitter
		s.OnMalformed = func([]byte, error) {}
		s.Feed(data[:c], func(fr Frame) { check(t, fr) })
		s.Feed(data[c:], func(fr Frame) { check(t, fr) })
	})
}

func check(t *testing.T, fr Frame) {
	if !fr.Known() {
		return
	}
	b, err := AppendFrame(nil, fr)
	if err != nil {
		t.Fatalf("decoded frame %+v does not encode: %v", fr, err)
	}
	back, err := ParseFrame(bytes.TrimSuffix(b, []byte("\n")))
	if err != nil || back.Type != fr.Type {
		t.Fatalf("re-encoded frame %s does not parse: %v", b, err)
	}
}

// FuzzParseSource checks ParseSource never panics and that what it accepts
// can be keyed and re-encoded to something it accepts again.
func FuzzParseSource(f *testing.F) {
	f.Add([]byte(`{"platform":"discord","chat_id":"333","chat_type":"group","user_id":"555"}`))
	f.Add([]byte(`{"platform":"whatsapp","chat_type":"dm","chat_id":"+1:2@x"}`))
	f.Add([]byte(`{"platform":" X ","chat_type":null}`))
	f.Add([]byte(`{"platform":"slack","chat_type":"dm","chat_id":"D1","is_bot":false,"message_is_edit":true,"one_to_one_verified":true}`))
	f.Add([]byte(`{"platform":"slack","is_bot":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := ParseSource(data)
		if err != nil {
			return
		}
		if _, err := SessionKey(src, DefaultSessionKeyOptions()); err != nil {
			t.Fatalf("accepted source cannot be keyed: %v", err)
		}
		b, err := src.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseSource(b); err != nil {
			t.Fatalf("re-encoded source refused: %v\n%s", err, b)
		}
	})
}
