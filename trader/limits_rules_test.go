package trader_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// padTo pads a JSON body with trailing spaces to exactly n bytes.
func padTo(t *testing.T, b []byte, n int) []byte {
	t.Helper()
	if len(b) > n {
		t.Fatalf("body of %d bytes is longer than %d", len(b), n)
	}
	return append(bytes.Clone(b), bytes.Repeat([]byte(" "), n-len(b))...)
}

// TestARequestOfExactlyTheSizeLimitIsDecidedAndKept: a body of exactly
// MaxRequestBytes is a request (decided, its bytes kept on the attempt, its
// record not redacted); one byte more is body_too_large and only its sha256
// and size are kept.
func TestARequestOfExactlyTheSizeLimitIsDecidedAndKept(t *testing.T) {
	e := newEnv(t, trader.Options{})
	at := padTo(t, body(nil), trader.MaxRequestBytes)
	if r := e.apply(t, at); r.Status != trader.Applied || r.NotARequest() {
		t.Fatalf("a body of exactly %d bytes: %s %v", trader.MaxRequestBytes, r.Status, r.ErrorCodes())
	}
	over := padTo(t, body(map[string]any{"decision_id": "dec-over"}), trader.MaxRequestBytes+1)
	if r := e.apply(t, over); r.Status != trader.Rejected || !r.NotARequest() || r.ErrorCodes()[0] != trader.CodeBodyTooLarge {
		t.Fatalf("a body one byte over: %s %v", r.Status, r.ErrorCodes())
	}
	hist, err := e.svc.History(context.Background(), t1, "", 0)
	if err != nil || len(hist) != 2 {
		t.Fatalf("history: %d attempts, %v", len(hist), err)
	}
	// newest first
	if hist[1].Request == nil || hist[1].RequestBytes != trader.MaxRequestBytes {
		t.Errorf("the attempt at the limit did not keep its request: %d bytes, request %d bytes", hist[1].RequestBytes, len(hist[1].Request))
	}
	if hist[0].Request != nil || hist[0].RequestBytes != trader.MaxRequestBytes+1 {
		t.Errorf("the attempt over the limit kept its request: %d bytes", len(hist[0].Request))
	}
	recs := e.mem.Records(t1)
	if recs[0].Redaction != nil || recs[1].Redaction == nil || *recs[1].Redaction != trader.RefusedBytes {
		t.Errorf("redactions %+v, %+v; want none at the limit, RefusedBytes over it", recs[0].Redaction, recs[1].Redaction)
	}
}

// TestADecisionRecordNamesItsDecision: the audit record of an attempt is on
// resource trader/decision/<decision_id>, and on trader/decision when the
// body named no decision (not JSON at all).
func TestADecisionRecordNamesItsDecision(t *testing.T) {
	e := newEnv(t, trader.Options{})
	e.apply(t, body(nil))
	e.apply(t, []byte("not json"))
	recs := e.mem.Records(t1)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	if got := recs[0].Outcome.Resource; got != "trader/decision/dec_2026_04_16_001" {
		t.Errorf("resource of a decision: %q", got)
	}
	if got := recs[1].Outcome.Resource; got != "trader/decision" {
		t.Errorf("resource of a body without decision_id: %q", got)
	}
}

// TestAnImportFileOfExactlyTheSizeLimitParses: an import file of exactly
// MaxImportBytes is read; one byte more is refused file_too_large.
func TestAnImportFileOfExactlyTheSizeLimitParses(t *testing.T) {
	doc := []byte(`{"concerns":[{"concern_id":"acct9:ethusd","execution_state":"healthy"}]}`)
	f, err := trader.ParseFile(padTo(t, doc, trader.MaxImportBytes), trader.FormatJSON)
	if err != nil || len(f.Concerns) != 1 {
		t.Errorf("a file of exactly %d bytes: %+v, %v", trader.MaxImportBytes, f, err)
	}
	_, err = trader.ParseFile(padTo(t, doc, trader.MaxImportBytes+1), trader.FormatJSON)
	if ce := contract.AsError(err); ce == nil || ce.Kind != contract.KindInvalid || ce.Code != "file_too_large" {
		t.Errorf("a file one byte over: %v, want invalid file_too_large", err)
	}
}

// TestAnImportChangedWhenAnyCountIsNonZero: ImportResult.Changed is true
// when any one of the created and updated counts is not zero, and false
// when everything was unchanged.
func TestAnImportChangedWhenAnyCountIsNonZero(t *testing.T) {
	for _, c := range []struct {
		r    trader.ImportResult
		want bool
	}{
		{trader.ImportResult{}, false},
		{trader.ImportResult{Unchanged: 3}, false},
		{trader.ImportResult{ConcernsCreated: 1}, true},
		{trader.ImportResult{ConcernsUpdated: 1}, true},
		{trader.ImportResult{StrategiesCreated: 1}, true},
		{trader.ImportResult{StrategiesUpdated: 1}, true},
		{trader.ImportResult{ConcernsCreated: 1, ConcernsUpdated: 1, StrategiesCreated: 1, StrategiesUpdated: 1}, true},
	} {
		if got := c.r.Changed(); got != c.want {
			t.Errorf("%+v: Changed() = %v, want %v", c.r, got, c.want)
		}
	}
}

// TestImportWritesEveryConcernOfTheFile: every concern of a file is created
// or updated, not only the first; an updated concern moves up one revision.
func TestImportWritesEveryConcernOfTheFile(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, trader.Options{})
	before, err := e.svc.GetConcern(ctx, t1, concern)
	if err != nil {
		t.Fatal(err)
	}
	yaml := strings.Join([]string{
		"concerns:",
		"  - {concern_id: " + concern + ", execution_state: degraded}",
		"  - {concern_id: acct9:ethusd, execution_state: healthy}",
		"  - {concern_id: acct9:btcusd, execution_state: degraded}",
	}, "\n") + "\n"
	res, err := e.svc.Import(ctx, operator, []byte(yaml), trader.FormatYAML)
	if err != nil || res != (trader.ImportResult{ConcernsUpdated: 1, ConcernsCreated: 2}) {
		t.Fatalf("import: %+v, %v", res, err)
	}
	got, err := e.svc.GetConcern(ctx, t1, concern)
	if err != nil || got.ExecutionState != trader.Degraded || got.Revision != before.Revision+1 {
		t.Errorf("updated concern %+v (was revision %d), %v; want degraded at the next revision", got, before.Revision, err)
	}
	for _, id := range []string{"acct9:ethusd", "acct9:btcusd"} {
		if c, err := e.svc.GetConcern(ctx, t1, id); err != nil || c.Revision != 1 {
			t.Errorf("created concern %s: %+v, %v", id, c, err)
		}
	}
}
