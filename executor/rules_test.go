package executor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

// TestCapabilityOptionLevels (1.3): option_level_2 is met by an account of
// level 2 or 3, option_level_3 only by level 3; an account below aborts
// capability_gated before any review.
func TestCapabilityOptionLevels(t *testing.T) {
	dir := t.TempDir()
	for _, need := range []string{"option_level_2", "option_level_3"} {
		path := filepath.Join(dir, executor.ManifestDir, "needs"+need[len(need)-1:], "SKILL.md")
		must(t, os.MkdirAll(filepath.Dir(path), 0o755))
		must(t, os.WriteFile(path, []byte("---\nname: needs"+need[len(need)-1:]+"\nstrategist: {mode: live, allowlist: [SPY], max_position_pct: 20, max_concurrent_positions: 3, "+
			"capability_requires: ["+need+"], profile_compatibility: [options-trader]}\n---\n"), 0o644))
	}
	for _, c := range []struct {
		level, strategy string
		gated           bool
	}{
		{"option_level_2", "needs2", false}, {"option_level_3", "needs2", false}, {"", "needs2", true}, {"option_level_1", "needs2", true},
		{"option_level_3", "needs3", false}, {"option_level_2", "needs3", true}, {"", "needs3", true},
	} {
		sc := (&fixture{}).scenario(t)
		now, _, _ := sc.NowTime()
		sc.Now = ""
		sc.Accounts[0].OptionLevel = c.level
		sim, err := paper.New(sc, func() time.Time { return now })
		if err != nil {
			t.Fatal(err)
		}
		ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: audit.NewMemory(), Skills: dir, Now: func() time.Time { return now }}
		env, err := ex.Tick(t.Context(), executor.TickRequest{Payload: []byte(`{"strategy":"` + c.strategy + `","intents":[]}`), Identity: identity(""),
			Context: executor.ContextCron, Profile: "options-trader"})
		gated := env.Aborted != nil && *env.Aborted == executor.AbortCapabilityGated
		if err != nil || gated != c.gated || (!gated && env.Aborted != nil) {
			t.Errorf("account level %q, %s: aborted %v, %v; want gated %v", c.level, c.strategy, env.Aborted, err, c.gated)
		}
	}
}

// TestChatMismatchNamesTheDirective: a chat tick without a matching
// EXECUTE: is reviewed, and its note spells the directive that would place
// the intent: shares as written, a notional as $ and its exact amount.
func TestChatMismatchNamesTheDirective(t *testing.T) {
	k := newKeyed(t)
	for intent, want := range map[string]string{
		`"quantity_type":"shares","qty":1.5`:              "EXECUTE: buy QQQ 1.5",
		`"quantity_type":"shares","qty":2`:                "EXECUTE: buy QQQ 2",
		`"quantity_type":"notional","notional_usd":50.25`: "EXECUTE: buy QQQ $50.25",
		`"quantity_type":"notional","notional_usd":60`:    "EXECUTE: buy QQQ $60",
	} {
		env, err := k.ex.Tick(t.Context(), executor.TickRequest{Identity: identity(""), Context: executor.ContextChat, Message: "go ahead",
			Payload: []byte(`{"strategy":"momentum","intents":[{"symbol":"QQQ","side":"buy",` + intent + `,"order_type":"market","intent_price":400.10,"max_slippage_pct":1}]}`)})
		if err != nil || len(env.Actions) != 1 {
			t.Fatalf("%s: %+v, %v", intent, env, err)
		}
		a := env.Actions[0]
		if a.Status != executor.StatusReviewed || a.Reason != executor.ReasonExecuteMismatch || !hasNoteEnding(a.Notes, want) {
			t.Errorf("%s: %s %s %q; want a note ending %q", intent, a.Status, a.Reason, a.Notes, want)
		}
	}
}

func hasNoteEnding(notes []string, s string) bool {
	for _, n := range notes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}
