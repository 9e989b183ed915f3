package wire

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

var fastSeeds = []string{
	`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`,
	`{"model":"gpt-4o","stream":true,"temperature":0.2,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a\nb"}]}],"tools":[{"type":"function","function":{"name":"Bash"}}]}`,
	`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"Edit","arguments":"{\"path\":\"a/b.go\"}"}}]},{"role":"tool","content":"ok"}]}`,
	`{"Model":"m","messages":[]}`,
	`{"model":"m","model":"n","messages":[]}`,
	`{"model":"m","messages":[{"role":"user","content":"x","ROLE":"system"}]}`,
	`{"model":null,"messages":[{"role":"user","content":"x"}]}`,
	`{"model":"m","stream":"yes","messages":[]}`,
	`{"model":"m","messages":[1]}`,
	`{"model":"m","messages":[{"role":"user","content":"caf\u00e9 \ud83d\ude00"}], "x": [1e5, -0.5, true, false, null, {}]}`,
	"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}",
	`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"function":{"name":1}}]}`,
	`{"model":"m","messages":[{"role":"user","content":"x"}]} x`,
	`{"model":"m","messages":[{"role":"user","content":"x"}],"n":01}`,
	`{"model":"m","ſtream":true,"messages":[]}`,
}

// FuzzFastParse checks that the fast path never disagrees with
// encoding/json: whenever it answers, validity and the decoded request are
// what json.Valid and json.Unmarshal give.
func FuzzFastParse(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if validJSON(b) && !json.Valid(b) {
			t.Fatalf("validJSON accepts what json.Valid refuses: %q", b)
		}
		var fast chatIn
		if !parseChatFast(b, &fast, false) {
			return
		}
		var slow chatIn
		if err := json.Unmarshal(b, &slow); err != nil {
			t.Fatalf("fast path read %q, encoding/json refuses it: %v", b, err)
		}
		for i := range fast.Messages {
			// RawMessage aliases the body on the fast path; compare bytes
			if fast.Messages[i].Content != nil && len(fast.Messages[i].Content) == 0 {
				fast.Messages[i].Content = nil
			}
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("%q:\nfast %+v\nslow %+v", b, fast, slow)
		}
	})
}

func TestFastParseTakesTheCommonCase(t *testing.T) {
	var in chatIn
	if !parseChatFast([]byte(fastSeeds[1]), &in, false) || in.Model != "gpt-4o" || !in.Stream || len(in.Messages) != 2 || len(in.Tools) != 1 {
		t.Fatalf("fast path declined or misread the common request: %+v", in)
	}
	for _, s := range fastSeeds[3:9] {
		if parseChatFast([]byte(s), &in, false) {
			t.Errorf("fast path took %s, which needs encoding/json", s)
		}
	}
}

// pathsInTextIndexAny is pathsInText as it was with strings.IndexAny, the
// reference for TestPathsInText.
func pathsInTextIndexAny(s string) []string {
	if len(s) > maxPathScan {
		s = s[:maxPathScan]
	}
	var out []string
	for i := 0; i < len(s); {
		j := strings.IndexAny(s[i:], "/.")
		if j < 0 {
			break
		}
		j += i
		start, end := j, j
		for start > 0 && !pathBreak(s[start-1]) {
			start--
		}
		for end < len(s) && !pathBreak(s[end]) {
			end++
		}
		tok := s[start:end]
		for len(tok) > 0 && strings.IndexByte(".:;!?", tok[len(tok)-1]) >= 0 {
			tok = tok[:len(tok)-1]
		}
		if looksLikePath(tok) {
			out = append(out, tok)
			if len(out) == 64 {
				return out
			}
		}
		i = end + 1
	}
	return out
}

func TestPathsInText(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parts := []string{"a", "main.go", "deploy/app", "/", ".", " ", "..", "x.tf", "http://h/p", "(", "src/", ".git", "é", "passed.", "\n", ",", "a.b.c"}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		s := b.String()
		if got, want := pathsInText(s), pathsInTextIndexAny(s); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %q, want %q", s, got, want)
		}
	}
}

// TestSWAR checks that validJSON, whose string scan skips 8 bytes at a
// time (internal/swar), accepts every valid string it is shown (so the
// fast path is taken) and that plainString agrees with its definition.
func TestSWAR(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	interesting := []byte{0, 0x1f, 0x20, 0x21, '"', '\\', 0x7f, 0x80, 0xa2, 0xdc, 0xff, 'a', 0x5b, 0x5d, 0x02, 0x23}
	for range 20000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = interesting[rng.IntN(len(interesting))]
			if rng.IntN(3) == 0 {
				b[i] = 'a' + byte(rng.IntN(26))
			}
		}
		q, _ := json.Marshal(string(b))
		if !validJSON(q) {
			t.Fatalf("validJSON refuses %q", q)
		}
		raw := append(append([]byte{'"'}, b...), '"')
		plain := true
		for _, c := range b {
			plain = plain && c >= 0x20 && c < 0x80 && c != '"' && c != '\\'
		}
		if s, ok := plainString(raw); ok != plain || ok && s != string(b) {
			t.Fatalf("plainString(%q) = %q, %v; want plain %v", raw, s, ok, plain)
		}
		if validJSON(raw) != json.Valid(raw) {
			t.Fatalf("validJSON(%q) = %v, json.Valid says %v", raw, validJSON(raw), json.Valid(raw))
		}
	}
}

// FuzzParseChecked checks ParseChecked against Parse on every body
// contract.CheckJSON accepts, for each protocol: the same request or the
// same error. The validator the checked path skips must accept every such
// body.
func FuzzParseChecked(f *testing.F) {
	for _, s := range fastSeeds {
		f.Add([]byte(s))
	}
	for _, ss := range fuzzSeeds {
		for _, s := range ss {
			f.Add([]byte(s))
		}
	}
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"caf\u00e9 é \ufffd` + "\xef\xbf\xbd" + ` \u2028 x"}]}`))
	f.Add([]byte(`{"model":"m","system":"é","input":"ü","messages":[{"role":"user","content":"\\\"é"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if contract.CheckJSON(b) != nil {
			return
		}
		if !validJSON(b) {
			t.Fatalf("validJSON refuses what CheckJSON accepts: %q", b)
		}
		for _, p := range []Protocol{ChatCompletions, Responses, Messages} {
			want, werr := Parse(p, b)
			got, gerr := ParseChecked(p, b)
			if fmt.Sprint(gerr) != fmt.Sprint(werr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %q:\nchecked %+v, %v\nparse   %+v, %v", p, b, got, gerr, want, werr)
			}
		}
	})
}

// TestPeekModel: the model of a body as encoding/json decodes the member
// named exactly "model" (the last one), "" when it is absent or no string.
func TestPeekModel(t *testing.T) {
	for body, want := range map[string]string{
		`{"model":"gpt-4o","messages":[]}`:     "gpt-4o",
		`{"model":"caf\u00e9\n","x":1}`:        "café\n",
		"{\"model\":\"\xff\"}":                 "\ufffd",
		`{"model":1}`:                          "",
		`{"model":null}`:                       "",
		`{"Model":"m"}`:                        "",
		`{"model":"a","model":"b"}`:            "b",
		`{"messages":[{"model":"x"}]}`:         "",
		`[1]`:                                  "",
		`{"model":"ok", "x": [1, {"y": "z"}]}`: "ok",
	} {
		if got := PeekModel([]byte(body)); got != want {
			t.Errorf("PeekModel(%q) = %q, want %q", body, got, want)
		}
	}
}
