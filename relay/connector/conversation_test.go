package connector_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay/connector"
)

// TestRecordsCarryTheConversation: the delivery of an inbound message and
// the gateway's reply to its chat (a send names no session key) are both
// filed under contract.ConversationFor(tenant, session key), with the key
// as session_id, a route and a build.
func TestRecordsCarryTheConversation(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	if s := e.postTelegram(forumUpdate(1, 77, 42, "hi"), tgSecret); s != 200 {
		t.Fatalf("webhook %d", s)
	}
	in := g.next(t)
	if r := g.Send(t.Context(), in.Event.Source.ChatID, "hello", "", nil); !r.Success {
		t.Fatalf("send %+v", r)
	}
	want := contract.ConversationFor(slot1, in.SessionKey)
	seen := map[string]bool{}
	for _, r := range e.audit.Records(slot1) {
		switch r.Outcome.Action {
		case "relay.deliver", "relay.outbound":
			p := r.Provenance
			if p == nil || p.ConversationID != want || p.SessionID != in.SessionKey || p.Route == nil || p.Route.Requested != "telegram" || p.Build == nil {
				t.Errorf("%s provenance %+v", r.Outcome.Action, p)
			}
			seen[r.Outcome.Action] = true
		}
	}
	if !seen["relay.deliver"] || !seen["relay.outbound"] {
		t.Errorf("records seen: %v", seen)
	}
}

// TestDeliveryRecordsArePersonalAndRedacted: the records of a message in
// and out are personal (seed 002 sensitivity) and say their payload was
// reduced: the text is kept as its sha256, never as text.
func TestDeliveryRecordsArePersonalAndRedacted(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	if s := e.postTelegram(forumUpdate(1, 77, 42, "the secret plan"), tgSecret); s != 200 {
		t.Fatalf("webhook %d", s)
	}
	in := g.next(t)
	if r := g.Send(t.Context(), in.Event.Source.ChatID, "the secret answer", "", nil); !r.Success {
		t.Fatalf("send %+v", r)
	}
	seen := 0
	for _, r := range e.audit.Records(slot1) {
		if r.Outcome.Action != "relay.deliver" && r.Outcome.Action != "relay.outbound" {
			continue
		}
		seen++
		if r.Sensitivity != contract.SensitivityPersonal || r.Redaction == nil || *r.Redaction != connector.TextAsHash {
			t.Errorf("%s: sensitivity %q redaction %+v", r.Outcome.Action, r.Sensitivity, r.Redaction)
		}
		if strings.Contains(string(r.Body), "secret") {
			t.Errorf("%s holds the text: %s", r.Outcome.Action, r.Body)
		}
	}
	if seen < 2 {
		t.Errorf("%d delivery records, want one in and one out", seen)
	}
}
