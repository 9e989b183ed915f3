package executor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/contract"
)

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestDetectContext(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      func(string) string
		tty      bool
		stricter string
		hint     string
		want     RunContext
	}{
		{"cron: run id, no tty", env("HERMES_CRON_RUN_ID", "r1"), false, "", "", ContextCron},
		{"cron run id with a tty is not cron", env("HERMES_CRON_RUN_ID", "r1"), true, "", "", ContextClaudeCode},
		{"cron run id, tty, chat session: chat", env("HERMES_CRON_RUN_ID", "r1", "HERMES_SESSION_TYPE", "chat"), true, "", "", ContextChat},
		{"cron run id and a chat session without tty: ambiguous, stricter chat", env("HERMES_CRON_RUN_ID", "r1", "HERMES_SESSION_TYPE", "chat"), false, "", "", ContextChat},
		{"chat: tty and session chat", env("HERMES_SESSION_TYPE", "chat"), true, "", "", ContextChat},
		{"chat session without tty", env("HERMES_SESSION_TYPE", "chat"), false, "", "", ContextClaudeCode},
		{"tty alone", env(), true, "", "", ContextClaudeCode},
		{"nothing", nil, false, "", "", ContextClaudeCode},
		{"flag makes cron stricter", env("HERMES_CRON_RUN_ID", "r1"), false, "chat", "", ContextChat},
		{"flag analyst", env("HERMES_CRON_RUN_ID", "r1"), false, "analyst", "", ContextClaudeCode},
		{"flag cannot loosen chat", env("HERMES_SESSION_TYPE", "chat"), true, "cron", "", ContextChat},
		{"flag cannot loosen claude-code", env(), false, "cron", "", ContextClaudeCode},
		{"hint cron, no tty: cron", env(), false, "", "cron", ContextCron},
		{"hint cron with a tty: claude-code", env(), true, "", "cron", ContextClaudeCode},
		{"hint cron, chat session, no tty: ambiguous, stricter chat", env("HERMES_SESSION_TYPE", "chat"), false, "", "cron", ContextChat},
		{"hint cron, --context makes it stricter", env(), false, "chat", "cron", ContextChat},
		{"hint chat does not make a context", env(), false, "", "chat", ContextClaudeCode},
	} {
		got, err := DetectContext(tc.env, tc.tty, tc.stricter, tc.hint)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := DetectContext(nil, false, "root", ""); contract.KindOf(err) != contract.KindInvalid {
		t.Errorf("unknown --context: err = %v, want invalid", err)
	}
}

func TestContextFromCaller(t *testing.T) {
	for rc, want := range map[contract.RunContext]RunContext{
		contract.RunCron: ContextCron, contract.RunChat: ContextChat,
		contract.RunAnalyst: ContextClaudeCode, contract.RunNone: ContextClaudeCode,
	} {
		if got := ContextFromCaller(contract.Caller{RunContext: rc}); got != want {
			t.Errorf("%q -> %q, want %q", rc, got, want)
		}
	}
	if DetectProfile(env("HERMES_PROFILE", "autotrader")) != "autotrader" || DetectProfile(env()) != "claude-code" {
		t.Error("DetectProfile")
	}
}

func TestDirectives(t *testing.T) {
	shares := &Intent{Symbol: "SPY", Side: "buy", QuantityType: "shares", Qty: 3}
	ten := &Intent{Symbol: "SPY", Side: "buy", QuantityType: "shares", Qty: 10}
	one := &Intent{Symbol: "SPY", Side: "buy", QuantityType: "shares", Qty: 1}
	notional := &Intent{Symbol: "SPY", Side: "buy", QuantityType: "notional", NotionalUSD: 50}
	sell := &Intent{Symbol: "SPY", Side: "sell", QuantityType: "shares", Qty: 3}
	cancel := &Intent{Side: "cancel", OrderID: "ord-1"}
	for _, tc := range []struct {
		msg  string
		in   *Intent
		want bool
	}{
		{"EXECUTE: buy SPY 3", shares, true},
		{"EXECUTE: BUY spy 3.00", shares, true},
		{"please. EXECUTE: buy SPY 3 shares", shares, true},
		{"EXECUTE: buy SPY 3", sell, false},
		{"EXECUTE: buy SPY 1", ten, false},
		{"EXECUTE: buy SPY 10", one, false},
		{"EXECUTE: buy SPY 10", ten, true},
		{"EXECUTE: buy SPY $50", notional, true},
		{"EXECUTE: buy SPY $50 notional", notional, true},
		{"EXECUTE: buy SPY $50.0", notional, true},
		{"EXECUTE: buy SPY 50", notional, false},
		{"EXECUTE: buy SPY $3", shares, false},
		{"EXECUTE: buy SPYX 3", shares, false},
		{"EXECUTE: buy QQQ 3\nEXECUTE: buy SPY 3", shares, true},
		{"EXECUTE: buy QQQ 3; EXECUTE: buy SPY 3", shares, true},
		{"execute: buy SPY 3", shares, false}, // the marker is literal
		{"EXECUTE: buy SPY", shares, false},
		{"EXECUTE: buy SPY 3 please now", shares, false},
		{"EXECUTE:buy SPY 3", shares, true},
		{"EXECUTE: buy SPY 3 notional", shares, false},
		{"EXECUTE: cancel ord-1", cancel, true},
		{"EXECUTE: cancel ord-2", cancel, false},
		{"EXECUTE: buy SPY -3", shares, false},
		{"EXECUTE: buy SPY NaN", shares, false},
		{"", shares, false},
	} {
		ds, _ := ParseDirectives(tc.msg)
		got := false
		for _, d := range ds {
			got = got || d.Matches(tc.in)
		}
		if got != tc.want {
			t.Errorf("%q vs %+v: match = %v, want %v (parsed %+v)", tc.msg, *tc.in, got, tc.want, ds)
		}
	}
	if _, bad := ParseDirectives("EXECUTE: yolo"); len(bad) != 1 || bad[0] != "yolo" {
		t.Errorf("malformed directive not reported: %q", bad)
	}
}

func TestParseManifest(t *testing.T) {
	ok := "---\nname: m\nstrategist:\n  mode: live\n  account_lock: 619508153\n  time_window: \"22:00-02:00 America/New_York\"\n  allowlist: [SPY]\n  max_position_pct: 5\n  max_concurrent_positions: 2\n  profile_compatibility: [claude-code]\n---\nbody\n"
	m, err := ParseManifest([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "m" || m.Strategist.AccountLock == nil || *m.Strategist.AccountLock != "619508153" || m.Strategist.MaxPositionPct != 5 {
		t.Fatalf("parsed %+v", m)
	}
	w := m.Strategist.window
	for hm, in := range map[string]bool{"23:00": true, "01:59": true, "02:00": false, "12:00": false, "22:00": true} {
		at, _ := time.ParseInLocation("2006-01-02 15:04", "2026-06-26 "+hm, w.loc)
		if w.contains(at) != in {
			t.Errorf("wrapping window contains %s = %v", hm, !in)
		}
	}
	if _, err := ParseManifest([]byte("---\r\nname: m\r\nstrategist: {mode: review}\r\n---")); err != nil {
		t.Errorf("CRLF front matter ending at EOF: %v", err)
	}
	for name, bad := range map[string]string{
		"no front matter":      "name: m\n",
		"unterminated":         "---\nname: m\n",
		"empty":                "---\n---\n",
		"no name":              "---\nstrategist: {mode: live}\n---\n",
		"bad mode":             "---\nname: m\nstrategist: {mode: yolo}\n---\n",
		"pct over 100":         "---\nname: m\nstrategist: {mode: live, max_position_pct: 150}\n---\n",
		"bad window":           "---\nname: m\nstrategist: {mode: live, time_window: \"9-5\"}\n---\n",
		"bad zone":             "---\nname: m\nstrategist: {mode: live, time_window: \"09:30-16:00 Mars/Olympus\"}\n---\n",
		"empty lock":           "---\nname: m\nstrategist: {mode: live, account_lock: \"\"}\n---\n",
		"wrong type":           "---\nname: m\nstrategist: {mode: live, allowlist: {a: b}}\n---\n",
		"negative concurrency": "---\nname: m\nstrategist: {mode: live, max_concurrent_positions: -1}\n---\n",
	} {
		if _, err := ParseManifest([]byte(bad)); contract.KindOf(err) != contract.KindInvalid {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
}

func TestReadManifestPathSafety(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	sd := filepath.Join(root, ManifestDir)
	must(t, os.MkdirAll(filepath.Join(sd, "good"), 0o755))
	must(t, os.WriteFile(filepath.Join(sd, "good", "SKILL.md"), []byte("x"), 0o644))
	must(t, os.MkdirAll(filepath.Join(dir, "outside"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "outside", "SKILL.md"), []byte("secret"), 0o644))
	must(t, os.Symlink(filepath.Join(dir, "outside"), filepath.Join(sd, "abs")))
	must(t, os.Symlink("../../../../outside", filepath.Join(sd, "rel")))
	must(t, os.Symlink("good", filepath.Join(sd, "alias"))) // stays inside: allowed
	must(t, os.MkdirAll(filepath.Join(sd, "filelink"), 0o755))
	must(t, os.Symlink(filepath.Join(dir, "outside", "SKILL.md"), filepath.Join(sd, "filelink", "SKILL.md")))

	if b, err := ReadManifest(root, "good"); err != nil || string(b) != "x" {
		t.Fatalf("good: %q, %v", b, err)
	}
	if b, err := ReadManifest(root, "alias"); err != nil || string(b) != "x" {
		t.Fatalf("alias inside the root: %q, %v", b, err)
	}
	for _, name := range []string{"abs", "rel", "filelink", "../root", "a/b", "", ".", "..", "x\\y", "a\x00"} {
		if _, err := ReadManifest(root, name); err != errPathInvalid {
			t.Errorf("%q: err = %v, want path invalid", name, err)
		}
	}
	if _, err := ReadManifest(root, "absent"); err != errManifestMissing {
		t.Errorf("absent: err = %v", err)
	}
	if _, err := ReadManifest(filepath.Join(dir, "nope"), "good"); err == nil || err == errManifestMissing || !strings.Contains(err.Error(), "skills root") {
		t.Errorf("missing root: err = %v", err)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestParsePayloadDefaultsAndLimits(t *testing.T) {
	p, err := ParsePayload([]byte(`{"strategy":"s","intents":[{"symbol":"BRK.B","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if in := p.Intents[0]; in.AssetClass != AssetEquity || in.TimeInForce != "gfd" {
		t.Errorf("defaults: %+v", in)
	}
	big := `{"strategy":"s","intents":[` + strings.Repeat(`{"side":"cancel","order_id":"o"},`, MaxIntents) + `{"side":"cancel","order_id":"o"}]}`
	if _, err := ParsePayload([]byte(big)); contract.AsError(err).Code != "too_many" {
		t.Errorf("too many intents: %v", err)
	}
	if _, err := ParsePayload(make([]byte, MaxPayloadBytes+1)); contract.AsError(err).Code != "payload_too_large" {
		t.Errorf("too large: %v", err)
	}
	if _, err := ParsePayload([]byte(`{"strategy":"s","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":1,"expires_at":"tomorrow"}]}`)); contract.AsError(err).Field != "/intents/0/expires_at" {
		t.Errorf("bad expires_at: %v", err)
	}
}

func TestDriftCheck(t *testing.T) {
	a := &Action{}
	if r, ok := driftCheck(10, 0, true, a); ok || r != ReasonOriginalNotionalZero {
		t.Errorf("zero original: %q %v", r, ok)
	}
	if _, ok := driftCheck(101, 100, false, a); !ok {
		t.Error("exactly 1% must pass")
	}
	if _, ok := driftCheck(102, 100, true, a); ok {
		t.Error("consent covers only a smaller final notional")
	}
	if _, ok := driftCheck(90, 100, true, a); !ok {
		t.Error("consented downsize refused")
	}
}

func TestBlocking(t *testing.T) {
	for a, want := range map[[2]string]bool{
		{"PATTERN_DAY_TRADE_PROTECTION", ""}:                     true,
		{"FRACTIONAL_SHARES_NOTICE", "ok"}:                       false,
		{"fractional_shares_notice", "ok"}:                       false,
		{"FRACTIONAL_SHARES_NOTICE", "Margin needed"}:            true,
		{"MARKET_ORDER_COLLARED_NOTICE", "Price collar applied"}: true,
		{"BRAND_NEW", ""}:                                        true,
		{"", ""}:                                                 true,
	} {
		if got := Blocking(alert(a)); got != want {
			t.Errorf("%v: blocking = %v", a, got)
		}
	}
}

func alert(a [2]string) broker.Alert { return broker.Alert{Type: a[0], Message: a[1]} }
