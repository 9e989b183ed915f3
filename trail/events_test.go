package trail

import (
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// A relay delivery refused before it was delivered (the platform's
// guardrails blocked it) reads as not delivered, with its reason; one
// delivered, as before.
func TestDescribeRelayNotDelivered(t *testing.T) {
	for payload, want := range map[string]string{
		`{"direction":"in","platform":"telegram","chat_id":"42","message_id":"7","success":false,"error":"guardrails blocked secret, card"}`: "telegram message 7 in chat 42 not delivered: guardrails blocked secret, card",
		`{"direction":"in","platform":"telegram","chat_id":"42","message_id":"7","conn":"c1","success":true}`:                                "telegram message 7 in chat 42 delivered to gateway connection c1",
	} {
		var ev Event
		describe(&ev, audit.Record{Outcome: contract.AuditOutcome{Action: "relay.deliver"}, Payload: []byte(payload)})
		if ev.Kind != KindInbound || ev.Summary != want {
			t.Errorf("%s: %s %q, want %q", payload, ev.Kind, ev.Summary, want)
		}
	}
}
