package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestCandidatesMatchFullScan checks the candidate index against the plain
// scan of every rule (Service.fullScan, the evaluation as it was before the
// index): the same evaluated count, fired and skipped rules, in order —
// without an admission hook and with one that refuses some provisions.
func TestCandidatesMatchFullScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	vocab := []string{"deploy", "release", "rollback", "database", "migration", "prod", "Bash", "Edit", "e1234", "secret", "ſecret", "train", "dry", "run", "déploiement"}
	pick := func() string { return vocab[rng.IntN(len(vocab))] }
	words := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = pick()
			if rng.IntN(4) == 0 {
				out[i] += " " + pick() // a phrase
			}
		}
		return out
	}
	var provs []Provision
	for i := range 300 {
		tr := Triggers{}
		if rng.IntN(6) == 0 {
			tr.Mode = "all"
		}
		if rng.IntN(2) == 0 {
			tr.Keyword = &Keywords{Any: words(rng.IntN(3))}
			if rng.IntN(5) == 0 {
				tr.Keyword.All = words(1 + rng.IntN(2))
			}
			if rng.IntN(6) == 0 {
				tr.Keyword.None = words(1)
			}
		}
		switch rng.IntN(6) {
		case 0:
			tr.Regex = []Regex{{Pattern: `(?i)\bE\d{4}\b`}}
		case 1:
			tr.Regex = []Regex{{Pattern: `(?i)secret-(key|token)`}}
		case 2:
			tr.Regex = []Regex{{Pattern: `prod(uction)?`}}
		}
		if rng.IntN(8) == 0 {
			tr.Path = []string{"deploy/**", "*.tf"}
		}
		if rng.IntN(8) == 0 {
			tr.Tool = []string{"bash"}
		}
		if rng.IntN(10) == 0 {
			tr.Semantic = &Semantic{Examples: []string{"ship this to production"}, Threshold: 0.3}
		}
		if rng.IntN(12) == 0 {
			tr.Micromodel = &Micromodel{Model: "clf", Question: "deploy?"}
		}
		p := Provision{ID: fmt.Sprintf("R%03d", i), Status: StatusActive, Priority: rng.IntN(4), Version: 1,
			Triggers: tr, Action: ActionShim}
		if rng.IntN(3) == 0 {
			p.FabricGovernance = &Governance{Status: "verified"}
		}
		switch rng.IntN(8) {
		case 0:
			p.Status = StatusDisabled
		case 1:
			p.Match = &Match{Models: []string{"gpt-*"}}
		case 2:
			p.Match = &Match{Protocols: []string{"messages"}}
		}
		provs = append(provs, p)
	}
	rs := compile(provs[:250], provs[250:])
	caller := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1"}, Harness: "claude-code"}
	refuse := func(_ context.Context, _ contract.Caller, p Provision) (bool, string) {
		if p.ID[len(p.ID)-1]%3 == 0 {
			return false, "test"
		}
		return true, ""
	}
	// refuseGoverned is a hook that, like Governor.Admit, admits every
	// provision without fabric_governance, so AdmitOnly: Governed agrees
	refuseGoverned := func(ctx context.Context, c contract.Caller, p Provision) (bool, string) {
		if p.FabricGovernance == nil {
			return true, ""
		}
		return refuse(ctx, c, p)
	}
	type pair struct {
		indexed, full *Service
		rsIndexed     *ruleset
	}
	var pairs []pair
	for k, admit := range []func(context.Context, contract.Caller, Provision) (bool, string){nil, refuse, refuseGoverned} {
		// The tier-2/3 budget is wall-clock time: under load it could run
		// out on one side and not the other (budget_exhausted against
		// micromodel_offline), which says nothing about the index. An hour
		// keeps the comparison about the index alone.
		full := New(Config{Store: entryStore{}, Audit: nopLog{}, Admit: admit, Budget: time.Hour})
		full.fullScan = true
		cfg := Config{Store: entryStore{}, Audit: nopLog{}, Admit: admit, Budget: time.Hour}
		rsi := rs
		if k == 2 {
			// refuseGoverned: the indexed side skips the calls it need not make
			cfg.AdmitOnly = Governed
			rsi = compile(provs[:250], provs[250:])
			rsi.admitOnly(Governed)
		}
		pairs = append(pairs, pair{New(cfg), full, rsi})
	}
	fires, refused := 0, 0
	for n := range 400 {
		text := strings.Join(words(rng.IntN(12)), " . ")
		if rng.IntN(3) == 0 {
			text += " secret-Key deploy/app/main.go E1234 production"
		}
		msgs := []any{map[string]any{"role": "user", "content": text}}
		if rng.IntN(3) == 0 {
			msgs = append([]any{map[string]any{"role": "assistant", "content": "ok", "tool_calls": []any{
				map[string]any{"type": "function", "id": "c", "function": map[string]any{"name": "Bash", "arguments": `{"path":"infra/vpc.tf"}`}}}}}, msgs...)
		}
		model := "gpt-4o"
		if n%2 == 1 {
			model = "claude-x"
		}
		body, _ := json.Marshal(map[string]any{"model": model, "messages": msgs})
		for _, pr := range pairs {
			req1, err := wire.Parse(wire.ChatCompletions, body)
			if err != nil {
				t.Fatal(err)
			}
			req2, _ := wire.Parse(wire.ChatCompletions, body)
			a := pr.indexed.evaluate(t.Context(), pr.rsIndexed, caller, req1, modeOffline)
			b := pr.full.evaluate(t.Context(), rs, caller, req2, modeOffline)
			a.fired, b.fired = nil, nil
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("text %q (admit hook %v):\nindexed %+v\nfull    %+v", text, pr.indexed.cfg.Admit != nil, a, b)
			}
			fires += len(a.Fired)
			refused += strings.Count(fmt.Sprint(a.Skipped), "not_admitted")
		}
	}
	if refused == 0 {
		t.Fatal("the hook never refused: the test exercises nothing")
	}
	if fires == 0 {
		t.Fatal("nothing fired: the test exercises nothing")
	}
}

// TestASCIIHitsMatchTokens checks the ASCII keyword scan against the
// generic one (tokens of the lowered text) on random mixed-case text.
func TestASCIIHitsMatchTokens(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	vocab := []string{"Deploy", "deploy", "RELEASE", "train", "e1234", "_x", "x_", "a", "ab", "db_migrate", "prod", strings.Repeat("long", 20)}
	seps := []string{" ", ", ", ".", "-", "\n", "__", "!!", "/"}
	var kws []string
	for range 40 {
		k := vocab[rng.IntN(len(vocab))]
		if rng.IntN(3) == 0 {
			k += seps[rng.IntN(len(seps))] + vocab[rng.IntN(len(vocab))]
		}
		kws = append(kws, k)
	}
	rs := compile([]Provision{{ID: "K", Status: StatusActive, Triggers: Triggers{Keyword: &Keywords{Any: kws}}}}, nil)
	for range 500 {
		var b strings.Builder
		for range rng.IntN(30) {
			b.WriteString(vocab[rng.IntN(len(vocab))])
			b.WriteString(seps[rng.IntN(len(seps))])
		}
		text := b.String()
		fast := rs.signals(text, nil, nil)
		slow := &signals{hits: make([]bool, len(rs.words))}
		rs.lowerHits(slow, strings.ToLower(text))
		if !reflect.DeepEqual(fast.hits, slow.hits) {
			t.Fatalf("%q: ascii %v, generic %v", text, fast.hits, slow.hits)
		}
	}
}

// TestLiteralHitsASCII checks the in-place literal scan against the scan
// of the lowered copy.
func TestLiteralHitsASCII(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	var pats []Provision
	for i, lit := range []string{"ERR", "secret-KEY", "abc", "aab", "Deploy", "zz9", "x_y", "err1234"} {
		pats = append(pats, Provision{ID: fmt.Sprint("L", i), Status: StatusActive, Triggers: Triggers{Regex: []Regex{{Pattern: "(?i)" + lit + `\d?`}}}})
	}
	rs := compile(pats, nil)
	if len(rs.lits) < 6 {
		t.Fatalf("only %d literals", len(rs.lits))
	}
	alphabet := "aAbBcCdDeErRzZ9_-xXyYkKsS 1234"
	nhits := 0
	for range 3000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		text := string(b)
		got, want := rs.literalHitsASCII(text), rs.literalHits(strings.ToLower(text))
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: got %v, want %v", text, got, want)
		}
		for _, h := range got {
			if h {
				nhits++
			}
		}
	}
	if nhits == 0 {
		t.Fatal("no literal ever hit")
	}
}

// TestConversationIDStable pins the derived conversation id to its
// original definition (sha256 of the parts, each followed by a zero byte),
// so ids stored by earlier versions keep matching.
func TestConversationIDStable(t *testing.T) {
	ref := func(caller contract.Caller, req *wire.Request) string {
		var b []byte
		for _, part := range []string{string(caller.Identity.TenantSlot), caller.Identity.Subject, string(req.Protocol), req.System, firstUserText(req)} {
			b = append(append(b, part...), 0)
		}
		return contract.SHA256(b)[len("sha256:"):][:32]
	}
	caller := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_a"}}
	for _, n := range []int{0, 1, 1023, 1024, 1025, 5000} {
		body, _ := json.Marshal(map[string]any{"model": "m", "messages": []any{
			map[string]any{"role": "system", "content": strings.Repeat("s", n/2)},
			map[string]any{"role": "user", "content": strings.Repeat("u", n)}}})
		req, err := wire.Parse(wire.ChatCompletions, body)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := conversationID("", caller, req), "conv_"+ref(caller, req); got != want {
			t.Errorf("n=%d: %s, want %s", n, got, want)
		}
	}
	if got, want := conversationID("my-conv.1", caller, &wire.Request{}), contract.ConversationFor("slot-1", "my-conv.1"); got != want {
		t.Errorf("header name not mapped per tenant: %s, want %s", got, want)
	}
	if got := conversationID("conv_0123456789abcdef", caller, &wire.Request{}); got != "conv_0123456789abcdef" {
		t.Errorf("a conv_ id in the header is not kept: %s", got)
	}
}

// FuzzASCIIScansAgree checks tier 1's ASCII scans against the generic
// ones on any ASCII text: the keyword scan (word starts from 64-byte word
// masks, filtered by first byte) against the tokens of the lowered text,
// and the regex literal scan (byte pairs at even offsets) against the
// scan of every offset of the lowered copy. kws and lit add keywords and a
// literal of the input's own to a fixed set.
func FuzzASCIIScansAgree(f *testing.F) {
	f.Add([]byte("line 1 of the build log: now please Deploy it, ERR0007 err0107"), "deploy", "err0007")
	f.Add([]byte(strings.Repeat("ab_c9 ", 30)+"term 5 beta"), "term 5 beta", "_c9 a")
	f.Add([]byte(strings.Repeat("x", 63)+" deploy"), "xx", "xxx")
	f.Add([]byte(strings.Repeat("y", 64)+"Deploy"), "deploy ydeploy", "ydep")
	f.Fuzz(func(t *testing.T, text []byte, kws, lit string) {
		for i := range text {
			text[i] &= 0x7f
		}
		keywords := []string{"deploy", "term 5 beta", "kw1alpha", "_x", "a", "e1234"}
		keywords = append(keywords, strings.Fields(kws)...)
		provs := []Provision{{ID: "K", Status: StatusActive, Triggers: Triggers{Keyword: &Keywords{Any: keywords}}}}
		for i, l := range []string{"err0007", "abc", "aab", "ydep", lit} {
			provs = append(provs, Provision{ID: fmt.Sprint("L", i), Status: StatusActive,
				Triggers: Triggers{Regex: []Regex{{Pattern: "(?i)" + regexp.QuoteMeta(l)}}}})
		}
		rs := compile(provs, nil)
		s := string(text)
		fast := rs.signals(s, nil, nil)
		slow := &signals{hits: make([]bool, len(rs.words))}
		rs.lowerHits(slow, strings.ToLower(s))
		if !reflect.DeepEqual(fast.hits, slow.hits) {
			t.Fatalf("%q: keywords %v, generic %v", s, fast.hits, slow.hits)
		}
		if got, want := rs.literalHitsASCII(s), rs.literalHits(strings.ToLower(s)); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: literals %v, generic %v", s, got, want)
		}
		for off := 0; off < len(s); off += 64 {
			c := s[off:min(off+64, len(s))]
			var want uint64
			for i := 0; i < len(c); i++ {
				if wordByte[c[i]] {
					want |= 1 << i
				}
			}
			if got := wordMask(c); got != want {
				t.Fatalf("%q: word mask %b, want %b", c, got, want)
			}
		}
	})
}

// TestWordMaskEveryByte checks the word mask of every ASCII byte at every
// lane of an 8-byte word.
func TestWordMaskEveryByte(t *testing.T) {
	for c := 0; c < 0x80; c++ {
		for lane := range 8 {
			b := []byte("........")
			b[lane] = byte(c)
			var want uint64
			if wordByte[c] {
				want = 1 << lane
			}
			if got := wordMask(string(b)); got != want {
				t.Fatalf("byte %#x at lane %d: mask %b, want %b", c, lane, got, want)
			}
		}
	}
}
