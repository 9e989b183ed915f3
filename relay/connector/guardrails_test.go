package connector_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/guard/guardtest"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/relaytest"
)

// planted are the values the relay's guardrails tests send: an AWS key, an
// e-mail address and a card number.
var planted = []guardtest.Planted{guardtest.Values[0], guardtest.Values[3], guardtest.Values[5]}

func plantedText() string {
	return fmt.Sprintf("deploy with %s, write to %s, charge %s", planted[0].Value, planted[1].Value, planted[2].Value)
}

// guardedEnv is an env whose Telegram bot and Discord app carry policy,
// with the detectors wired in and the records OnGuardrail is told kept.
func guardedEnv(t *testing.T, policy guard.Actions) (*env, func() []guard.Record) {
	var mu sync.Mutex
	var told []guard.Record
	e := newEnv(t, func(c *connector.Config) {
		tg := c.Telegram[telegramBot]
		tg.Guardrails = guard.Config{Actions: policy}
		c.Telegram[telegramBot] = tg
		d := c.Discord[discordApp]
		d.Guardrails = guard.Config{Actions: policy}
		c.Discord[discordApp] = d
		c.Scanner = detect.MustDefault()
		c.OnGuardrail = func(r guard.Record) { mu.Lock(); told = append(told, r); mu.Unlock() }
	})
	e.telegram.mu.Lock()
	e.telegram.seen = make(chan string, 64)
	e.telegram.mu.Unlock()
	return e, func() []guard.Record { mu.Lock(); defer mu.Unlock(); return slices.Clone(told) }
}

// deliveryPayload is what a guarded delivery's audit payload says.
type deliveryPayload struct {
	ContentSHA256 string               `json:"content_sha256"`
	Error         string               `json:"error"`
	Success       bool                 `json:"success"`
	Guardrails    []guard.Record       `json:"guardrails"`
	Sensitivity   contract.Sensitivity `json:"sensitivity"`
	Redaction     *contract.Redaction  `json:"redaction"`
}

// inboundRecord returns the audit record of the message whose id is msg.
func inboundRecord(t *testing.T, e *env, msg string) (audit.Record, deliveryPayload) {
	t.Helper()
	for _, r := range e.audit.Records(slot1) {
		if r.Provenance != nil && r.Provenance.MessageID == msg && (r.Outcome.Action == "relay.deliver" || r.Outcome.Action == "relay.buffer") {
			var p deliveryPayload
			if err := json.Unmarshal(r.Payload, &p); err != nil {
				t.Fatal(err)
			}
			return r, p
		}
	}
	t.Fatalf("no delivery record of message %s", msg)
	return audit.Record{}, deliveryPayload{}
}

// wantRecords checks a guardrails list: the three planted values found
// inbound under act, one each, by their rules.
func wantRecords(t *testing.T, what string, got []guard.Record, act guard.Action) {
	t.Helper()
	want := []guard.Record{
		{Direction: guard.Inbound, Kind: guard.Secret, Rule: "aws-access-token", Action: act, Count: 1},
		{Direction: guard.Inbound, Kind: guard.Email, Rule: "email", Action: act, Count: 1},
		{Direction: guard.Inbound, Kind: guard.Card, Rule: "card-luhn", Action: act, Count: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: guardrails %+v, want %+v", what, got, want)
	}
}

// noTrace fails t if the audit records, the buffer or the log hold a
// planted value.
func noTrace(t *testing.T, e *env) {
	t.Helper()
	if leaks := guardtest.Leaks([]byte(e.auditBodies(slot1)), planted); len(leaks) > 0 {
		t.Errorf("audit records hold %v", leaks)
	}
	if leaks := guardtest.Leaks([]byte(e.logs.String()), planted); len(leaks) > 0 {
		t.Errorf("the log holds %v", leaks)
	}
}

// Under redact, a Telegram message holding an AWS key, an e-mail address
// and a card number reaches the gateway with typed placeholders — live
// and from the buffer — and its record says what was replaced.
func TestGuardrailsRedactInbound(t *testing.T) {
	e, told := guardedEnv(t, guard.Actions{"default": guard.Redact})
	// No gateway yet: the event is buffered, redacted.
	if code := e.postTelegram(forumUpdate(1, 10, 3, plantedText()+" (again "+planted[1].Value+")"), tgSecret); code != 200 {
		t.Fatalf("webhook %d", code)
	}
	pending, err := e.store.Pending(t.Context(), slot1, "telegram", telegramBot, e.clock.Now(), 10)
	if err != nil || len(pending) != 1 {
		t.Fatalf("pending %v %v", pending, err)
	}
	if leaks := guardtest.Leaks(pending[0].Event, planted); len(leaks) > 0 {
		t.Errorf("the buffer holds %v", leaks)
	}
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	in := g.next(t)
	want := "deploy with [REDACTED:secret:1], write to [REDACTED:email:1], charge [REDACTED:card:1] (again [REDACTED:email:1])"
	if in.Event.Text != want {
		t.Errorf("the agent got %q, want %q", in.Event.Text, want)
	}
	// Live, a reply's quoted text is redacted as well.
	reply := fmt.Sprintf(`{"update_id":2,"message":{"message_id":11,"message_thread_id":3,"is_topic_message":true,
		"from":{"id":9,"first_name":"Al"},"chat":{"id":%s,"type":"supergroup","title":"Team","is_forum":true},
		"date":1700000000,"text":"and this one","reply_to_message":{"message_id":5,"from":{"id":8,"first_name":"Bo"},
		"chat":{"id":%s,"type":"supergroup"},"date":1700000000,"text":%q}}}`, forumChat, forumChat, "card "+planted[2].Value)
	if code := e.postTelegram(reply, tgSecret); code != 200 {
		t.Fatalf("webhook %d", code)
	}
	in = g.next(t)
	if in.Event.Text != "and this one" || in.Event.ReplyTo == nil || in.Event.ReplyTo.Text != "card [REDACTED:card:1]" {
		t.Errorf("reply %q, replied-to %+v", in.Event.Text, in.Event.ReplyTo)
	}

	rec, p := inboundRecord(t, e, "10")
	recs := p.Guardrails
	// The e-mail was there twice.
	if len(recs) == 3 && recs[1].Count == 2 {
		recs = slices.Clone(recs)
		recs[1].Count = 1
	}
	wantRecords(t, "buffered", recs, guard.Redact)
	if rec.Outcome.Action != "relay.buffer" || !p.Success || p.ContentSHA256 != contract.SHA256([]byte(want)) {
		t.Errorf("record %s success %v hash %s", rec.Outcome.Action, p.Success, p.ContentSHA256)
	}
	if p.Sensitivity != contract.SensitivityRestricted || rec.Sensitivity != contract.SensitivityRestricted {
		t.Errorf("sensitivity: payload %q record %q, want restricted (a secret was found)", p.Sensitivity, rec.Sensitivity)
	}
	if p.Redaction == nil || p.Redaction.Level != contract.RedactionPartial || p.Redaction.Reason != "guardrails replaced 4 values with placeholders" {
		t.Errorf("payload redaction %+v", p.Redaction)
	}
	if rec.Redaction == nil || rec.Redaction.Reason != "message text kept as its sha256; guardrails replaced 4 values with placeholders" {
		t.Errorf("record redaction %+v", rec.Redaction)
	}
	_, p = inboundRecord(t, e, "11")
	if len(p.Guardrails) != 1 || p.Guardrails[0].Kind != guard.Card || p.Sensitivity != contract.SensitivityPersonal {
		t.Errorf("reply's record: %+v %q", p.Guardrails, p.Sensitivity)
	}
	if got := told(); len(got) != 4 {
		t.Errorf("OnGuardrail was told %+v", got)
	}
	noTrace(t, e)
}

// Under block, the message never reaches the gateway; the sender is told
// on the platform (the kinds, never the values) and the refusal is
// recorded. A Discord interaction is answered with the refusal itself,
// seen only by its user.
func TestGuardrailsBlockInbound(t *testing.T) {
	e, told := guardedEnv(t, guard.Actions{"default": guard.Flag, "card": guard.Block, "secret": guard.Block, "email": guard.Redact})
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	if code := e.postTelegram(forumUpdate(1, 10, 3, plantedText()), tgSecret); code != 200 {
		t.Fatalf("webhook %d", code)
	}
	waitCall(t, e.telegram.seen, "POST /bot123:TGTOKEN/sendMessage")
	// The next message of the chat arrives first: the blocked one was not
	// delivered (events of one chat arrive in order).
	if code := e.postTelegram(forumUpdate(2, 11, 3, "hello again"), tgSecret); code != 200 {
		t.Fatalf("webhook %d", code)
	}
	if in := g.next(t); in.Event.Text != "hello again" {
		t.Fatalf("the gateway got %q", in.Event.Text)
	}
	var sent map[string]any
	for _, c := range e.telegram.Calls() {
		if strings.HasSuffix(c.Path, "/sendMessage") {
			sent = c.Body
		}
	}
	text, _ := sent["text"].(string)
	if text != "This message was not passed to the agent: it holds a secret (a key, token or password) and a payment card number, which this chat's guardrails block. Send it again without them." ||
		fmt.Sprint(sent["chat_id"]) != forumChat || fmt.Sprint(sent["message_thread_id"]) != "3" || sent["parse_mode"] != nil {
		t.Errorf("the sender was told %v", sent)
	}
	if rp, _ := sent["reply_parameters"].(map[string]any); rp == nil || fmt.Sprint(rp["message_id"]) != "10" {
		if fmt.Sprint(sent["reply_to_message_id"]) != "10" {
			t.Errorf("the refusal does not reply to the message: %v", sent)
		}
	}
	rec, p := inboundRecord(t, e, "10")
	if rec.Outcome.Action != "relay.deliver" || rec.Outcome.Outcome != contract.OutcomeDeny || rec.Outcome.Reason != guard.CodeBlocked ||
		p.Success || p.ContentSHA256 != "" || p.Error != "guardrails blocked secret, card" {
		t.Errorf("record %+v payload %+v", rec.Outcome, p)
	}
	want := []guard.Record{
		{Direction: guard.Inbound, Kind: guard.Secret, Rule: "aws-access-token", Action: guard.Block, Count: 1},
		{Direction: guard.Inbound, Kind: guard.Email, Rule: "email", Action: guard.Redact, Count: 1},
		{Direction: guard.Inbound, Kind: guard.Card, Rule: "card-luhn", Action: guard.Block, Count: 1},
	}
	if !slices.Equal(p.Guardrails, want) {
		t.Errorf("guardrails %+v", p.Guardrails)
	}
	if rec.Redaction == nil || !strings.HasPrefix(rec.Redaction.Reason, "message text not kept; ") || rec.Sensitivity != contract.SensitivityRestricted {
		t.Errorf("record redaction %+v sensitivity %q", rec.Redaction, rec.Sensitivity)
	}
	if got := told(); !slices.Equal(got, want) {
		t.Errorf("OnGuardrail was told %+v", got)
	}
	// The chat was not bound by the blocked message alone, nor a retry
	// answered twice.
	if code := e.postTelegram(forumUpdate(1, 10, 3, plantedText()), tgSecret); code != 200 {
		t.Fatalf("retry %d", code)
	}
	if n := e.auditActions(slot1)["relay.deliver/deny"]; n != 1 {
		t.Errorf("deny records %d after a retry", n)
	}

	// A Discord interaction: answered with the refusal, ephemeral; nothing
	// delivered, no platform call.
	dg := e.gateway("gw-a", secretA, "discord", discordApp)
	before := len(e.discord.Calls())
	status, body := e.postDiscord(interaction("1200000000000000001", "111", "333", "555", interactionToken, "use "+planted[0].Value), nil)
	var answer struct {
		Type int `json:"type"`
		Data struct {
			Content string `json:"content"`
			Flags   int    `json:"flags"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || status != 200 || answer.Type != 4 || answer.Data.Flags != 64 ||
		!strings.Contains(answer.Data.Content, "a secret") || strings.Contains(body, planted[0].Value) {
		t.Errorf("interaction answered %d %s", status, body)
	}
	status, _ = e.postDiscord(interaction("1200000000000000002", "111", "333", "555", interactionToken, "plain question"), nil)
	if in := dg.next(t); status != 200 || in.Event.Text != "/ask plain question" {
		t.Errorf("the next interaction: %d %q", status, in.Event.Text)
	}
	if after := len(e.discord.Calls()); after != before {
		t.Errorf("Discord API calls %d -> %d", before, after)
	}
	noTrace(t, e)
}

// Under flag, the message arrives unchanged and its findings are recorded.
func TestGuardrailsFlagInbound(t *testing.T) {
	e, told := guardedEnv(t, guard.Actions{"default": guard.Flag})
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	if code := e.postTelegram(forumUpdate(1, 10, 3, plantedText()), tgSecret); code != 200 {
		t.Fatalf("webhook %d", code)
	}
	if in := g.next(t); in.Event.Text != plantedText() {
		t.Errorf("the agent got %q", in.Event.Text)
	}
	rec, p := inboundRecord(t, e, "10")
	wantRecords(t, "flagged", p.Guardrails, guard.Flag)
	if rec.Outcome.Outcome != contract.OutcomeAllow || p.Redaction == nil || p.Redaction.Level != contract.RedactionNone ||
		rec.Redaction == nil || rec.Redaction.Reason != "message text kept as its sha256; guardrails found nothing to redact" {
		t.Errorf("record %+v payload redaction %+v record redaction %+v", rec.Outcome, p.Redaction, rec.Redaction)
	}
	wantRecords(t, "told", told(), guard.Flag)
	noTrace(t, e)
}

// A platform without a guardrails section, or one whose policy looks for
// nothing, is not scanned and its records carry no guardrails.
func TestGuardrailsOffInbound(t *testing.T) {
	e, told := guardedEnv(t, guard.Actions{"default": guard.Off})
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	e.postTelegram(forumUpdate(1, 10, 3, plantedText()), tgSecret)
	if in := g.next(t); in.Event.Text != plantedText() {
		t.Errorf("the agent got %q", in.Event.Text)
	}
	rec, p := inboundRecord(t, e, "10")
	if p.Guardrails != nil || p.Redaction != nil || p.Sensitivity != "" || rec.Redaction.Reason != connector.TextAsHash.Reason || len(told()) != 0 {
		t.Errorf("record %+v payload %+v", rec, p)
	}
}

// A guardrails section with an unknown kind or action, or per-plan
// overrides, is refused naming the platform, the identity and the setting;
// an active policy needs a Scanner.
func TestGuardrailsConfigErrors(t *testing.T) {
	base := func(g guard.Config) connector.FileConfig {
		return connector.FileConfig{
			Telegram: map[string]connector.FileTelegramBot{"acmebot": {Token: "1:T", SecretToken: "s", Tenant: "slot-1", Guardrails: g}},
		}
	}
	for _, tc := range []struct {
		f    connector.FileConfig
		want string
	}{
		{base(guard.Config{Actions: guard.Actions{"emial": guard.Redact}}),
			`relay: relay.telegram.acmebot.guardrails: unknown kind "emial": want default or one of secret, private_key, email, phone, card, iban, ssn, ip`},
		{base(guard.Config{Actions: guard.Actions{"email": "mask"}}),
			`relay: relay.telegram.acmebot.guardrails.email: unknown action "mask": want redact, block, flag or off`},
		{base(guard.Config{Plans: map[string]guard.Actions{"main": {"email": guard.Block}}}),
			`relay: relay.telegram.acmebot.guardrails.plans: per-plan overrides are not allowed here`},
		{connector.FileConfig{FilePlatforms: connector.FilePlatforms{Twilio: map[string]connector.FileTwilioAccount{
			"AC1": {AuthToken: "t", PublicURL: "https://r.example.com/hooks/twilio/AC1", Tenant: "slot-1",
				Guardrails: guard.Config{Actions: guard.Actions{"default": "deny"}}}}}},
			`relay: relay.twilio.AC1.guardrails.default: unknown action "deny": want redact, block, flag or off`},
	} {
		_, err := tc.f.Config(func(string) string { return "" })
		if err == nil || contract.AsError(err).Message != tc.want {
			t.Errorf("got %v\nwant %s", err, tc.want)
		}
	}
	cfg, err := base(guard.Config{Actions: guard.Actions{"secret": guard.Redact}}).Config(func(string) string { return "" })
	if err != nil || !cfg.GuardrailsActive() {
		t.Fatalf("%v active %v", err, cfg.GuardrailsActive())
	}
	cfg.Store, cfg.Audit = relaytest.NewMemory(), audit.NewMemory()
	if c, err := connector.New(cfg); err == nil || !strings.Contains(err.Error(), "needs a Scanner") {
		t.Errorf("no scanner: %v", err)
		if c != nil {
			c.Close()
		}
	}
	off, _ := base(guard.Config{Actions: guard.Actions{"default": guard.Off}}).Config(func(string) string { return "" })
	if off.GuardrailsActive() {
		t.Error("an all-off policy is active")
	}
}
