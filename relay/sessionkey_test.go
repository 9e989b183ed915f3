package relay

import (
	"bytes"
	"strings"
	"testing"
)

func TestSessionKey(t *testing.T) {
	def := DefaultSessionKeyOptions()
	perUserThreads := SessionKeyOptions{GroupSessionsPerUser: true, ThreadSessionsPerUser: true}
	shared := SessionKeyOptions{GroupSessionsPerUser: false}
	tests := []struct {
		name string
		src  SessionSource
		opts SessionKeyOptions
		want string
	}{
		// Every example of RELAY.md §3.
		{"relay.md discord group guild 111", SessionSource{Platform: "discord", ChatType: "group", ChatID: "333", UserID: "555", GuildID: "111"}, def, "agent:main:discord:group:333:555"},
		{"relay.md discord group guild 222", SessionSource{Platform: "discord", ChatType: "group", ChatID: "333", UserID: "555", GuildID: "222"}, def, "agent:main:discord:group:333:555"},
		{"relay.md discord thread", SessionSource{Platform: "discord", ChatType: "thread", ChatID: "777", ThreadID: "777"}, def, "agent:main:discord:thread:777:777"},
		{"relay.md discord dm", SessionSource{Platform: "discord", ChatType: "dm", ChatID: "888"}, def, "agent:main:discord:dm:888"},
		{"relay.md telegram forum", SessionSource{Platform: "telegram", ChatType: "forum", ChatID: "-1001234567890", ThreadID: "42", UserID: "9"}, def, "agent:main:telegram:forum:-1001234567890:42"},
		{"relay.md whatsapp dm", SessionSource{Platform: "whatsapp", ChatType: "dm", ChatID: "+15551234567:47@s.whatsapp.net"}, def, "agent:main:whatsapp:dm:15551234567"},
		{"relay.md matrix group", SessionSource{Platform: "matrix", ChatType: "group", ChatID: "!abc:matrix.org", UserID: "@al:matrix.org"}, def, "agent:main:matrix:group:!abc:matrix.org:@al:matrix.org"},

		// DM fallbacks.
		{"dm chat and thread", SessionSource{Platform: "telegram", ChatType: "dm", ChatID: "5", ThreadID: "9", UserID: "5"}, def, "agent:main:telegram:dm:5:9"},
		{"dm participant when no chat", SessionSource{Platform: "discord", ChatType: "dm", UserID: "555"}, def, "agent:main:discord:dm:555"},
		{"dm participant and thread", SessionSource{Platform: "discord", ChatType: "dm", UserID: "555", ThreadID: "7"}, def, "agent:main:discord:dm:555:7"},
		{"dm alt id wins as participant", SessionSource{Platform: "signal", ChatType: "dm", UserID: "+4912", UserIDAlt: "uuid-1"}, def, "agent:main:signal:dm:uuid-1"},
		{"dm thread only", SessionSource{Platform: "discord", ChatType: "dm", ThreadID: "7"}, def, "agent:main:discord:dm:7"},
		{"dm nothing", SessionSource{Platform: "discord", ChatType: "dm"}, def, "agent:main:discord:dm"},
		{"dm with user ignores user when chat present", SessionSource{Platform: "discord", ChatType: "dm", ChatID: "888", UserID: "555"}, def, "agent:main:discord:dm:888"},
		{"DM is not dm (case-sensitive)", SessionSource{Platform: "discord", ChatType: "DM", ChatID: "888", UserID: "555"}, def, "agent:main:discord:DM:888:555"},

		// Groups and threads under the switches.
		{"group no per-user", SessionSource{Platform: "discord", ChatType: "group", ChatID: "333", UserID: "555"}, shared, "agent:main:discord:group:333"},
		{"group thread default omits user", SessionSource{Platform: "discord", ChatType: "group", ChatID: "333", ThreadID: "44", UserID: "555"}, def, "agent:main:discord:group:333:44"},
		{"group thread per-user threads", SessionSource{Platform: "discord", ChatType: "group", ChatID: "333", ThreadID: "44", UserID: "555"}, perUserThreads, "agent:main:discord:group:333:44:555"},
		{"thread per-user threads but groups shared", SessionSource{Platform: "discord", ChatType: "thread", ChatID: "44", ThreadID: "44", UserID: "555"}, SessionKeyOptions{ThreadSessionsPerUser: true}, "agent:main:discord:thread:44:44"},
		{"group without chat id", SessionSource{Platform: "slack", ChatType: "group", UserID: "U1"}, def, "agent:main:slack:group:U1"},
		{"group alt id", SessionSource{Platform: "feishu", ChatType: "group", ChatID: "oc_1", UserID: "ou_1", UserIDAlt: "on_1"}, def, "agent:main:feishu:group:oc_1:on_1"},
		{"channel post", SessionSource{Platform: "telegram", ChatType: "channel", ChatID: "-100777", UserID: "-100777"}, def, "agent:main:telegram:channel:-100777:-100777"},
		{"telegram general topic", SessionSource{Platform: "telegram", ChatType: "forum", ChatID: "-100123", ThreadID: "1", UserID: "9"}, def, "agent:main:telegram:forum:-100123:1"},
		{"empty chat type is not dm", SessionSource{Platform: "discord", ChatType: "", ChatID: "1", UserID: "2"}, def, "agent:main:discord::1:2"},

		// Platform names.
		{"platform trimmed and lower-cased", SessionSource{Platform: "  Discord ", ChatType: "dm", ChatID: "888"}, def, "agent:main:discord:dm:888"},
		{"unknown platform keys as relay", SessionSource{Platform: "myspace", ChatType: "dm", ChatID: "888"}, def, "agent:main:relay:dm:888"},
		{"plugin platform known", SessionSource{Platform: "teams", ChatType: "group", ChatID: "c", UserID: "u"}, def, "agent:main:teams:group:c:u"},

		// WhatsApp normalization: DM chat and participant, never a group chat id.
		{"whatsapp group participant normalized", SessionSource{Platform: "whatsapp", ChatType: "group", ChatID: "1203630@g.us", UserID: "+4915:3@s.whatsapp.net"}, def, "agent:main:whatsapp:group:1203630@g.us:4915"},
		{"whatsapp dm participant fallback", SessionSource{Platform: "whatsapp", ChatType: "dm", UserID: "+4915@s.whatsapp.net"}, def, "agent:main:whatsapp:dm:4915"},
		{"whatsapp_cloud not normalized", SessionSource{Platform: "whatsapp_cloud", ChatType: "dm", ChatID: "+4915"}, def, "agent:main:whatsapp_cloud:dm:+4915"},
		{"no normalization elsewhere", SessionSource{Platform: "signal", ChatType: "dm", ChatID: "+4915:1@x"}, def, "agent:main:signal:dm:+4915:1@x"},
		{"ids kept verbatim", SessionSource{Platform: "slack", ChatType: "group", ChatID: "CÄ:x", UserID: "Ü Ber"}, def, "agent:main:slack:group:CÄ:x:Ü Ber"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SessionKey(tc.src, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("SessionKey = %q, want %q", got, tc.want)
			}
		})
	}
	if got, err := SessionKey(SessionSource{ChatType: "dm", ChatID: "1"}, def); err != nil || got != "agent:main:relay:dm:1" {
		t.Errorf("SessionKey without platform = %q, %v; want the gateway's relay fallback", got, err)
	}
}

func TestSessionKeyLines(t *testing.T) {
	in := strings.Join([]string{
		`{"platform":"discord","chat_id":"333","chat_type":"group","user_id":"555","guild_id":"111"}`,
		`{"platform":"discord","chat_id":333,"chat_type":"group","user_id":"555"}`,
		`{"chat_id":"1","chat_type":"dm"}`,
		`{"platform":"whatsapp","chat_type":"dm","chat_id":" +1 555 123 4567 "}`,
		``,
		`{"platform":"telegram","chat_id":"-1001234567890","chat_type":"forum","thread_id":"42","user_id":"9","chat_name":null,"is_bot":false}`,
		`{"platform":"discord","chat_id":"888"}`,
		`{"platform":"discord","chat_id":"888","chat_type":null}`,
		`not json`,
		`{"platform":null,"chat_id":"1"}`,
		`{"platform":"whatsapp","chat_type":"dm","chat_id":"+15551234567:47@s.whatsapp.net"}`,
		`{"platform":"discord","chat_type":"group","chat_id":"1","user_id":true}`,
		`[1,2]`,
	}, "\n")
	var out bytes.Buffer
	if err := SessionKeyLines(strings.NewReader(in), &out, DefaultSessionKeyOptions()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := []string{
		"agent:main:discord:group:333:555",
		"error:",
		"agent:main:relay:dm:1",
		"error:",
		"agent:main:telegram:forum:-1001234567890:42",
		"agent:main:discord:dm:888",
		"agent:main:discord:None:888",
		"error:",
		"agent:main:relay:dm:1",
		"agent:main:whatsapp:dm:15551234567",
		"error:",
		"error:",
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i := range want {
		if want[i] == "error:" {
			if !strings.HasPrefix(lines[i], "error: ") {
				t.Errorf("line %d = %q, want an error line", i, lines[i])
			}
			continue
		}
		if lines[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, lines[i], want[i])
		}
	}
	// The switches are honoured.
	out.Reset()
	opts := SessionKeyOptions{GroupSessionsPerUser: false}
	if err := SessionKeyLines(strings.NewReader(`{"platform":"discord","chat_id":"333","chat_type":"group","user_id":"555"}`), &out, opts); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "agent:main:discord:group:333\n" {
		t.Errorf("with group_sessions_per_user=false: %q", got)
	}
}
