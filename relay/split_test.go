package relay

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

var suffixRE = regexp.MustCompile(` \((\d+)/(\d+)\)$`)

// checkChunks verifies the invariants every split must keep.
func checkChunks(t *testing.T, text string, chunks []string, limit int, unit LenUnit) {
	t.Helper()
	if len(chunks) == 1 {
		if chunks[0] != text {
			t.Fatalf("single chunk changed the text")
		}
		return
	}
	for i, c := range chunks {
		if n := Len(c, unit); n > limit {
			t.Errorf("chunk %d is %d %s, limit %d", i+1, n, unit, limit)
		}
		m := suffixRE.FindStringSubmatch(c)
		if m == nil || m[1] != fmt.Sprint(i+1) || m[2] != fmt.Sprint(len(chunks)) {
			t.Errorf("chunk %d suffix: %q", i+1, c[max(0, len(c)-12):])
		}
		if strings.Count(c, "```")%2 != 0 {
			t.Errorf("chunk %d has an unbalanced fence:\n%s", i+1, c)
		}
		if !strings.ContainsRune(c, '\uFFFD') && strings.ContainsRune(text, '\uFFFD') == false && !isValidUTF8(c) {
			t.Errorf("chunk %d is not valid UTF-8", i+1)
		}
	}
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// stripNumbers removes the " (i/N)" suffixes and rejoins, undoing fence
// close/reopen, to check that no text is lost.
func rejoin(chunks []string) string {
	var parts []string
	for _, c := range chunks {
		parts = append(parts, suffixRE.ReplaceAllString(c, ""))
	}
	return strings.Join(parts, "|")
}

func TestSplitFits(t *testing.T) {
	for _, s := range []string{"", "hello", strings.Repeat("a", 2000)} {
		if got := Split(s, 2000, LenChars); len(got) != 1 || got[0] != s {
			t.Errorf("Split(%d chars) = %d chunks", len(s), len(got))
		}
	}
	// 2000 emoji fit Discord (code points) but not 2000 UTF-16 units.
	e := strings.Repeat("😀", 1500)
	if got := Split(e, 2000, LenChars); len(got) != 1 {
		t.Errorf("1500 emoji in chars: %d chunks", len(got))
	}
	if got := Split(e, 2000, LenUTF16); len(got) != 2 {
		t.Errorf("1500 emoji in utf16: %d chunks", len(got))
	}
	if got := Split(strings.Repeat("a", 4097), 0, LenChars); len(got) != 2 {
		t.Errorf("limit 0 means 4096: %d chunks", len(got))
	}
}

func TestSplitPrefersNewlineThenSpace(t *testing.T) {
	para := strings.Repeat("word ", 30) // 150 chars
	text := para + "\n" + para + "\n" + para
	chunks := Split(text, 200, LenChars)
	checkChunks(t, text, chunks, 200, LenChars)
	if len(chunks) != 3 {
		t.Fatalf("%d chunks: %q", len(chunks), chunks)
	}
	for i, c := range chunks {
		body := suffixRE.ReplaceAllString(c, "")
		if strings.TrimSpace(body) != strings.TrimSpace(para) {
			t.Errorf("chunk %d not cut at the newline: %q", i+1, body)
		}
	}
	// No newline past half: cut at the last space.
	words := strings.Repeat("abcdefghi ", 50)
	chunks = Split(words, 100, LenChars)
	checkChunks(t, words, chunks, 100, LenChars)
	for i, c := range chunks[:len(chunks)-1] {
		body := suffixRE.ReplaceAllString(c, "")
		if !strings.HasSuffix(body, "abcdefghi") {
			t.Errorf("chunk %d cut inside a word: %q", i+1, body)
		}
	}
	if got := strings.ReplaceAll(rejoin(chunks), "|", " "); strings.TrimSpace(got) != strings.TrimSpace(words) {
		t.Errorf("text lost:\n%q\n%q", got, words)
	}
	// A newline before half the budget is not preferred over a later space.
	text = "short\n" + strings.Repeat("x ", 100)
	chunks = Split(text, 60, LenChars)
	if first := suffixRE.ReplaceAllString(chunks[0], ""); first == "short" {
		t.Errorf("cut at an early newline: %q", first)
	}
}

func TestSplitHardCut(t *testing.T) {
	text := strings.Repeat("x", 4500)
	chunks := Split(text, 2000, LenChars)
	checkChunks(t, text, chunks, 2000, LenChars)
	if len(chunks) != 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	if got := strings.ReplaceAll(rejoin(chunks), "|", ""); got != text {
		t.Error("hard cut lost text")
	}
	// Hard cuts never split a surrogate pair: emoji are whole in UTF-16 counting.
	e := strings.Repeat("😀", 3000)
	chunks = Split(e, 4096, LenUTF16)
	checkChunks(t, e, chunks, 4096, LenUTF16)
	if got := strings.ReplaceAll(rejoin(chunks), "|", ""); got != e {
		t.Error("emoji lost")
	}
}

func TestSplitInlineCode(t *testing.T) {
	text := strings.Repeat("a", 80) + " `some code with spaces in it` " + strings.Repeat("b", 80)
	chunks := Split(text, 100, LenChars)
	checkChunks(t, text, chunks, 100, LenChars)
	for i, c := range chunks {
		body := suffixRE.ReplaceAllString(c, "")
		if strings.Count(body, "`")%2 != 0 {
			t.Errorf("chunk %d cuts inline code: %q", i+1, body)
		}
	}
}

func TestSplitCodeFence(t *testing.T) {
	var code strings.Builder
	for i := range 40 {
		fmt.Fprintf(&code, "fmt.Println(%d) // line\n", i)
	}
	text := "Here:\n```go\n" + code.String() + "```\nDone."
	chunks := Split(text, 300, LenChars)
	checkChunks(t, text, chunks, 300, LenChars)
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	for i, c := range chunks[1 : len(chunks)-1] {
		if !strings.HasPrefix(c, "```go\n") {
			t.Errorf("chunk %d does not reopen the fence: %q", i+2, c[:20])
		}
		if !strings.HasSuffix(suffixRE.ReplaceAllString(c, ""), "\n```") {
			t.Errorf("chunk %d does not close the fence", i+2)
		}
	}
	// Every code line survives exactly once.
	all := strings.Join(chunks, "\n")
	for i := range 40 {
		if n := strings.Count(all, fmt.Sprintf("fmt.Println(%d) ", i)); n != 1 {
			t.Errorf("line %d appears %d times", i, n)
		}
	}
}

func TestSplitManyChunksNumbering(t *testing.T) {
	text := strings.Repeat("word ", 2000) // 10000 chars into 50-char chunks: > 9 chunks, two-digit suffixes
	chunks := Split(text, 50, LenChars)
	checkChunks(t, text, chunks, 50, LenChars)
	if len(chunks) < 100 {
		t.Fatalf("%d chunks, want >= 100 (three-digit numbering)", len(chunks))
	}
}

func TestLen(t *testing.T) {
	for _, tc := range []struct {
		s     string
		chars int
		utf16 int
	}{
		{"abc", 3, 3}, {"é", 1, 1}, {"😀", 1, 2}, {"a😀b👍🏽", 5, 8}, {"中文", 2, 2},
	} {
		if got := Len(tc.s, LenChars); got != tc.chars {
			t.Errorf("Len(%q, chars) = %d, want %d", tc.s, got, tc.chars)
		}
		if got := Len(tc.s, LenUTF16); got != tc.utf16 {
			t.Errorf("Len(%q, utf16) = %d, want %d", tc.s, got, tc.utf16)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("hello world", 10, true)
	f.Add("```go\ncode\n```\n`x y` 😀😀😀", 12, false)
	f.Fuzz(func(t *testing.T, text string, limit int, utf16 bool) {
		if limit < 20 || limit > 5000 || !isValidUTF8(text) {
			return
		}
		unit := LenChars
		if utf16 {
			unit = LenUTF16
		}
		chunks := Split(text, limit, unit)
		if len(chunks) == 1 {
			if chunks[0] != text {
				t.Fatal("single chunk changed")
			}
			return
		}
		for _, c := range chunks {
			if Len(c, unit) > limit {
				t.Fatalf("chunk of %d > %d", Len(c, unit), limit)
			}
		}
	})
}
