package relay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

var frameSchema = contract.MustSchema("relay.frame.schema.json")

// TestGoldenFrames decodes every fixture, re-encodes it byte for byte, and
// validates it against relay.frame.schema.json.
func TestGoldenFrames(t *testing.T) {
	files, err := filepath.Glob("testdata/frames/*.json")
	if err != nil || len(files) < 10 {
		t.Fatalf("fixtures: %v, %d files", err, len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			line := bytes.TrimSuffix(raw, []byte("\n"))
			if err := frameSchema.ValidateJSON(line); err != nil {
				t.Fatalf("schema: %v", err)
			}
			f, err := ParseFrame(line)
			if err != nil {
				t.Fatal(err)
			}
			if !f.Known() {
				t.Fatalf("type %q not known", f.Type)
			}
			out, err := AppendFrame(nil, f)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, raw) {
				t.Errorf("re-encoded:\n%s\nwant:\n%s", out, raw)
			}
		})
	}
}

func TestSchemaRefusals(t *testing.T) {
	eventSchema := contract.MustSchema("relay.event.schema.json")
	good := `{"text":"x","message_type":"text","source":{"platform":"discord","chat_id":"1","chat_name":null,"chat_type":"dm","user_id":"2","user_name":null,"thread_id":null,"chat_topic":null,"is_bot":false,"message_is_edit":false},"message_id":null,"reply_to_message_id":null,"media_urls":[]}`
	if err := eventSchema.ValidateJSON([]byte(good)); err != nil {
		t.Fatalf("good event refused: %v", err)
	}
	for name, bad := range map[string]string{
		"is_bot absent":             strings.Replace(good, `"is_bot":false,`, ``, 1),
		"message_is_edit a string":  strings.Replace(good, `"message_is_edit":false`, `"message_is_edit":"no"`, 1),
		"one_to_one_verified false": strings.Replace(good, `"message_is_edit":false`, `"message_is_edit":false,"one_to_one_verified":false`, 1),
		"numeric chat id":           strings.Replace(good, `"chat_id":"1"`, `"chat_id":1`, 1),
		"always-present key absent": strings.Replace(good, `"thread_id":null,`, ``, 1),
		"optional key null":         strings.Replace(good, `"chat_topic":null`, `"chat_topic":null,"guild_id":null`, 1),
	} {
		if err := eventSchema.ValidateJSON([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for name, bad := range map[string]string{
		"follow_up with token":     `{"type":"outbound","requestId":"r","action":{"op":"follow_up","session_key":"k","kind":"discord.interaction_token","content":"x","token":"secret"}}`,
		"send without chat":        `{"type":"outbound","requestId":"r","action":{"op":"send","content":"x"}}`,
		"interrupt without reason": `{"type":"interrupt","session_key":"k"}`,
		"ack without buffer":       `{"type":"inbound_ack"}`,
	} {
		if err := frameSchema.ValidateJSON([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSourcePresence(t *testing.T) {
	b, err := json.Marshal(SessionSource{Platform: "discord", ChatID: "333", ChatType: "group", UserID: "555", GuildID: "111"})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"platform":"discord","chat_id":"333","chat_name":null,"chat_type":"group","user_id":"555","user_name":null,"thread_id":null,"chat_topic":null,"is_bot":false,"message_is_edit":false,"scope_id":"111","guild_id":"111"}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	all := SessionSource{Platform: "p", ChatID: "c", ChatType: "t", ChatName: "n", UserID: "u", UserName: "un", ThreadID: "th",
		ChatTopic: "to", UserIDAlt: "ua", ChatIDAlt: "ca", ScopeID: "g", GuildID: "g", ParentChatID: "pc", MessageID: "m",
		Profile: "pr", ProspectiveThreadID: "pt", AutoThreadCreated: true, AutoThreadInitialName: "an", UserDisplayName: "ud", UserHandle: "uh",
		IsBot: true, MessageIsEdit: true, OneToOneVerified: true}
	b, _ = json.Marshal(all)
	var back SessionSource
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back != all {
		t.Errorf("round trip: %+v", back)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	if len(m) != 23 {
		t.Errorf("%d keys, want 23", len(m))
	}
	// Events: message ids null when empty, media_urls a list, unknown types read as text.
	ev := MessageEvent{Text: "hi", MessageType: "sticker", Source: SessionSource{Platform: "telegram", ChatType: "dm", ChatID: "5"}}
	b, _ = json.Marshal(ev)
	if !bytes.Contains(b, []byte(`"message_id":null,"reply_to_message_id":null,"media_urls":[]`)) || !bytes.Contains(b, []byte(`"text":"hi"`)) {
		t.Errorf("event wire: %s", b)
	}
	if err := contract.MustSchema("relay.event.schema.json").ValidateJSON(b); err != nil {
		t.Errorf("schema: %v", err)
	}
	var back2 MessageEvent
	_ = json.Unmarshal([]byte(strings.Replace(string(b), `"sticker"`, `"hologram"`, 1)), &back2)
	if back2.MessageType != MessageText {
		t.Errorf("unknown message type read as %q", back2.MessageType)
	}
}

func TestSplitter(t *testing.T) {
	a := `{"type":"hello","platform":"discord","botId":"1"}`
	b := `{"type":"inbound_ack","bufferId":"rbuf_1"}`
	c := `{"type":"interrupt","session_key":"k","reason":null}`
	var got []string
	var bad []string
	s := Splitter{OnMalformed: func(line []byte, err error) { bad = append(bad, string(line)) }}
	collect := func(f Frame) { got = append(got, f.Type) }
	// Several frames in one message, a frame across messages, blank lines,
	// malformed JSON, a frame without type, and an unknown type.
	msgs := []string{
		a + "\n" + b[:10],
		b[10:] + "\n\n   \n{not json}\n" + `{"no":"type"}` + "\n",
		`{"type":"going_idle_ack"}` + "\n" + c[:5],
		c[5:],
		"\n",
	}
	for _, m := range msgs {
		s.Feed([]byte(m), collect)
	}
	want := []string{"hello", "inbound_ack", "going_idle_ack", "interrupt"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("frames %v, want %v", got, want)
	}
	if len(bad) != 2 {
		t.Errorf("malformed %q, want 2", bad)
	}
	if s.Pending() != 0 {
		t.Errorf("pending %d", s.Pending())
	}
	// JoinFrames produces what the Splitter reads back.
	joined, err := JoinFrames(Frame{Type: FrameHello, Platform: "telegram", BotID: "b"}, Frame{Type: FrameInboundAck, BufferID: "x"})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	var s2 Splitter
	for i := range joined { // one byte per message
		s2.Feed(joined[i:i+1], collect)
	}
	if !reflect.DeepEqual(got, []string{"hello", "inbound_ack"}) {
		t.Errorf("byte-wise feed: %v", got)
	}
}

func TestSplitterOverlong(t *testing.T) {
	var n int
	var got []string
	s := Splitter{OnMalformed: func([]byte, error) { n++ }}
	big := bytes.Repeat([]byte("x"), MaxFrameBytes/2+1)
	s.Feed(big, func(f Frame) { got = append(got, f.Type) })
	s.Feed(big, func(f Frame) { got = append(got, f.Type) })
	s.Feed(append(big, []byte("\n"+`{"type":"inbound_ack","bufferId":"1"}`+"\n")...), func(f Frame) { got = append(got, f.Type) })
	if n != 1 || !reflect.DeepEqual(got, []string{"inbound_ack"}) || s.Pending() != 0 {
		t.Errorf("malformed %d, frames %v, pending %d", n, got, s.Pending())
	}
}

func TestFrameEncodeErrors(t *testing.T) {
	for _, f := range []Frame{{Type: "nope"}, {Type: FrameOutbound}, {Type: FrameInbound}, {Type: FrameDescriptor}} {
		if _, err := AppendFrame(nil, f); err == nil {
			t.Errorf("%+v encoded", f)
		}
	}
	for _, line := range []string{`{"type":"outbound","requestId":"r"}`, `{"type":"inbound"}`, `{"type":"interrupt","session_key":"k","reason":5}`, `[]`, `{"type":""}`} {
		if _, err := ParseFrame([]byte(line)); err == nil {
			t.Errorf("%s parsed", line)
		}
	}
}

func TestParseDescriptor(t *testing.T) {
	d, err := ParseDescriptor([]byte(`{"contract_version":1,"platform":"x","max_message_length":0,"len_unit":"bytes","future_field":{"a":1},"supports_edit":"yes"}`))
	if err != nil {
		t.Fatal(err)
	}
	if d.MaxMessageLength != 4096 || d.LenUnit != LenChars || d.Emoji != DefaultEmoji || d.SupportsEdit || d.Platform != "x" {
		t.Errorf("%+v", d)
	}
	d, _ = ParseDescriptor([]byte(`{"platform":"telegram","max_message_length":"lots","len_unit":"utf16"}`))
	if d.MaxMessageLength != 4096 || d.LenUnit != LenUTF16 {
		t.Errorf("%+v", d)
	}
	if _, err := ParseDescriptor([]byte(`{"platform":5}`)); err == nil {
		t.Error("numeric platform accepted")
	}
	for _, d := range []CapabilityDescriptor{DiscordDescriptor(), TelegramDescriptor()} {
		if err := contract.MustSchema("relay.descriptor.schema.json").Validate(d); err != nil {
			t.Errorf("%s: %v", d.Platform, err)
		}
	}
}
