package shim

import (
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestConversationKeyPrecedence: the header, then on the OpenAI protocols
// metadata.conversation, metadata.session_key and user, on the Anthropic
// protocol metadata.user_id; names that are not strings or not usable are
// skipped.
func TestConversationKeyPrecedence(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		p      wire.Protocol
		header string
		body   string
		want   string
	}{
		{wire.ChatCompletions, "agent:main:telegram:dm:1", `{"model":"m",` + msgs + `,"metadata":{"conversation":"meta"},"user":"u"}`, "agent:main:telegram:dm:1"},
		{wire.ChatCompletions, "", `{"model":"m",` + msgs + `,"metadata":{"conversation":"meta","session_key":"sk"},"user":"u"}`, "meta"},
		{wire.ChatCompletions, "", `{"model":"m",` + msgs + `,"metadata":{"session_key":"sk"},"user":"u"}`, "sk"},
		{wire.ChatCompletions, "", `{"model":"m",` + msgs + `,"user":"u"}`, "u"},
		{wire.ChatCompletions, "", `{"model":"m",` + msgs + `,"metadata":{"conversation":7},"user":"u"}`, "u"},
		{wire.ChatCompletions, "", `{"model":"m",` + msgs + `,"metadata":{"conversation":"a\u0001b"}}`, ""},
		{wire.ChatCompletions, "", `{"model":"m",` + msgs + `,"metadata":{"user_id":"anthropic-only"}}`, ""},
		{wire.Responses, "", `{"model":"m","input":"hi","metadata":{"conversation":"resp"}}`, "resp"},
		{wire.Messages, "", `{"model":"m","max_tokens":5,` + msgs + `,"metadata":{"user_id":"agent:main:slack:dm:U1"}}`, "agent:main:slack:dm:U1"},
		{wire.Messages, "", `{"model":"m","max_tokens":5,` + msgs + `,"user":"openai-only"}`, ""},
		{wire.Messages, "", `{"model":"m","max_tokens":5,` + msgs + `}`, ""},
	} {
		req, err := wire.Parse(tc.p, []byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if got := conversationKey(tc.header, req); got != tc.want {
			t.Errorf("%s header %q %s: %q, want %q", tc.p, tc.header, tc.body, got, tc.want)
		}
		caller := contract.Caller{Identity: contract.Identity{TenantSlot: "slot-3", Subject: "usr_a"}}
		if got := conversationID(tc.header, caller, req); tc.want != "" && got != contract.ConversationFor("slot-3", tc.want) {
			t.Errorf("%s %s: conversation %s, want ConversationFor(%q)", tc.p, tc.body, got, tc.want)
		}
	}
}

// FuzzConversationKey: any request the wire parser accepts yields either
// no name or one every gate accepts.
func FuzzConversationKey(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"metadata":{"conversation":"c"},"user":"u"}`), false)
	f.Add([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"metadata":{"user_id":"x"}}`), true)
	f.Fuzz(func(t *testing.T, body []byte, anthropic bool) {
		p := wire.ChatCompletions
		if anthropic {
			p = wire.Messages
		}
		req, err := wire.Parse(p, body)
		if err != nil {
			return
		}
		if k := conversationKey("", req); k != "" && contract.CheckConversation("key", k) != nil {
			t.Fatalf("unusable name %q", k)
		}
	})
}
