package relay

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sameDecoding fails t unless ParseFrame and the reflective reference agree
// on b: both accept with equal frames, or both refuse with the same error.
// The same for decoding b as a MessageEvent. It reports whether the fast
// path took b.
func sameDecoding(t *testing.T, b []byte) bool {
	t.Helper()
	want, wantErr := refParseFrame(b)
	got, gotErr := ParseFrame(b)
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && refName(wantErr) != gotErr.Error()) {
		t.Fatalf("%q: error %v, reference %v", b, gotErr, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", b, got, want)
	}
	if got.Event != nil && !reflect.DeepEqual(*got.Event, *want.Event) {
		t.Fatalf("%q: event\n got %#v\nwant %#v", b, *got.Event, *want.Event)
	}
	var ev MessageEvent
	var ref refEventIn
	evErr, refErr := json.Unmarshal(b, &ev), json.Unmarshal(b, &ref)
	if (evErr == nil) != (refErr == nil) || (evErr != nil && refName(refErr) != evErr.Error()) {
		t.Fatalf("%q as event: error %v, reference %v", b, evErr, refErr)
	}
	if !reflect.DeepEqual(ev, MessageEvent(ref)) {
		t.Fatalf("%q as event:\n got %#v\nwant %#v", b, ev, MessageEvent(ref))
	}
	_, fast := parseFrameFast(b)
	return fast
}

// refName is err's text with the reference's type names replaced by the
// names they stand for.
func refName(err error) string {
	return strings.NewReplacer("refFrameWire", "frameWire", "refEventIn", "MessageEvent").Replace(err.Error())
}

// mutations are edits that move a frame in and out of what the fast path
// takes: case-folded and unknown keys, duplicates, nulls, numbers,
// escapes, whitespace, truncation, trailing bytes.
var mutations = []func(s string, r *rand.Rand) string{
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"type"`, `"TYPE"`, 1) },
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"text"`, `"Text"`, 1) },
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"platform"`, `"Platform"`, 1) },
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"chat_type":"forum"`, `"chat_type":null`, 1)
	},
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"chat_type":"forum",`, ``, 1) },
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"chat_type":"group",`, ``, 1) },
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"platform":"telegram"`, `"platform":" "`, 1)
	},
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"platform":"discord"`, `"platform":null`, 1)
	},
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"user_id":"9"`, `"user_id":9`, 1) },
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"media_urls":[]`, `"media_urls":null`, 1)
	},
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"media_urls":[]`, `"media_urls":["a","b\n"]`, 1)
	},
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"media_urls":[]`, `"media_urls":[1]`, 1)
	},
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"media_urls":[]`, `"media_urls":["a",]`, 1)
	},
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"message_id":null`, `"message_id":""`, 1)
	},
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"text":"`, `"text":"\u00e9\n\"\/`, 1) },
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"text":"`, `"text":"\q`, 1) },
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"text":"`, "\"text\":\"\xff", 1) },
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"text":"`, "\"text\":\"\x01", 1) },
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"text":"`, `"text":null,"text":"`, 1) },
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"source":{`, `"source":{"is_bot":false,`, 1)
	},
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"source":{`, `"source":{"chat_id":"1",`, 1)
	},
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `{"type":"inbound",`, `{"type":"inbound","type":"inbound",`, 1)
	},
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"type":"inbound"`, `"type":"inbound_ack"`, 1)
	},
	func(s string, r *rand.Rand) string { return strings.Replace(s, `"event":{`, `"event":null,"x":{`, 1) },
	func(s string, r *rand.Rand) string {
		return strings.Replace(s, `"message_type":"text"`, `"message_type":"gif"`, 1)
	},
	func(s string, r *rand.Rand) string { return strings.ReplaceAll(s, `,`, " ,\n\t") },
	func(s string, r *rand.Rand) string { return strings.ReplaceAll(s, `:`, " : ") },
	func(s string, r *rand.Rand) string { return " " + s + "\r\n" },
	func(s string, r *rand.Rand) string { return s + "x" },
	func(s string, r *rand.Rand) string { return s + "{}" },
	func(s string, r *rand.Rand) string { return s[:r.IntN(len(s)+1)] },
	func(s string, r *rand.Rand) string {
		i := r.IntN(len(s) + 1)
		return s[:i] + string(`{}[]",:\ n0`[r.IntN(11)]) + s[i:]
	},
	func(s string, r *rand.Rand) string {
		if len(s) == 0 {
			return s
		}
		i := r.IntN(len(s))
		return s[:i] + s[i+1:]
	},
}

// decodeCorpus is the golden frames plus generated inbound frames.
func decodeCorpus(t testing.TB) []string {
	files, _ := filepath.Glob("testdata/frames/*.json")
	var out []string
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(bytes.TrimSuffix(raw, []byte("\n"))))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 300 {
		strs := []string{trickyStrings[rng.IntN(len(trickyStrings))], "telegram", "forum", "9", "text"}
		bits := rng.Uint32()
		if rng.IntN(3) > 0 {
			bits &^= 0x1f << 20 // most events carry no reply_to, media, context or prompt_response
		}
		b, err := frameFrom(FrameInbound, strs, bits).MarshalJSON()
		if err == nil {
			out = append(out, string(b))
		}
	}
	return out
}

// TestDecodeMatchesReference compares ParseFrame with the reflective
// decoder over the golden frames, generated frames and their mutations,
// and checks the fast path takes the golden inbound frames.
func TestDecodeMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	fastN := 0
	for _, s := range decodeCorpus(t) {
		if sameDecoding(t, []byte(s)) {
			fastN++
		}
		for range 20 {
			m := s
			for range 1 + rng.IntN(3) {
				m = mutations[rng.IntN(len(mutations))](m, rng)
			}
			sameDecoding(t, []byte(m))
		}
	}
	for _, name := range []string{"inbound.json", "inbound_buffered.json", "inbound_ack.json"} {
		raw, err := os.ReadFile(filepath.Join("testdata/frames", name))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := parseFrameFast(bytes.TrimSuffix(raw, []byte("\n"))); !ok {
			t.Errorf("%s: the fast path declined a golden frame", name)
		}
	}
	if fastN < 50 { // most generated frames hold strings it leaves to encoding/json (\u escapes)
		t.Errorf("the fast path took only %d frames of the corpus", fastN)
	}
}

// FuzzParseFrameFast checks ParseFrame (fast path first) and the reflective
// decoder make the same decision, values and errors on any input.
func FuzzParseFrameFast(f *testing.F) {
	for i, s := range decodeCorpus(f) {
		if i < 40 {
			f.Add([]byte(s))
		}
	}
	f.Add([]byte(`{"type":"inbound","event":{"source":{"platform":"x"}},"bufferId":"b"}`))
	f.Add([]byte(`{"type":"inbound_ack","bufferId":"b"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sameDecoding(t, data)
	})
}
