package connector

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/discord"
	"github.com/caduceus-dev/caduceus/relay/slack"
	"github.com/caduceus-dev/caduceus/relay/telegram"
	"github.com/caduceus-dev/caduceus/relay/twilio"
	"github.com/caduceus-dev/caduceus/relay/wecom"
	"github.com/caduceus-dev/caduceus/relay/whatsapp"
)

// Guardrails on inbound messages (docs/guardrails.md, "Relay"): each
// platform identity may carry a guardrails section — an action per kind,
// as shim.guardrails, without per-plan overrides — and an inbound message
// of that identity is scanned in Deliver, after deduplication and before
// anything else (the chat's binding, the capability vault, an interrupt,
// the gateway, the buffer) reads it: its text, the replied-to text, the
// media captions and the context messages' texts. Redact replaces each
// value with its typed placeholder; block delivers nothing and answers the
// sender on the platform with the kinds found; flag delivers it unchanged.
// The delivery's audit record carries what was found (direction inbound,
// kind, rule, action, count), never a value.

// guardedIdentity is one identity's guardrails section and where it is
// configured.
type guardedIdentity struct {
	where     string   // relay.telegram.acmebot.guardrails
	platforms []string // a Twilio account is two platforms
	bot       string
	cfg       guard.Config
}

// guardedIdentities lists every configured identity's guardrails, sorted
// by where (so the first error named is always the same one).
func (cfg *Config) guardedIdentities() []guardedIdentity {
	var out []guardedIdentity
	add := func(section, id string, platforms []string, g guard.Config) {
		out = append(out, guardedIdentity{where: "relay." + section + "." + id + ".guardrails", platforms: platforms, bot: id, cfg: g})
	}
	for id, a := range cfg.Discord {
		add("discord", id, []string{discord.Platform}, a.Guardrails)
	}
	for id, b := range cfg.Telegram {
		add("telegram", id, []string{telegram.Platform}, b.Guardrails)
	}
	for id, a := range cfg.Slack {
		add("slack", id, []string{slack.Platform}, a.Guardrails)
	}
	for id, a := range cfg.Twilio {
		add("twilio", id, []string{twilio.PlatformSMS, twilio.PlatformWhatsApp}, a.Guardrails)
	}
	for id, n := range cfg.WhatsApp {
		add("whatsapp", id, []string{whatsapp.Platform}, n.Guardrails)
	}
	for id, a := range cfg.WeCom {
		add("wecom", id, []string{wecom.Platform}, a.Guardrails)
	}
	slices.SortFunc(out, func(a, b guardedIdentity) int { return strings.Compare(a.where, b.where) })
	return out
}

// validateGuardrails checks every identity's guardrails section (kinds,
// actions; no per-plan overrides: plans are the shim's), returning the
// config path of the first bad one with guard's error naming it.
func (cfg *Config) validateGuardrails() (string, error) {
	for _, g := range cfg.guardedIdentities() {
		if err := g.cfg.Validate(g.where, nil); err != nil {
			return g.where, err
		}
	}
	return "", nil
}

// checkGuardrails is validateGuardrails, and a Scanner when any policy
// looks for anything.
func (cfg *Config) checkGuardrails() error {
	if _, err := cfg.validateGuardrails(); err != nil {
		return fmt.Errorf("connector: config: %w", err)
	}
	if cfg.Scanner == nil && cfg.GuardrailsActive() {
		return fmt.Errorf("connector: config: a guardrails policy needs a Scanner")
	}
	return nil
}

// GuardrailsActive reports whether any identity's guardrails policy looks
// for anything: only then does the connector need a Scanner (and the
// binary build its detectors).
func (cfg *Config) GuardrailsActive() bool {
	for _, g := range cfg.guardedIdentities() {
		if g.cfg.Active() {
			return true
		}
	}
	return false
}

// guardEdges gives each edge whose identity's policy looks for anything
// that policy.
func (c *Connector) guardEdges() {
	for _, g := range c.cfg.guardedIdentities() {
		p := g.cfg.Policy("")
		if !p.Active() {
			continue
		}
		for _, platform := range g.platforms {
			if e := c.edges[identKey{platform: platform, bot: g.bot}]; e != nil {
				e.guard = p
			}
		}
	}
}

// guarded is what the guardrails did to one inbound message.
type guarded struct {
	records   []guard.Record
	blocked   []guard.Kind
	redaction contract.Redaction // the guardrails' part (as a shim receipt's)
}

// guardInbound applies the guardrails of the identity (platform, bot) to
// ev: nil when it has none. Under redact, ev's texts are replaced by their
// redacted copies (ev's slices are copied, never written through); when a
// blocked kind is found ev is left as it came (it is not delivered).
func (c *Connector) guardInbound(platform, bot string, ev *relay.MessageEvent) *guarded {
	e := c.edge(platform, bot)
	if e == nil || e.guard == nil || c.cfg.Scanner == nil {
		return nil
	}
	r := guard.NewRedactor(c.cfg.Scanner, e.guard, guard.Inbound)
	out := *ev
	changed := false
	red := func(s *string) {
		if t, ok := r.Redact(*s); ok {
			*s, changed = t, true
		}
	}
	red(&out.Text)
	if ev.ReplyTo != nil {
		rt := *ev.ReplyTo
		red(&rt.Text)
		out.ReplyTo = &rt
	}
	if len(ev.Media) > 0 {
		out.Media = slices.Clone(ev.Media)
		for i := range out.Media {
			red(&out.Media[i].Caption)
		}
	}
	if len(ev.Context) > 0 {
		out.Context = slices.Clone(ev.Context)
		for i := range out.Context {
			red(&out.Context[i].Text)
		}
	}
	g := &guarded{records: r.Records(), blocked: r.Blocked}
	redacted := 0
	for _, rec := range g.records {
		if rec.Action == guard.Redact {
			redacted += rec.Count
		}
	}
	g.redaction = contract.Redaction{Level: contract.RedactionNone, Reason: "guardrails found nothing to redact"}
	if redacted > 0 {
		g.redaction = contract.Redaction{Level: contract.RedactionPartial, Reason: "guardrails replaced " + plural(redacted, "value") + " with placeholders"}
	}
	if changed && len(g.blocked) == 0 {
		*ev = out
	}
	return g
}

// sensitivity is the HUX sensitivity of the message's record: restricted
// when a secret or private key was found, else the relay's own (personal).
func (g *guarded) sensitivity() contract.Sensitivity {
	if s := guard.Sensitivity(g.records); s != "" {
		return s
	}
	return contract.SensitivityPersonal
}

// annotate puts g's records on d, the message's audit payload.
func (g *guarded) annotate(d *delivery) {
	d.Guardrails, d.Sensitivity = g.records, g.sensitivity()
	r := g.redaction
	d.Redaction = &r
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// kindPhrases are the kinds as a chat user reads them.
var kindPhrases = map[guard.Kind]string{
	guard.Secret:     "a secret (a key, token or password)",
	guard.PrivateKey: "a private key",
	guard.Email:      "an e-mail address",
	guard.Phone:      "a phone number",
	guard.Card:       "a payment card number",
	guard.IBAN:       "an IBAN",
	guard.SSN:        "a US social security number",
	guard.IP:         "an IP address",
}

// BlockedReply is what the sender of a blocked message is told on the
// platform: the kinds found, never a value.
func BlockedReply(kinds []guard.Kind) string {
	ks := slices.Clone(kinds)
	slices.SortFunc(ks, func(a, b guard.Kind) int { return slices.Index(guard.Kinds, a) - slices.Index(guard.Kinds, b) })
	phrases := make([]string, len(ks))
	for i, k := range ks {
		phrases[i] = kindPhrases[k]
		if phrases[i] == "" {
			phrases[i] = string(k)
		}
	}
	list := strings.Join(phrases, ", ")
	if n := len(phrases); n > 1 {
		list = strings.Join(phrases[:n-1], ", ") + " and " + phrases[n-1]
	}
	return "This message was not passed to the agent: it holds " + list +
		", which this chat's guardrails block. Send it again without them."
}

// kindNames lists kinds by name: "secret, email".
func kindNames(kinds []guard.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// blockedError is the error of a blocked message's record: the kinds.
func blockedError(kinds []guard.Kind) string { return "guardrails blocked " + kindNames(kinds) }

// RefusalTimeout bounds the platform call that tells a blocked message's
// sender.
const RefusalTimeout = 10 * time.Second

// replyBlocked tells the sender of the blocked message ev, in its chat (and
// thread or topic), replying to it where the platform threads replies. It
// runs off the webhook's path; a failure is logged (never with the text).
func (c *Connector) replyBlocked(bot string, ev relay.MessageEvent, kinds []guard.Kind) {
	src := ev.Source
	e := c.edge(src.Platform, bot)
	if e == nil {
		return
	}
	replyTo := ev.MessageID
	if ev.PromptResponse != nil {
		replyTo = "" // a button press: its id is the callback's, not a message's
	}
	msg := BlockedReply(kinds)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), RefusalTimeout)
		defer cancel()
		var err error
		if e.platform == telegram.Platform {
			// Plain text: the refusal is not MarkdownV2.
			_, err = e.telegram.SendMessage(ctx, src.ChatID, msg, telegram.SendOptions{ThreadID: src.ThreadID, ReplyTo: replyTo})
		} else {
			meta := map[string]any{}
			if src.ThreadID != "" {
				meta["thread_id"] = src.ThreadID
			}
			_, err = e.send(ctx, src.ChatID, msg, replyTo, meta)
		}
		if err != nil {
			c.log.Warn("relay: the sender of a blocked message could not be told", "platform", src.Platform, "bot", bot,
				"chat", src.ChatID, "message", ev.MessageID, "err", err)
		}
	}()
}

// discordBlocked is the answer to a Discord interaction whose message was
// blocked: an ephemeral message to the user who sent it.
func discordBlocked(kinds []guard.Kind) []byte {
	b, _ := json.Marshal(map[string]any{"type": 4, "data": map[string]any{"content": BlockedReply(kinds), "flags": 64}})
	return b
}
