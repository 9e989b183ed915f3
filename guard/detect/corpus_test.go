package detect_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
)

// Floors under which TestCorpora fails, per kind.
const (
	minPrecision = 0.95
	minRecall    = 0.90
)

type marked struct {
	kind       guard.Kind
	text       string
	start, end int // the marked value's span; -1 in the false-positive corpus
}

func readCorpus(t *testing.T, path string, positives bool) []marked {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []marked
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := marked{start: -1, end: -1, text: line}
		if positives {
			kind, text, ok := strings.Cut(line, "\t")
			s, e := strings.Index(text, "«"), strings.Index(text, "»")
			if !ok || s < 0 || e < s {
				t.Fatalf("%s: line %q has no kind and «value»", path, line)
			}
			m.kind = guard.Kind(kind)
			m.text = text[:s] + text[s+len("«"):e] + text[e+len("»"):]
			m.start, m.end = s, e-len("«")
		}
		out = append(out, m)
	}
	return out
}

// TestCorpora measures the detectors on a true-positive corpus (a value
// of a known kind marked on each line) and a false-positive corpus (lines
// of code and logs holding none): per kind, recall is the marked values
// found as their kind, precision the findings of the kind that are a
// marked value of it. It prints the table docs/guardrails.md shows
// (go test -v -run TestCorpora ./guard/detect) and fails under the floors.
func TestCorpora(t *testing.T) {
	d := detect.MustDefault()
	want := guard.Config{Actions: guard.Actions{"default": guard.Flag}}.Policy("").Want()
	type tally struct{ found, truth, right, wrong int }
	per := map[guard.Kind]*tally{}
	for _, k := range guard.Kinds {
		per[k] = &tally{}
	}
	corpus := append(readCorpus(t, "testdata/true_positives.txt", true), readCorpus(t, "testdata/false_positives.txt", false)...)
	for _, m := range corpus {
		if m.start >= 0 {
			per[m.kind].truth++
		}
		hit := false
		for _, f := range d.Scan(m.text, want) {
			per[f.Kind].found++
			if f.Kind == m.kind && f.Start < m.end && f.End > m.start {
				per[f.Kind].right++
				hit = true
				continue
			}
			per[f.Kind].wrong++
			t.Logf("false positive %s (%s) in %q", f.Kind, f.Rule, m.text[max(0, f.Start-20):min(len(m.text), f.End+20)])
		}
		if m.start >= 0 && !hit {
			t.Logf("missed %s in %q", m.kind, m.text[:min(len(m.text), 120)])
		}
	}
	var table strings.Builder
	table.WriteString("| kind | values | found | false positives | precision | recall |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, k := range guard.Kinds {
		c := per[k]
		precision, recall := 1.0, 1.0
		if c.found > 0 {
			precision = float64(c.right) / float64(c.found)
		}
		if c.truth > 0 {
			recall = float64(c.right) / float64(c.truth)
		}
		fmt.Fprintf(&table, "| %s | %d | %d | %d | %.2f | %.2f |\n", k, c.truth, c.right, c.wrong, precision, recall)
		if c.truth == 0 {
			t.Errorf("%s: no value in the true-positive corpus", k)
		}
		if precision < minPrecision || recall < minRecall {
			t.Errorf("%s: precision %.2f recall %.2f, floors %.2f and %.2f", k, precision, recall, minPrecision, minRecall)
		}
	}
	t.Logf("%d lines, %d of them false-positive candidates\n%s", len(corpus), len(corpus)-count(corpus), table.String())
}

func count(ms []marked) int {
	n := 0
	for _, m := range ms {
		if m.start >= 0 {
			n++
		}
	}
	return n
}
