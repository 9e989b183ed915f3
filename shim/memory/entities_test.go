package memory

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/shim"
)

func TestExtractEntities(t *testing.T) {
	text := "In internal/api/handler.go the call to parseConfig() fails; see `Server.Start` and os.Getenv.\n" +
		"Context at tessera://blobs/" + strings.Repeat("ab", 32) + ", statute SC-NY-113 and statute:gdpr.art17.\n" +
		"Traceback (most recent call last):\n" +
		"  File \"/home/u/app/main.py\", line 12, in <module>\n" +
		"KeyError: 'user_42' at /srv/app/models/user.py line 88\n"
	got := extractEntities(text)
	want := map[string][]string{
		KindFilePath:       {"internal/api/handler.go", "/home/u/app/main.py", "/srv/app/models/user.py"},
		KindCodeSymbol:     {"Server.Start", "parseConfig", "os.Getenv"},
		KindTesseraURI:     {"tessera://blobs/" + strings.Repeat("ab", 32)},
		KindStatuteCard:    {"SC-NY-113", "statute:gdpr.art17"},
		KindErrorSignature: {"KeyError: <str> at <path> line <n>"},
	}
	for kind, vals := range want {
		for _, v := range vals {
			if !slices.Contains(got, shim.EntityRef{Kind: kind, Value: v}) {
				t.Errorf("missing %s %q in %v", kind, v, got)
			}
		}
	}
	for i := 1; i < len(got); i++ {
		if kindRank(got[i-1].Kind) > kindRank(got[i].Kind) {
			t.Fatalf("not ordered by kind: %v", got)
		}
	}
	if !slices.Equal(got, extractEntities(text)) {
		t.Fatal("extraction is not deterministic")
	}
}

func TestErrorSignaturesNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ValueError: invalid literal for int() with base 10: 'abc'", "ValueError: invalid literal for int() with base <n>: <str>"},
		{"panic: runtime error: index out of range [5] with length 3", "panic: runtime error: index out of range [<n>] with length <n>"},
		{"java.lang.NullPointerException: Cannot invoke \"x\" on /opt/x/y.java", "java.lang.NullPointerException: Cannot invoke <str> on <path>"},
		{"error[E0308]: mismatched types", "error[E<n>]: mismatched types"},
		{"TypeError: cannot read id 7f3a9c2e11aa0bb3 of usr_01HZZZZZZZZZZZZ", "TypeError: cannot read id <id> of <id>"},
	} {
		got := errorSignatures(tc.in)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("ErrorSignatures(%q) = %q, want [%q]", tc.in, got, tc.want)
		}
	}
	// Two occurrences differing only in numbers, paths and ids are one signature.
	a := errorSignatures("KeyError: 'a' at /x/y.py line 3")
	b := errorSignatures("KeyError: 'b' at /z/w/v.py line 99")
	if !slices.Equal(a, b) {
		t.Fatalf("%q and %q should normalize the same", a, b)
	}
	if got := errorSignatures("everything is fine, no errors here"); len(got) != 0 {
		t.Fatalf("prose yields %q", got)
	}
}

func TestExtractEntitiesBounds(t *testing.T) {
	var b strings.Builder
	for i := range 500 {
		fmt.Fprintf(&b, "pkg/f%d.go ", i)
	}
	n := 0
	for _, e := range extractEntities(b.String()) {
		if e.Kind == KindFilePath {
			n++
		}
	}
	if n != maxEntitiesPerKind {
		t.Fatalf("kept %d paths, want %d", n, maxEntitiesPerKind)
	}
}

func FuzzExtractEntities(f *testing.F) {
	f.Add("see internal/x.go and Foo.Bar() KeyError: 'x' tessera://blobs/ab SC-1")
	f.Add("panic: runtime error\n\tgoroutine 1 [running]:\n")
	f.Add("`" + strings.Repeat("é", 300) + "`")
	f.Add("Error: " + strings.Repeat("ü", 200))
	f.Fuzz(func(t *testing.T, s string) {
		es := extractEntities(s)
		for _, e := range es {
			if kindRank(e.Kind) < 0 || e.Value == "" || len(e.Value) > maxEntityValue {
				t.Fatalf("bad entity %+v", e)
			}
			if utf8.ValidString(s) && !utf8.ValidString(e.Value) {
				t.Fatalf("entity %q is not valid UTF-8", e.Value)
			}
		}
		if !slices.Equal(es, extractEntities(s)) {
			t.Fatal("not deterministic")
		}
	})
}

func BenchmarkExtractEntities32KB(b *testing.B) {
	chunk := "Editing internal/api/handler.go: the call parseConfig() returns nil; check `Server.Start` in cmd/app/main.go.\n" +
		"Traceback (most recent call last):\n  File \"/srv/app/x.py\", line 12\nKeyError: 'user_42'\n" +
		"See tessera://blobs/" + strings.Repeat("0f", 32) + " and SC-NY-113. Some plain prose follows to pad the request out.\n"
	var sb strings.Builder
	for sb.Len() < 32<<10 {
		sb.WriteString(chunk)
	}
	text := sb.String()[:32<<10]
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		extractEntities(text)
	}
}

// BenchmarkExtractEntities32KBUnique is the worst case: every error line
// and path differs, so no normalization is reused.
func BenchmarkExtractEntities32KBUnique(b *testing.B) {
	var sb strings.Builder
	for i := 0; sb.Len() < 32<<10; i++ {
		fmt.Fprintf(&sb, "Editing internal/api/h%d.go: the call parseConfig%d() returns nil; check `Server.Start%d`.\n"+
			"  File \"/srv/app/x%d.py\", line %d\nKeyError%d: 'user_%d' at /srv/app/m%d.py\nSome plain prose follows to pad the request.\n", i, i, i, i, i, i%7, i, i)
	}
	text := sb.String()[:32<<10]
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		extractEntities(text)
	}
}

// issueText is an issue as people write them: errors quoted inside
// sentences, definitions named the way code reads.
const issueText = "### Bug: dashboard crashes after the 2.3 upgrade\n\n" +
	"After upgrading, the build failed with `TypeError: x is undefined` in foo.ts, and the dashboard " +
	"shows a blank page. I traced it to `def load_settings` in config/loader.py: it returns None when " +
	"the file is missing, so class SettingsCache never gets its defaults. On the Go side the worker " +
	"logs ValueError: invalid literal for int() with base 10: 'abc'. It happens when the payload has a string id.\n\n" +
	"Also `func ParseManifest` in internal/manifest/parse.go panics on an empty front matter; I think " +
	"func (s *Server) Shutdown should drain first. This is a first class citizen of the API, so please " +
	"keep the def of done as it is.\n"

// ciLog is a CI job's output as it reaches the agent: prefixed with
// timestamps and runner tags, so the error is rarely the line's start.
const ciLog = "2026-11-30T09:14:02.118Z ##[group]Run npm test\n" +
	"2026-11-30T09:14:09.502Z FAIL src/foo.test.ts\n" +
	"2026-11-30T09:14:09.503Z   ● renders the dashboard\n" +
	"2026-11-30T09:14:09.503Z     TypeError: x is undefined\n" +
	"2026-11-30T09:14:09.504Z       at render (src/foo.ts:41:7)\n" +
	"2026-11-30T09:14:11.880Z FAILED tests/test_loader.py::test_defaults - AssertionError: assert None == {'theme': 'dark'}\n" +
	"2026-11-30T09:14:12.010Z worker[3]: ValueError: invalid literal for int() with base 10: 'x7'\n" +
	"2026-11-30T09:14:12.400Z ##[error]Process completed with exit code 1.\n"

// TestEntitiesOfRealText: errors named inside prose and after log prefixes
// are error signatures, normalized like the same error at a line's start, so
// the issue and the CI log that reports it meet on the same entity; `func
// Name`, `def name` and `class Name` name code symbols, and the prose around
// them ("first class citizen", "the def of done") names none.
func TestEntitiesOfRealText(t *testing.T) {
	issue, log := extractEntities(issueText), extractEntities(ciLog)
	has := func(es []shim.EntityRef, kind, v string) bool {
		return slices.Contains(es, shim.EntityRef{Kind: kind, Value: v})
	}
	for _, v := range []string{"TypeError: x is undefined", "ValueError: invalid literal for int() with base <n>: <str>"} {
		if !has(issue, KindErrorSignature, v) {
			t.Errorf("issue: no error signature %q in %v", v, issue)
		}
		if !has(log, KindErrorSignature, v) {
			t.Errorf("CI log: no error signature %q in %v", v, log)
		}
	}
	if v := "AssertionError: assert None == {<str>: <str>}"; !has(log, KindErrorSignature, v) {
		t.Errorf("CI log: no error signature %q in %v", v, log)
	}
	for _, v := range []string{"load_settings", "SettingsCache", "ParseManifest", "Shutdown"} {
		if !has(issue, KindCodeSymbol, v) {
			t.Errorf("issue: no code symbol %q in %v", v, issue)
		}
	}
	for _, e := range append(issue, log...) {
		switch {
		case e.Kind == KindCodeSymbol && (e.Value == "citizen" || e.Value == "of" || e.Value == "done"):
			t.Errorf("prose read as a definition: %v", e)
		case e.Kind == KindErrorSignature && strings.Contains(e.Value, "##[error]"):
			t.Errorf("runner tag kept in a signature: %v", e)
		}
	}
}

// TestGoPanicInProse: a Go panic named inside a sentence is the same error
// signature as the panic at a line's start (so an issue that quotes it and
// the log that printed it meet on one entity); its message runs to the end
// of the sentence or line. "Don't panic:" and a panic named without its
// colon are prose.
func TestGoPanicInProse(t *testing.T) {
	const oob = "panic: runtime error: index out of range [<n>] with length <n>"
	for _, tc := range []struct{ in, want string }{
		{"func ReconcileLedger fails with panic: runtime error: index out of range [7] with length 3", oob},
		{"Since Tuesday ReconcileLedger dies with panic: runtime error: index out of range [12] with length 4. It started after the merge.", oob},
		{"2026-11-30T09:14:12.010Z worker[3]: panic: runtime error: index out of range [7] with length 3", oob},
		{"the worker hit panic: assignment to entry in nil map when the cache was cold", "panic: assignment to entry in nil map when the cache was cold"},
		{"the job died with `panic: runtime error: index out of range [7] with length 3` twice", oob},
		{"(panic: runtime error: invalid memory address or nil pointer dereference)", "panic: runtime error: invalid memory address or nil pointer dereference"},
		{"Don't panic: the fix is in.", ""},
		{"it does not panic on an empty slice: it returns nil", ""},
	} {
		got := errorSignatures(tc.in)
		want := []string{}
		if tc.want != "" {
			want = []string{tc.want}
		}
		if !slices.Equal(got, want) {
			t.Errorf("errorSignatures(%q) = %q, want %q", tc.in, got, want)
		}
	}
}
