package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// BenchmarkSealBody measures sealing a prepared record (its body and its
// link): the hand-written body ("hand", Sealable.Seal) against the
// record's encoding/json form made canonical by contract.CanonicalJSON,
// then linked ("encoding_json"). The entry is a shim.proxy record with a
// receipt-sized payload (1.4 KB) and a full provenance.
func BenchmarkSealBody(b *testing.B) {
	payload, err := contract.CanonicalJSON(map[string]any{
		"id": "rcpt_01M8QY2XPM56VK5TJV0E5G9E24", "at": "2026-12-01T10:20:30.123456Z", "tenant": "slot-acme",
		"subject": "usr_5f0c2a7d9b1e4c3a8f6d2b0e1a9c7d5e", "protocol": "chat_completions", "model": "gpt-4.1",
		"decision": "forward", "evaluated": 12, "overhead_us": 412, "upstream": "openai", "upstream_status": 200,
		"fired":   []any{map[string]any{"id": "prov_deploy", "version": 3, "action": "shim", "tier": 2, "reason": "semantic:0.91", "confidence": 0.91}},
		"skipped": []any{map[string]any{"id": "prov_style", "version": 1, "reason": "budget"}},
		"shimmed": []any{map[string]any{"provision": "prov_deploy", "ref": "docs/deploy.md", "version": 3, "chars": 1834,
			"sha256": "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"}},
		"request_sha256":   "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
		"forwarded_sha256": "sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9",
		"response_sha256":  "sha256:baa5a0964d3320fbc0c6a922140453c8513ea24ab8fd0577034804a967248096",
		"spend": map[string]any{"plan": "default", "reserved_microdollars": 966, "settled_microdollars": 360,
			"attempts": []any{map[string]any{"route": "openai-main", "model": "openai/gpt-4.1", "outcome": "answered", "status": 200,
				"reservation": "rsv_01M8QY2XPM56VK5TJV0E5G9E24-0", "reserved_microdollars": 966, "settled_microdollars": 360}}},
		"route": map[string]any{"requested": "gpt-4.1", "resolved_target": "openai/gpt-4.1", "provider": "openai"},
	})
	if err != nil {
		b.Fatal(err)
	}
	at := contract.Timestamp(time.Date(2026, 12, 1, 10, 20, 30, 0, time.UTC))
	e := Entry{
		Outcome: contract.AuditOutcome{At: at, Action: "shim.proxy", Resource: "chat_completions:gpt-4.1", Outcome: contract.OutcomeAllow,
			Identity: contract.Identity{TenantSlot: "slot-7", Subject: "usr_5f0c2a7d9b1e4c3a8f6d2b0e1a9c7d5e", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter}},
		Provenance: &contract.Provenance{Surface: contract.SurfaceAPI, Actor: contract.Actor{Type: contract.ActorUser, ID: "usr_5f0c2a7d9b1e4c3a8f6d2b0e1a9c7d5e"},
			RecordedAt: at, ConversationID: "conv_01M8QY2XPM56VK5TJV0E5G9E24", SessionID: "sess-42",
			Route: &contract.Route{Requested: "gpt-4.1", ResolvedTarget: "openai/gpt-4.1", Provider: contract.ProviderCodex},
			Build: &contract.Build{Commit: "f1da89d5c0b7e2a4d8e9f0a1b2c3d4e5f6a7b8c9"}},
		Payload: json.RawMessage(payload),
	}
	s, err := Prepare(e, "evt_01M8QY2XPM56VK5TJV0E5G9E24")
	if err != nil {
		b.Fatal(err)
	}
	library := func() (string, []byte, error) {
		body, err := contract.CanonicalJSON(struct {
			ID          string                `json:"id"`
			Tenant      contract.TenantSlot   `json:"tenant"`
			Seq         int64                 `json:"seq"`
			Outcome     contract.AuditOutcome `json:"outcome"`
			Provenance  *contract.Provenance  `json:"provenance,omitempty"`
			Payload     json.RawMessage       `json:"payload,omitempty"`
			Redaction   *contract.Redaction   `json:"redaction,omitempty"`
			Sensitivity contract.Sensitivity  `json:"sensitivity,omitempty"`
		}{s.ID, s.Tenant(), 7, s.entry.Outcome, s.entry.Provenance, s.payload, s.entry.Redaction, s.entry.Sensitivity})
		if err != nil {
			return "", nil, err
		}
		h, err := Link(Genesis, body)
		return h, body, err
	}
	rec, err := s.Seal(7, Genesis)
	if h, body, err2 := library(); err != nil || err2 != nil || h != rec.Hash || !bytes.Equal(body, rec.Body) {
		b.Fatalf("the two differ (%v, %v):\n%s\n%s", err, err2, rec.Body, body)
	}
	b.Run("hand", func(b *testing.B) {
		contracttest.Loop(b, func() {
			if _, err := s.Seal(7, Genesis); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("encoding_json", func(b *testing.B) {
		contracttest.Loop(b, func() {
			if _, _, err := library(); err != nil {
				b.Fatal(err)
			}
		})
	})
}
