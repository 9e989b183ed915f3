package shim

import (
	"strings"
	"testing"
)

func TestTier1(t *testing.T) {
	prov := func(id string, tr Triggers) Provision {
		return Provision{ID: id, Status: StatusActive, Action: ActionShim, Triggers: tr}
	}
	rs := compile([]Provision{
		prov("ANY", Triggers{Keyword: &Keywords{Any: []string{"deploy", "Release Train"}}}),
		prov("ALL", Triggers{Keyword: &Keywords{All: []string{"database", "migration"}}}),
		prov("ALLANY", Triggers{Keyword: &Keywords{All: []string{"prod"}, Any: []string{"restart", "reboot"}}}),
		prov("VETO", Triggers{Keyword: &Keywords{Any: []string{"deploy"}, None: []string{"dry run"}}}),
		prov("RE", Triggers{Regex: []Regex{{Pattern: `(?i)\bE\d{4}\b`}}}),
		prov("LIT", Triggers{Regex: []Regex{{Pattern: `(?i)secret-(key|token)`}}}),
		prov("PATH", Triggers{Path: []string{"deploy/**", "*.tf"}}),
		prov("TOOL", Triggers{Tool: []string{"Bash"}}),
	}, nil)
	cases := []struct {
		text  string
		tools []string
		paths []string
		want  string // fired ids, sorted by compile order
	}{
		{text: "please DEPLOY it", want: "ANY VETO"},
		{text: "deployment is not deploy? yes deploy", want: "ANY VETO"},
		{text: "redeploy the thing", want: ""},
		{text: "board the release train now", want: "ANY"},
		{text: "release the train", want: ""},
		{text: "deploy, but as a dry run", want: "ANY"},
		{text: "the database needs a migration", want: "ALL"},
		{text: "the database is fine", want: ""},
		{text: "prod needs a reboot", want: "ALLANY"},
		{text: "staging needs a reboot", want: ""},
		{text: "got error e1234 today", want: "RE"},
		{text: strings.Repeat("x", maxRegexInput) + " E1234", want: ""}, // regex input is bounded
		{text: "leaked a SECRET-Token here", want: "LIT"},
		{text: "leaked a ſecret-key here", want: "LIT"}, // RE2 folds ſ to s; the literal prefilter must too
		{text: "a secret, key and token", want: ""},
		{text: "x", paths: []string{"deploy/app/main.go"}, want: "PATH"},
		{text: "x", paths: []string{"infra/net/vpc.tf"}, want: "PATH"},
		{text: "x", paths: []string{"src/deploy.go"}, want: ""},
		{text: "x", tools: []string{"bash"}, want: "TOOL"},
		{text: "x", tools: []string{"Bashful"}, want: ""},
	}
	for _, c := range cases {
		s := rs.signals(c.text, c.tools, func() []string { return c.paths })
		var fired []string
		for _, r := range rs.rules {
			if r.vetoed(s) {
				continue
			}
			if ok, why := r.tier1(s, rs.words); ok {
				if why == "" {
					t.Fatalf("%s fired without a reason", r.p.ID)
				}
				fired = append(fired, r.p.ID)
			}
		}
		if got := strings.Join(fired, " "); got != c.want {
			t.Errorf("%q tools %v paths %v: fired %q, want %q", c.text, c.tools, c.paths, got, c.want)
		}
	}
}

func TestGlob(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"deploy/**", "deploy/a/b.yaml", true},
		{"deploy/**", "deploy", true},
		{"**/*.tf", "a/b/c.tf", true},
		{"**/*.tf", "c.tf", true},
		{"*.tf", "a/b/c.tf", true},
		{"src/*.go", "src/a/b.go", false},
		{"src/**/test_*.py", "src/x/y/test_a.py", true},
		{"./a", "a", false},
	}
	for _, c := range cases {
		if got := globMatch(c.pattern, c.name); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
}

// The local embedder matches a paraphrase that shares no word with the
// example, through the shipped lexicon, and keeps unrelated text apart.
func TestLocalEmbedderParaphrase(t *testing.T) {
	example := "ship this to prod"
	para := "push the release out to production"
	for _, w := range tokens(para) {
		if !stopwords[w] && strings.Contains(" "+example+" ", " "+w+" ") {
			t.Fatalf("paraphrase shares the content word %q", w)
		}
	}
	ex, p := localVector(example), localVector(para)
	unrelated := localVector("what is a good recipe for banana bread")
	sim, far := cosine(ex, p), cosine(ex, unrelated)
	if sim < defaultThreshold {
		t.Fatalf("paraphrase similarity %.3f below the default threshold %.2f", sim, defaultThreshold)
	}
	if far > 0.3 {
		t.Fatalf("unrelated similarity %.3f", far)
	}
	if again := localVector(example); cosine(ex, again) < 0.9999 {
		t.Fatal("local embedder is not deterministic")
	}
}

func TestParseVerdict(t *testing.T) {
	good := map[string]Verdict{
		`{"apply":true,"confidence":0.9}`:  {true, 0.9},
		` {"confidence":0,"apply":false} `: {false, 0},
		`{"apply":true,"confidence":1}`:    {true, 1},
	}
	for in, want := range good {
		v, err := parseVerdict([]byte(in))
		if err != nil || v != want {
			t.Errorf("%s: %+v %v", in, v, err)
		}
	}
	bad := []string{
		``, `null`, `[]`, `"yes"`, `{"apply":"true","confidence":0.9}`, `{"apply":1,"confidence":0.9}`,
		`{"apply":true}`, `{"apply":true,"confidence":1.5}`, `{"apply":true,"confidence":-0.1}`,
		`{"apply":true,"confidence":"0.9"}`, `{"apply":true,"confidence":null}`, `{"apply":true,"confidence":1e999}`,
		"```json\n{\"apply\":true,\"confidence\":0.9}\n```", `{"apply":true,"confidence":0.9,"why":"x"}`,
		`{"apply":true,"confidence":0.9} trailing`, `{"apply":null,"confidence":0.5}`,
	}
	for _, in := range bad {
		if v, err := parseVerdict([]byte(in)); err == nil {
			t.Errorf("accepted %q as %+v", in, v)
		}
	}
}

func TestRequiredLiteral(t *testing.T) {
	cases := map[string]string{
		`(?i)\bsecret-(key|token)\b`: "secret-",
		`deploy`:                     "deploy",
		`(?i)\bE\d{4}\b`:             "",
		`a|bcd`:                      "",
		`(prod)uction`:               "uction",
		`x*abc`:                      "abc",
		`[`:                          "",
	}
	for p, want := range cases {
		if got := requiredLiteral(p); got != want {
			t.Errorf("requiredLiteral(%q) = %q, want %q", p, got, want)
		}
	}
}
