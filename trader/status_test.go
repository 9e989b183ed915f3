package trader_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"testing"

	"github.com/caduceus-dev/caduceus/trader"
)

// wire is a response as it goes out: its JSON object.
func wire(t *testing.T, r trader.Response) map[string]any {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDryRunAnswersNoop: seed 000 says applied means "Trader changed
// state"; a dry run changes nothing, so a dry run that passes validation
// answers noop with dry_run true and result.mode_change would_apply (a dry
// run with nothing to change: mode_change none), ok true, and no strategy
// changes.
func TestDryRunAnswersNoop(t *testing.T) {
	for _, c := range []struct {
		name string
		body []byte
		mode string
	}{
		{"would_switch", body(map[string]any{"dry_run": true}), trader.ModeWouldApply},
		{"would_set_risk_mode", body(map[string]any{"dry_run": true, "action": "set_risk_mode", "risk_mode": "defensive", "target_strategy_id": sA}), trader.ModeWouldApply},
		{"nothing_to_change", body(map[string]any{"dry_run": true, "action": "resume"}, "target_strategy_id"), trader.ModeNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, trader.Options{})
			before := []trader.Strategy{e.strategy(t, sA), e.strategy(t, sB)}
			r := e.apply(t, c.body)
			if r.Status != trader.Noop || !r.OK || !r.DryRun || r.Result.ModeChange != c.mode || r.Result.Reconciled || r.AppliedAt != "" || len(r.Errors) != 0 {
				t.Fatalf("dry run: %+v; want noop, ok, dry_run, mode_change %s", r, c.mode)
			}
			if w := wire(t, r); w["status"] != "noop" || w["dry_run"] != true || w["result"].(map[string]any)["mode_change"] != c.mode {
				t.Fatalf("dry run on the wire: %v", w)
			}
			after := []trader.Strategy{e.strategy(t, sA), e.strategy(t, sB)}
			if !reflect.DeepEqual(before, after) {
				t.Errorf("a dry run changed state:\n%+v\n%+v", before, after)
			}
		})
	}
}

// TestReplayIsTheFirstAnswer: a repeated decision_id answers the first
// response unchanged, its status included, plus replayed: true, for every
// stored outcome (applied, noop, rejected); it never applies again; the
// replay validates against the response schema.
func TestReplayIsTheFirstAnswer(t *testing.T) {
	e := newEnv(t, trader.Options{})
	for _, c := range []struct {
		name   string
		body   []byte
		status trader.Outcome
	}{
		{"applied", body(nil), trader.Applied},
		{"noop", body(map[string]any{"decision_id": "dec-noop", "action": "resume", "target_strategy_id": sB, "expected_active_strategy_id": sB}), trader.Noop},
		{"rejected", body(map[string]any{"decision_id": "dec-rej", "target_strategy_id": sX}), trader.Rejected},
	} {
		t.Run(c.name, func(t *testing.T) {
			first := e.apply(t, c.body)
			if first.Status != c.status {
				t.Fatalf("first: %s %v; want %s", first.Status, first.ErrorCodes(), c.status)
			}
			fw := wire(t, first)
			if _, ok := fw["replayed"]; ok {
				t.Errorf("the first answer says replayed: %v", fw["replayed"])
			}
			revB := e.strategy(t, sB).Revision
			again := e.apply(t, c.body)
			aw := wire(t, again)
			if aw["replayed"] != true {
				t.Fatalf("replay has replayed = %v; want true", aw["replayed"])
			}
			delete(aw, "replayed")
			if !maps.EqualFunc(fw, aw, func(a, b any) bool { return reflect.DeepEqual(a, b) }) {
				t.Errorf("replay differs from the first answer:\nfirst  %v\nreplay %v", fw, aw)
			}
			if !again.Replay() {
				t.Error("Response.Replay() is false for a replay")
			}
			if e.strategy(t, sB).Revision != revB {
				t.Error("a replay changed state")
			}
		})
	}
}
