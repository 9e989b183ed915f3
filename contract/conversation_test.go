package contract

import "testing"

func TestConversationFor(t *testing.T) {
	const key = "agent:main:telegram:dm:42"
	a := ConversationFor("slot-1", key)
	if a != ConversationFor("slot-1", key) {
		t.Fatal("not deterministic")
	}
	if !IsConversationID(a) || len(a) != len("conv_")+32 {
		t.Fatalf("not a conv_ id: %q", a)
	}
	if b := ConversationFor("slot-2", key); b == a {
		t.Fatal("two tenants share a conversation id for one session key")
	}
	if ConversationFor("slot-1", "agent:main:telegram:dm:43") == a {
		t.Fatal("two session keys share a conversation id")
	}
	if got := ConversationFor("slot-1", a); got != a {
		t.Fatalf("a conv_ id is mapped again: %q", got)
	}
}
