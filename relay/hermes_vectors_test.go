package relay

import (
	"errors"
	"testing"
)

// TestHermesVectors is every session-key vector of HERMES-RELAY.md §7, fed
// as the JSON a connector or the CLI reads. Rows marked † there (Slack
// top-level stamping) are checked through EventSessionKey.
func TestHermesVectors(t *testing.T) {
	def := DefaultSessionKeyOptions()
	perThread := def
	perThread.ThreadSessionsPerUser = true
	shared := def
	shared.GroupSessionsPerUser = false
	multiplex := def
	multiplex.MultiplexProfiles = true
	const v1 = `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555","scope_id":"111"}`
	tests := []struct {
		n    string
		src  string
		opts SessionKeyOptions
		want string // "" = the key builder refuses the source
	}{
		{"1", v1, def, "agent:main:discord:group:333:555"},
		{"2", `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555","scope_id":"222"}`, def, "agent:main:discord:group:333:555"},
		{"3", `{"platform":"discord","chat_type":"thread","chat_id":"777","thread_id":"777","parent_chat_id":"333","user_id":"555"}`, def, "agent:main:discord:thread:777:777"},
		{"4", `{"platform":"discord","chat_type":"thread","chat_id":"777","thread_id":"777","parent_chat_id":"333","user_id":"555"}`, perThread, "agent:main:discord:thread:777:777:555"},
		{"5", `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555","prospective_thread_id":"9001"}`, def, "agent:main:discord:thread:333:9001"},
		{"6", `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555","prospective_thread_id":"9001"}`, perThread, "agent:main:discord:thread:333:9001:555"},
		{"7", `{"platform":"discord","chat_type":"thread","chat_id":"333","thread_id":"9001","user_id":"556"}`, def, "agent:main:discord:thread:333:9001"},
		{"8", `{"platform":"discord","chat_type":"dm","chat_id":"888","user_id":"555","prospective_thread_id":"42"}`, def, "agent:main:discord:dm:888"},
		{"9", `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555"}`, shared, "agent:main:discord:group:333"},
		{"10", `{"platform":"telegram","chat_type":"forum","chat_id":"-1001234567890","thread_id":"42","user_id":"9"}`, def, "agent:main:telegram:forum:-1001234567890:42"},
		{"11", `{"platform":"telegram","chat_type":"forum","chat_id":"-1001234567890","thread_id":"1","user_id":"9"}`, def, "agent:main:telegram:forum:-1001234567890:1"},
		{"12", `{"platform":"telegram","chat_type":"group","chat_id":"-1005550001","user_id":"9"}`, def, "agent:main:telegram:group:-1005550001:9"},
		{"13", `{"platform":"telegram","chat_type":"dm","chat_id":"99","user_id":"99","thread_id":"5"}`, def, "agent:main:telegram:dm:99:5"},
		{"14", `{"platform":"telegram","chat_type":"dm","chat_id":""}`, def, "agent:main:telegram:dm"},
		{"15", `{"platform":"whatsapp","chat_type":"dm","chat_id":"+15551234567:47@s.whatsapp.net"}`, def, "agent:main:whatsapp:dm:15551234567"},
		{"16", `{"platform":"whatsapp","chat_type":"dm","chat_id":"999999999999999@lid"}`, def, "agent:main:whatsapp:dm:999999999999999"},
		{"17", `{"platform":"whatsapp","chat_type":"dm","chat_id":"","user_id":"+4915112345678:3@s.whatsapp.net"}`, def, "agent:main:whatsapp:dm:4915112345678"},
		{"18", `{"platform":"whatsapp","chat_type":"group","chat_id":"120363000000000000@g.us","user_id":"+15551234567@s.whatsapp.net"}`, def, "agent:main:whatsapp:group:120363000000000000@g.us:15551234567"},
		{"19", `{"platform":"whatsapp","chat_type":"dm","chat_id":"1+555"}`, def, "agent:main:whatsapp:dm:1555"},
		{"20", `{"platform":"whatsapp","chat_type":"dm","chat_id":" +1 555 123 4567 "}`, def, ""},
		{"21", `{"platform":"whatsapp_cloud","chat_type":"dm","chat_id":"+15551234567"}`, def, "agent:main:whatsapp_cloud:dm:+15551234567"},
		{"22", `{"platform":"slack","chat_type":"group","scope_id":"T1","chat_id":"C1","user_id":"U1","thread_id":"1700000000.000100"}`, def, "agent:main:slack:group:T1:C1:1700000000.000100"},
		{"23", `{"platform":"slack","chat_type":"dm","scope_id":"T1","chat_id":"D1","user_id":"U1"}`, def, "agent:main:slack:dm:T1:D1"},
		{"24", `{"platform":"slack","chat_type":"group","scope_id":"T1","chat_id":"C1","user_id":"U1"}`, def, "agent:main:slack:group:T1:C1:U1"},
		{"25", `{"platform":"slack","chat_type":"channel","chat_id":"C123","thread_id":"1700000000.000001","user_id":"U1"}`, def, "agent:main:slack:channel:C123:1700000000.000001"},
		{"26", `{"platform":"signal","chat_type":"group","chat_id":"group:XYZ=","user_id":"+15550001","user_id_alt":"uuid:abc"}`, def, "agent:main:signal:group:group:XYZ=:uuid:abc"},
		{"27", `{"platform":"signal","chat_type":"dm","chat_id":"","user_id":"+15550001","user_id_alt":"uuid:abc"}`, def, "agent:main:signal:dm:uuid:abc"},
		{"28", `{"platform":"matrix","chat_type":"group","chat_id":"!abc:matrix.org","user_id":"@al:matrix.org"}`, def, "agent:main:matrix:group:!abc:matrix.org:@al:matrix.org"},
		{"29", `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555","scope_id":"111","profile":"coder"}`, multiplex, "agent:coder:discord:group:333:555"},
		{"30", `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555","scope_id":"111","profile":"main"}`, multiplex, "agent:main~:discord:group:333:555"},
		{"31 email", `{"platform":"email","chat_type":"dm","chat_id":"alice@example.com"}`, def, "agent:main:email:dm:alice@example.com"},
		{"31 sms", `{"platform":"sms","chat_type":"dm","chat_id":"+15551234567"}`, def, "agent:main:sms:dm:+15551234567"},
		{"32", `{"platform":"discord","chat_type":null,"chat_id":"333","user_id":"555"}`, def, "agent:main:discord:None:333:555"},
		{"33 case", `{"platform":"Discord ","chat_type":"group","chat_id":"333","user_id":"555"}`, def, "agent:main:discord:group:333:555"},
		{"33 unknown", `{"platform":"nosuch","chat_type":"group","chat_id":"333","user_id":"555"}`, def, "agent:main:relay:group:333:555"},
		{"34", `{"platform":"discord","chat_type":"group","chat_id":null,"user_id":"555"}`, def, "agent:main:discord:group:555"},

		// Around the vectors: the profile is ignored without multiplexing,
		// the active profile applies to a source naming none, "default" is
		// agent:main, and guild_id alone is the scope's alias.
		{"profile ignored", `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555","profile":"coder"}`, def, "agent:main:discord:group:333:555"},
		{"active profile", `{"platform":"discord","chat_type":"group","chat_id":"333","user_id":"555"}`, SessionKeyOptions{GroupSessionsPerUser: true, MultiplexProfiles: true, Profile: "ops"}, "agent:ops:discord:group:333:555"},
		{"default profile", `{"platform":"discord","chat_type":"dm","chat_id":"1","profile":"default"}`, multiplex, "agent:main:discord:dm:1"},
		{"slack guild alias", `{"platform":"slack","chat_type":"dm","guild_id":"T9","chat_id":"D1"}`, def, "agent:main:slack:dm:T9:D1"},
		{"whatsapp unsafe participant", `{"platform":"whatsapp","chat_type":"group","chat_id":"1@g.us","user_id":"a_b@s.whatsapp.net"}`, def, ""},
		{"whatsapp unsafe participant unused in dm", `{"platform":"whatsapp","chat_type":"dm","chat_id":"15","user_id":"a b"}`, def, "agent:main:whatsapp:dm:15"},
		{"whatsapp participant empty keeps raw", `{"platform":"whatsapp","chat_type":"group","chat_id":"1@g.us","user_id":"@lid"}`, def, "agent:main:whatsapp:group:1@g.us:@lid"},
		{"missing platform", `{"chat_type":"dm","chat_id":"1"}`, def, "agent:main:relay:dm:1"},
	}
	for _, tc := range tests {
		t.Run(tc.n, func(t *testing.T) {
			src, err := ParseSource([]byte(tc.src))
			if err != nil {
				t.Fatal(err)
			}
			got, err := SessionKey(src, tc.opts)
			if tc.want == "" {
				if !errors.Is(err, ErrUnsafeWhatsAppID) {
					t.Fatalf("SessionKey = %q, %v; want ErrUnsafeWhatsAppID", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("SessionKey = %q, %v; want %q", got, err, tc.want)
			}
		})
	}

	// † rows: the gateway stamps a top-level Slack message's id as its thread.
	stamped := []struct {
		src, msg, want string
	}{
		{`{"platform":"slack","chat_type":"dm","scope_id":"T1","chat_id":"D1","user_id":"U1"}`, "1700000000.000200", "agent:main:slack:dm:T1:D1:1700000000.000200"},
		{`{"platform":"slack","chat_type":"group","scope_id":"T1","chat_id":"C1","user_id":"U1"}`, "1700000000.000300", "agent:main:slack:group:T1:C1:1700000000.000300"},
	}
	for _, tc := range stamped {
		src, err := ParseSource([]byte(tc.src))
		if err != nil {
			t.Fatal(err)
		}
		ev := MessageEvent{Source: src, MessageID: tc.msg}
		if got, err := EventSessionKey(ev, def); err != nil || got != tc.want {
			t.Errorf("EventSessionKey(%s) = %q, %v; want %q", tc.src, got, err, tc.want)
		}
		// Source message id alone stamps too; the option off gives the pure key.
		ev.MessageID, ev.Source.MessageID = "", tc.msg
		if got, _ := EventSessionKey(ev, def); got != tc.want {
			t.Errorf("stamping from source.message_id: %q", got)
		}
		off := def
		off.SlackTopLevelThreads = false
		pure, _ := SessionKey(src, def)
		if got, _ := EventSessionKey(ev, off); got != pure {
			t.Errorf("stamping off: %q, want %q", got, pure)
		}
	}
	// A threaded Slack message and other platforms are left alone.
	ev := MessageEvent{MessageID: "9", Source: SessionSource{Platform: "discord", ChatType: "group", ChatID: "1", UserID: "2"}}
	if got, _ := EventSessionKey(ev, def); got != "agent:main:discord:group:1:2" {
		t.Errorf("discord stamped: %q", got)
	}
}
