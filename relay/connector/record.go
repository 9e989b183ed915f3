package connector

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
)

// entry is one audit record to write. It holds ids and hashes, never
// message text or capability material.
type entry struct {
	tenant    contract.TenantSlot
	action    string // relay.deliver, relay.buffer, relay.outbound, relay.interrupt, relay.connect
	resource  string
	outcome   contract.Outcome
	reason    string
	subjectOf string // what the subject hash is taken from ("discord:555", "gateway:gw-1")
	platform  string
	actor     contract.ActorType

	sessionKey string
	messageID  string
	gateway    string
	conn       string
	payload    *delivery
	// guard is what the guardrails did to an inbound message (nil: no
	// policy applied).
	guard *guarded
}

// delivery is the audit payload of a delivery in or out.
type delivery struct {
	Direction     string `json:"direction"` // in, out
	Platform      string `json:"platform,omitempty"`
	Bot           string `json:"bot,omitempty"`
	ChatID        string `json:"chat_id,omitempty"`
	SessionKey    string `json:"session_key,omitempty"`
	MessageID     string `json:"message_id,omitempty"`
	BufferID      string `json:"buffer_id,omitempty"`
	Op            string `json:"op,omitempty"`
	RequestID     string `json:"request_id,omitempty"`
	Kind          string `json:"kind,omitempty"`
	Chunks        int    `json:"chunks,omitempty"`
	ContentSHA256 string `json:"content_sha256,omitempty"`
	Gateway       string `json:"gateway,omitempty"`
	Conn          string `json:"conn,omitempty"`
	Success       bool   `json:"success"`
	Error         string `json:"error,omitempty"`
	// Guardrails, Sensitivity and Redaction are what the platform's
	// guardrails found in an inbound message (kind, rule, action, count;
	// never a value) and the HUX fields they make, as a shim receipt's.
	Guardrails  []guard.Record       `json:"guardrails,omitempty"`
	Sensitivity contract.Sensitivity `json:"sensitivity,omitempty"`
	Redaction   *contract.Redaction  `json:"redaction,omitempty"`
}

var _ audit.CanonicalWriter = (*delivery)(nil)

// WriteCanonicalJSON writes d's canonical JSON (contract.CanonicalJSON of
// its encoding/json form: keys sorted, empty fields omitted) directly, so
// the audit log neither marshals it by reflection nor canonicalizes it
// again. TestDeliveryCanonical proves the two equal.
func (d *delivery) WriteCanonicalJSON(b *bytes.Buffer) {
	b.Grow(320)
	o := contract.NewJSONObject(b)
	str := func(k, v string) { o.OptStr(k, validUTF8(v)) }
	// In key order.
	str("bot", d.Bot)
	str("buffer_id", d.BufferID)
	str("chat_id", d.ChatID)
	if d.Chunks != 0 {
		o.Int("chunks", int64(d.Chunks))
	}
	str("conn", d.Conn)
	str("content_sha256", d.ContentSHA256)
	o.Str("direction", validUTF8(d.Direction)) // always present: no omitempty
	str("error", d.Error)
	str("gateway", d.Gateway)
	if len(d.Guardrails) > 0 {
		o.Key("guardrails")
		b.WriteByte('[')
		for i, g := range d.Guardrails {
			if i > 0 {
				b.WriteByte(',')
			}
			w := contract.NewJSONObject(b)
			w.Str("action", validUTF8(string(g.Action)))
			w.Int("count", int64(g.Count))
			w.Str("direction", validUTF8(string(g.Direction)))
			w.Str("kind", validUTF8(string(g.Kind)))
			w.Str("rule", validUTF8(g.Rule))
			w.End()
		}
		b.WriteByte(']')
	}
	str("kind", d.Kind)
	str("message_id", d.MessageID)
	str("op", d.Op)
	str("platform", d.Platform)
	if d.Redaction != nil {
		o.Key("redaction")
		w := contract.NewJSONObject(b)
		w.Str("level", validUTF8(string(d.Redaction.Level)))
		w.OptStr("reason", validUTF8(d.Redaction.Reason))
		w.End()
	}
	str("request_id", d.RequestID)
	str("sensitivity", string(d.Sensitivity))
	str("session_key", d.SessionKey)
	o.Bool("success", d.Success)
	o.End()
}

// validUTF8 replaces each invalid byte of s with U+FFFD, as encoding/json
// does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		b.WriteRune(r) // an invalid byte ranges as utf8.RuneError
	}
	return b.String()
}

// subject hashes an outside identity into a HUX user_ref.
func subject(of string) string {
	var in [128]byte
	sum := sha256.Sum256(append(append(in[:0], "relay:"...), of...))
	var out [4 + 32]byte
	return string(hex.AppendEncode(append(out[:0], "usr_"...), sum[:16]))
}

// contentHash is contract.SHA256 of s, without copying s.
func contentHash(s string) string {
	if s == "" {
		return ""
	}
	h := sha256.New()
	_, _ = io.WriteString(h, s)
	var sum [sha256.Size]byte
	var out [7 + 2*sha256.Size]byte
	return string(hex.AppendEncode(append(out[:0], "sha256:"...), h.Sum(sum[:0])))
}

func trunc(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// TextAsHash is the redaction of a delivery's record: the message text is
// kept as its sha256 (content_sha256), never as text.
var TextAsHash = contract.Redaction{Level: contract.RedactionPartial, Reason: "message text kept as its sha256"}

// record writes e to the audit log on a context detached from the request,
// so a client hanging up cannot erase it. Failures are logged.
func (c *Connector) record(ctx context.Context, e entry) {
	surface := contract.SurfaceChat
	if e.platform == "telegram" {
		surface = contract.SurfaceTelegram
	}
	actor := e.actor
	if actor == "" {
		actor = contract.ActorSystem
	}
	sub := subject(e.subjectOf)
	now := contract.Timestamp(c.now())
	out := contract.AuditOutcome{
		At:       now,
		Identity: contract.Identity{TenantSlot: e.tenant, Subject: sub, Surface: surface, Trust: contract.TrustRelay},
		Action:   e.action,
		Resource: contract.StorableText(e.resource, 200),
		Outcome:  e.outcome,
		Reason:   contract.StorableText(e.reason, 200),
	}
	prov := &contract.Provenance{Surface: surface, Actor: contract.Actor{Type: actor, ID: sub}, RecordedAt: now,
		MessageID: contract.StorableText(e.messageID, 120)}
	if e.sessionKey != "" {
		// The conversation every gate files this session's records under.
		prov.ConversationID = contract.ConversationFor(e.tenant, e.sessionKey)
		if len(e.sessionKey) <= 120 {
			prov.SessionID = e.sessionKey
		} else {
			prov.SessionID = contract.SHA256([]byte(e.sessionKey))
		}
	}
	// The route: the platform asked for, the gateway (or connection) it
	// resolved to.
	requested := e.platform
	if requested == "" {
		requested = "gateway"
	}
	target := e.gateway
	if target == "" {
		target = e.conn
	}
	prov.Route = &contract.Route{Requested: contract.StorableText(requested, 120), ResolvedTarget: contract.StorableText(target, 120)}
	if c.cfg.Build != "" {
		prov.Build = &contract.Build{Commit: c.cfg.Build}
	} else {
		prov.Build = contract.CurrentBuild()
	}
	ae := audit.Entry{Outcome: out, Provenance: prov}
	if e.payload != nil {
		ae.Payload = e.payload
		if e.payload.ContentSHA256 != "" {
			ae.Redaction = &TextAsHash
		}
	}
	if g := e.guard; g != nil {
		// The record says what the guardrails did as well, as the shim's.
		base := TextAsHash.Reason
		if e.payload == nil || e.payload.ContentSHA256 == "" {
			base = "message text not kept"
		}
		ae.Redaction = &contract.Redaction{Level: contract.RedactionPartial, Reason: base + "; " + g.redaction.Reason}
		if s := g.sensitivity(); s == contract.SensitivityRestricted {
			ae.Sensitivity = s
		}
	}
	if _, err := c.cfg.Audit.Append(context.WithoutCancel(ctx), ae); err != nil {
		c.log.Error("relay: audit append failed", "action", e.action, "err", err)
	}
	if e.guard != nil && c.cfg.OnGuardrail != nil {
		for _, r := range e.guard.records {
			c.cfg.OnGuardrail(r)
		}
	}
}
