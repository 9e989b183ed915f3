package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/guard/guardtest"
	"github.com/caduceus-dev/caduceus/relay/gateway"
)

// signallingTelegram is a fake Bot API that records sendMessage bodies and
// signals each one.
type signallingTelegram struct {
	mu   sync.Mutex
	sent []string
	seen chan struct{}
}

func (f *signallingTelegram) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if strings.HasSuffix(r.URL.Path, "/sendMessage") {
		f.mu.Lock()
		f.sent = append(f.sent, r.URL.Path+" "+string(b))
		f.mu.Unlock()
		f.seen <- struct{}{}
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true,"result":{"message_id":501,"date":1700000000,"chat":{"id":-1001,"type":"supergroup"}}}`)
}

// TestRelayGuardrails runs serve with three Telegram bots, one per action
// (redact, block, flag), at debug level, with a gateway adapter on each. A
// message holding an AWS key, an e-mail address and a card number reaches
// the agent with placeholders under redact; under block it does not reach
// it, the sender is told (the kinds, no value) and the refusal recorded;
// under flag it arrives unchanged. Every delivery record carries the
// guardrails list, /metrics counts the findings with direction inbound —
// and after shutdown no file of the store and no log line holds a planted
// value.
func TestRelayGuardrails(t *testing.T) {
	tg := &signallingTelegram{seen: make(chan struct{}, 8)}
	tgSrv := httptest.NewServer(tg)
	defer tgSrv.Close()
	secret := "a-shared-gateway-secret-of-40-characters"
	cfg := filepath.Join(t.TempDir(), "caduceus.yaml")
	bot := func(name, policy string) string {
		return fmt.Sprintf("    %s: {token: \"env:TG_TOKEN\", secret_token: tg-secret, tenant: slot-1, parse_mode: plain, guardrails: %s}\n", name, policy)
	}
	os.WriteFile(cfg, []byte(fmt.Sprintf(`log_level: debug
relay:
  telegram_base_url: %s
  gateways:
    gw-a: {tenant: slot-1, secrets: ["env:GW_A_SECRET"]}
  telegram:
`, tgSrv.URL)+bot("redactbot", "{default: redact}")+bot("blockbot", "{default: flag, secret: block, card: block}")+bot("flagbot", "{default: flag}")), 0o600)
	env := map[string]string{"GW_A_SECRET": secret, "TG_TOKEN": "123:TGTOKEN"}
	in := startEnv(t, func(k string) string { return env[k] }, "--config", cfg)

	planted := []guardtest.Planted{guardtest.Values[0], guardtest.Values[3], guardtest.Values[5]}
	text := fmt.Sprintf("deploy with %s, write to %s, charge %s", planted[0].Value, planted[1].Value, planted[2].Value)
	post := func(bot string, id int, text string) {
		t.Helper()
		update := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":42,"first_name":"Al"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1700000000,"text":%q}}`, id, id, text)
		req, _ := http.NewRequest("POST", in.url+"/hooks/telegram/"+bot, strings.NewReader(update))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "tg-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("webhook %s: %d", bot, resp.StatusCode)
		}
	}
	next := func(events <-chan gateway.Inbound, what string) gateway.Inbound {
		t.Helper()
		select {
		case ev := <-events:
			return ev
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no event reached the gateway", what)
			return gateway.Inbound{}
		}
	}

	_, redacted, _ := connectAdapter(t, in.url, "gw-a", secret, "telegram", "redactbot")
	_, blocked, _ := connectAdapter(t, in.url, "gw-a", secret, "telegram", "blockbot")
	_, flagged, _ := connectAdapter(t, in.url, "gw-a", secret, "telegram", "flagbot")

	post("redactbot", 1, text)
	if got, want := next(redacted, "redact").Event.Text, "deploy with [REDACTED:secret:1], write to [REDACTED:email:1], charge [REDACTED:card:1]"; got != want {
		t.Errorf("redact: the agent got %q, want %q", got, want)
	}

	post("blockbot", 2, text)
	select {
	case <-tg.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("block: the sender was not told")
	}
	post("blockbot", 3, "hello again")
	// Events of one chat arrive in order: had the blocked message been
	// delivered, it would have come first.
	if got := next(blocked, "block").Event.Text; got != "hello again" {
		t.Errorf("block: the agent got %q", got)
	}
	tg.mu.Lock()
	told := strings.Join(tg.sent, "\n")
	tg.mu.Unlock()
	if !strings.Contains(told, "/bot123:TGTOKEN/sendMessage") || !strings.Contains(told, "not passed to the agent") ||
		!strings.Contains(told, "a secret") || !strings.Contains(told, "a payment card number") || strings.Contains(told, "e-mail") {
		t.Errorf("block: the sender was told %s", told)
	}

	post("flagbot", 4, text)
	if got := next(flagged, "flag").Event.Text; got != text {
		t.Errorf("flag: the agent got %q", got)
	}

	resp, err := http.Get(in.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`caduceus_guardrail_findings_total{action="redact",direction="inbound",kind="secret"}`,
		`caduceus_guardrail_findings_total{action="redact",direction="inbound",kind="email"}`,
		`caduceus_guardrail_findings_total{action="redact",direction="inbound",kind="card"}`,
		`caduceus_guardrail_findings_total{action="block",direction="inbound",kind="secret"}`,
		`caduceus_guardrail_findings_total{action="block",direction="inbound",kind="card"}`,
		`caduceus_guardrail_findings_total{action="flag",direction="inbound",kind="email"}`,
		`caduceus_guardrail_findings_total{action="flag",direction="inbound",kind="card"}`,
	} {
		if !regexp.MustCompile(regexp.QuoteMeta(want) + ` [1-9]`).Match(metrics) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	code, tail, errOut := cli(t, "audit", "tail", "--data", in.data, "--tenant", "slot-1", "--json", "-n", "100")
	if code != 0 {
		t.Fatalf("audit tail: %s", errOut)
	}
	byMessage := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(tail), "\n") {
		var r struct {
			Outcome struct {
				Action, Outcome, Reason string
			} `json:"outcome"`
			Provenance struct {
				MessageID string `json:"message_id"`
			} `json:"provenance"`
			Sensitivity string          `json:"sensitivity"`
			Payload     json.RawMessage `json:"payload"`
		}
		if json.Unmarshal([]byte(line), &r) == nil && strings.HasPrefix(r.Outcome.Action, "relay.deliver") {
			byMessage[r.Provenance.MessageID] = r.Outcome.Outcome + " " + r.Outcome.Reason + " " + r.Sensitivity + " " + string(r.Payload)
		}
	}
	for id, want := range map[string][]string{
		"1": {"allow", "restricted", `"guardrails":[{"action":"redact","count":1,"direction":"inbound","kind":"secret","rule":"aws-access-token"}`, `"redaction":{"level":"partial","reason":"guardrails replaced 3 values with placeholders"}`},
		"2": {"deny guardrail_blocked restricted", `{"action":"block","count":1,"direction":"inbound","kind":"card","rule":"card-luhn"}`, `"error":"guardrails blocked secret, card"`},
		"4": {"allow", `{"action":"flag","count":1,"direction":"inbound","kind":"email","rule":"email"}`, `"redaction":{"level":"none"`},
	} {
		for _, w := range want {
			if !strings.Contains(byMessage[id], w) {
				t.Errorf("message %s's record lacks %s: %s", id, w, byMessage[id])
			}
		}
	}

	in.cancel()
	code = <-in.done
	in.done <- code
	if code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, in.stderr.String())
	}
	scan := func(what string, b []byte) {
		t.Helper()
		if leaks := guardtest.Leaks(b, planted); len(leaks) > 0 {
			t.Errorf("%s holds %v", what, leaks)
		}
	}
	scan("/metrics", metrics)
	scan("the audit trail", []byte(tail))
	scan("the log", []byte(in.stderr.String()))
	if !strings.Contains(in.stderr.String(), "level=DEBUG") && !strings.Contains(in.stderr.String(), `"level":"DEBUG"`) {
		t.Errorf("no debug line was logged")
	}
	scanFiles(t, in.data, "", scan)
}

// TestRelayGuardrailsConfigRefused: serve refuses a platform's guardrails
// section with an unknown kind or action at startup, naming the platform,
// the bot and the setting.
func TestRelayGuardrailsConfigRefused(t *testing.T) {
	for policy, want := range map[string]string{
		"{emial: redact}":  `relay.telegram.acmebot.guardrails: unknown kind "emial": want default or one of secret, private_key, email, phone, card, iban, ssn, ip`,
		"{card: mask}":     `relay.telegram.acmebot.guardrails.card: unknown action "mask": want redact, block, flag or off`,
		"{plans: {a: {}}}": `relay.telegram.acmebot.guardrails.plans: per-plan overrides are not allowed here`,
	} {
		dir := t.TempDir()
		cfg := filepath.Join(dir, "caduceus.yaml")
		os.WriteFile(cfg, []byte(`relay:
  gateways:
    gw-a: {tenant: slot-1, secrets: ["a-shared-gateway-secret-of-40-characters"]}
  telegram:
    acmebot: {token: "1:T", secret_token: s, tenant: slot-1, guardrails: `+policy+`}
`), 0o600)
		var out, errb strings.Builder
		code := run(t.Context(), []string{"serve", "--addr", "127.0.0.1:0", "--data", dir, "--config", cfg}, noEnv, strings.NewReader(""), &out, &errb)
		if code != 2 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 and %s", policy, code, errb.String(), want)
		}
	}
}
