package contract

import (
	"strings"
	"testing"
)

// TestCallerProvenance: a caller's trace stamps conversation, session, run,
// route and build onto a provenance the schema accepts.
func TestCallerProvenance(t *testing.T) {
	c := Caller{Identity: Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: SurfaceAPI, Trust: TrustRouter},
		Trace: Trace{Conversation: "agent:main:telegram:dm:42", RunID: "cron-7", Route: "POST /v1/executor/ticks"}}
	p := c.Provenance(ActorAssistant, "2026-11-30T12:00:00Z")
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.ConversationID != ConversationFor("slot-1", "agent:main:telegram:dm:42") || p.SessionID != "agent:main:telegram:dm:42" ||
		p.RunID != "cron-7" || p.Route == nil || p.Route.Requested != "POST /v1/executor/ticks" || p.Build == nil {
		t.Errorf("provenance %+v", p)
	}
	long := strings.Repeat("k", 300)
	c.Trace = Trace{Conversation: long, Route: strings.Repeat("r", 200)}
	p = c.Provenance(ActorUser, "2026-11-30T12:00:00Z")
	if err := p.Validate(); err != nil || p.SessionID != SHA256([]byte(long)) || len([]rune(p.Route.Requested)) != 120 {
		t.Errorf("long names: %v %+v", err, p)
	}
	c.Trace = Trace{Conversation: "conv_0123456789abcdef"}
	if p = c.Provenance(ActorUser, "2026-11-30T12:00:00Z"); p.ConversationID != "conv_0123456789abcdef" || p.SessionID != "" || p.Route != nil {
		t.Errorf("a conv_ id: %+v", p)
	}
	c.Trace = Trace{}
	if p = c.Provenance(ActorUser, "2026-11-30T12:00:00Z"); p.ConversationID != "" || p.SessionID != "" || p.Build == nil {
		t.Errorf("no trace: %+v", p)
	}
}

func TestCheckConversation(t *testing.T) {
	for s, ok := range map[string]bool{"agent:main:telegram:dm:42": true, "conv_abcd": true, "café ☕": true, "": false,
		"a\tb": false, "a\x7fb": false, "\xff": false, strings.Repeat("k", MaxConversationBytes): true, strings.Repeat("k", MaxConversationBytes+1): false} {
		if err := CheckConversation("X", s); (err == nil) != ok {
			t.Errorf("%q: %v, want ok %v", s, err, ok)
		}
	}
}
