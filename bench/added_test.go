package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
)

const us = time.Microsecond

// rounds is a result named name with one round per pair of p50 and p99 (in
// µs), each with 100 requests.
func rounds(name string, p50p99 ...[2]int) Result {
	r := Result{Name: name}
	for _, p := range p50p99 {
		r.Rounds = append(r.Rounds, Round{Requests: 100, P50: time.Duration(p[0]) * us, P99: time.Duration(p[1]) * us})
	}
	return r
}

// TestBenchAddedLatencyIsTheMedianOfPerRoundDifferences: the added p50 and p99
// are the median over rounds of the target's figure less the direct
// upstream's in the same round (not of either side's median, nor of the
// pooled figures); an even number of rounds takes the mean of the middle
// two; a round in which either side answered nothing is left out; a
// negative difference stays negative.
func TestBenchAddedLatencyIsTheMedianOfPerRoundDifferences(t *testing.T) {
	direct := rounds("direct", [2]int{20, 100}, [2]int{30, 400}, [2]int{25, 150})
	for _, c := range []struct {
		name     string
		target   Result
		direct   Result
		p50, p99 time.Duration
		n        int
	}{
		// Differences 100, 80, 375 (p50) and 900, 100, 50 (p99). The
		// median of the target's own p50s less the direct's median (130
		// less 25) would be 105: not what is asked.
		{"three rounds", rounds("t", [2]int{120, 1000}, [2]int{110, 500}, [2]int{400, 200}), direct, 100 * us, 100 * us, 3},
		// Differences 100 and 80, 900 and 100: the mean of the two.
		{"two rounds", rounds("t", [2]int{120, 1000}, [2]int{110, 500}), direct, 90 * us, 500 * us, 2},
		// Faster than the direct upstream in a round: -5 and -50.
		{"negative", rounds("t", [2]int{15, 50}), direct, -5 * us, -50 * us, 1},
		{"no rounds", Result{Name: "t"}, direct, 0, 0, 0},
	} {
		got := AddedLatency(c.target, c.direct)
		if got != (Added{P50: c.p50, P99: c.p99, Rounds: c.n}) {
			t.Errorf("%s: %+v, want p50 %v, p99 %v over %d rounds", c.name, got, c.p50, c.p99, c.n)
		}
	}

	// A round without answers, on either side, is left out.
	target := rounds("t", [2]int{120, 1000}, [2]int{110, 500}, [2]int{400, 200})
	target.Rounds[0].Requests = 0
	if got := AddedLatency(target, direct); got != (Added{P50: 227*us + 500*time.Nanosecond, P99: 75 * us, Rounds: 2}) {
		t.Errorf("the first round unanswered by the target: %+v, want the mean of rounds 2 and 3 (80 and 375; 100 and 50)", got)
	}
	d := rounds("direct", [2]int{20, 100}, [2]int{30, 400}, [2]int{25, 150})
	d.Rounds[2].Requests = 0
	if got := AddedLatency(rounds("t", [2]int{120, 1000}, [2]int{110, 500}, [2]int{400, 200}), d); got != (Added{P50: 90 * us, P99: 500 * us, Rounds: 2}) {
		t.Errorf("the last round unanswered by the direct upstream: %+v", got)
	}
}

// TestBenchMergeKeepsEachRound: Run's result has its round; merging further
// rounds keeps each in order, which AddedLatency pairs by position.
func TestBenchMergeKeepsEachRound(t *testing.T) {
	up, err := FakeUpstream()
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	l := Load{URL: up.URL + "/v1/chat/completions", Body: ChatBody, Conns: 1, Duration: 50 * time.Millisecond}
	r := Run(t.Context(), "up", l)
	if len(r.Rounds) != 1 || r.Rounds[0] != (Round{Requests: r.Requests, P50: r.P50, P99: r.P99}) {
		t.Fatalf("Run: rounds %+v, want one with the result's own figures (%d, %v, %v)", r.Rounds, r.Requests, r.P50, r.P99)
	}
	r.Merge(Result{Name: "up"})
	r.Merge(rounds("up", [2]int{9, 10}))
	if len(r.Rounds) != 2 || r.Rounds[1].P50 != 9*us {
		t.Errorf("after two merges, one of them without rounds: %+v", r.Rounds)
	}
}

// addedRows is ReportAdded's table: the heading line, and each row's
// fields after the target's name, by name.
func addedRows(t *testing.T, out string, names ...string) (string, map[string][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "target ") {
		t.Fatalf("added-latency table:\n%s", out)
	}
	rows := map[string][]string{}
	for _, line := range lines[2:] {
		for _, n := range names {
			if strings.HasPrefix(line, n+" ") {
				rows[n] = strings.Fields(strings.TrimPrefix(line, n))
			}
		}
	}
	return lines[0], rows
}

// TestBenchReportAddedFormat: after a blank line, a heading naming what is
// subtracted, then one row per target but the direct upstream, with its
// added p50, added p99 and the number of rounds they come from ("-" for
// figures no round has); nothing at all without the direct upstream.
func TestBenchReportAddedFormat(t *testing.T) {
	const direct = "upstream (fake, direct)"
	rs := []Result{
		rounds(direct, [2]int{20, 100}, [2]int{30, 400}, [2]int{25, 150}),
		rounds("bare-proxy", [2]int{60, 900}, [2]int{72, 1400}, [2]int{66, 1100}),
		rounds("a peer", [2]int{2020, 9100}, [2]int{1530, 5400}, [2]int{2525, 7150}),
		rounds("quick", [2]int{15, 50}),
		{Name: "silent"},
	}
	var out bytes.Buffer
	ReportAdded(&out, direct, rs)
	if !strings.HasPrefix(out.String(), "\n") {
		t.Errorf("the table does not start after a blank line:\n%q", out.String())
	}
	head, rows := addedRows(t, out.String(), direct, "bare-proxy", "a peer", "quick", "silent")
	if !strings.Contains(head, "p50 and p99 less "+direct+"'s in the same round") || !strings.Contains(head, "median over rounds") {
		t.Errorf("heading %q does not say what is subtracted", head)
	}
	if _, ok := rows[direct]; ok {
		t.Errorf("a row for the direct upstream itself:\n%s", out.String())
	}
	for name, want := range map[string][]string{
		"bare-proxy": {"41µs", "950µs", "3"}, // 40, 42, 41; 800, 1000, 950
		"a peer":     {"2ms", "7ms", "3"},    // 2000, 1500, 2500; 9000, 5000, 7000
		"quick":      {"-5µs", "-50µs", "1"}, // faster than direct in its one round
		"silent":     {"-", "-", "0"},        // no round
	} {
		if got := rows[name]; strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: row %q, want %q\n%s", name, got, want, out.String())
		}
	}

	out.Reset()
	ReportAdded(&out, direct, rs[1:])
	if out.Len() != 0 {
		t.Errorf("without the direct upstream in the run:\n%s", out.String())
	}
}

// TestBenchChatBodyFor: ChatBody is the request it always was, and ChatBodyFor
// changes its model and nothing else.
func TestBenchChatBodyFor(t *testing.T) {
	const was = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"Summarise the release notes of version 2.3 in three bullet points."}],"max_tokens":128}`
	if string(ChatBody) != was {
		t.Errorf("ChatBody changed:\n%s", ChatBody)
	}
	var base map[string]any
	if err := json.Unmarshal(ChatBody, &base); err != nil {
		t.Fatal(err)
	}
	for _, model := range []string{"openai/gpt-4o-mini", `odd "quoted" \ model`, "ünïcode"} {
		var got map[string]any
		if err := json.Unmarshal(ChatBodyFor(model), &got); err != nil {
			t.Fatalf("ChatBodyFor(%q): %v\n%s", model, err, ChatBodyFor(model))
		}
		if got["model"] != model {
			t.Errorf("ChatBodyFor(%q) asks for %q", model, got["model"])
		}
		got["model"] = base["model"]
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(base)
		if !bytes.Equal(a, b) {
			t.Errorf("ChatBodyFor(%q) differs from ChatBody beyond the model:\n%s", model, ChatBodyFor(model))
		}
	}
}

// TestChatBodySized: a padded request is the same request, its user
// message at least the size asked, and its padding holds nothing a
// guardrail finds, so a bench with guardrails measures their scan, not
// their edits.
func TestChatBodySized(t *testing.T) {
	if string(ChatBodySized(0)) != string(ChatBody) {
		t.Fatal("ChatBodySized(0) is not ChatBody")
	}
	det, err := detect.Default()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1024, 8192, 65536} {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(ChatBodySized(n), &req); err != nil || req.Model != Model || len(req.Messages) != 2 {
			t.Fatalf("ChatBodySized(%d): %v %+v", n, err, req)
		}
		if len(req.Messages[1].Content) < n {
			t.Errorf("ChatBodySized(%d): a user message of %d bytes", n, len(req.Messages[1].Content))
		}
		if found := det.Scan(req.Messages[1].Content, ^guard.Set(0)); len(found) > 0 {
			t.Errorf("ChatBodySized(%d): the padding holds %+v", n, found)
		}
	}
}
