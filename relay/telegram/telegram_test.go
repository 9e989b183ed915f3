package telegram

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/relay"
)

func TestCheckSecret(t *testing.T) {
	for _, tc := range []struct {
		header, secret string
		want           bool
	}{
		{"s3cret-Token_1", "s3cret-Token_1", true},
		{"s3cret-Token_2", "s3cret-Token_1", false},
		{"", "s3cret", false},
		{"s3cret", "", false},
		{"", "", false},
		{"s3cret-Token_1 ", "s3cret-Token_1", false},
	} {
		if got := CheckSecret(tc.header, tc.secret); got != tc.want {
			t.Errorf("CheckSecret(%q, %q) = %v", tc.header, tc.secret, got)
		}
	}
}

const forumTopic = `{"update_id":10,"message":{"message_id":77,"message_thread_id":42,"is_topic_message":true,
 "from":{"id":9,"is_bot":false,"first_name":"Al","last_name":"Ice","username":"al"},
 "chat":{"id":-1001234567890,"type":"supergroup","title":"Team","is_forum":true},
 "date":1700000000,"text":"hi 👋",
 "reply_to_message":{"message_id":42,"chat":{"id":-1001234567890,"type":"supergroup"},"forum_topic_created":{"name":"Ops"}}}}`

func TestNormalize(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantSrc  relay.SessionSource
		wantText string
		wantType relay.MessageType
		wantKey  string
		wantDup  string
		wantRe   string
	}{
		{"forum topic", forumTopic,
			relay.SessionSource{Platform: "telegram", ChatID: "-1001234567890", ChatType: "forum", ChatName: "Team", UserID: "9", UserName: "Al Ice", ThreadID: "42", MessageID: "77"},
			"hi 👋", relay.MessageText, "agent:main:telegram:forum:-1001234567890:42", "77", ""},
		{"forum general topic", `{"update_id":11,"message":{"message_id":5,"from":{"id":9,"first_name":"Al"},"chat":{"id":-100123,"type":"supergroup","title":"T","is_forum":true},"text":"hello"}}`,
			relay.SessionSource{Platform: "telegram", ChatID: "-100123", ChatType: "forum", ChatName: "T", UserID: "9", UserName: "Al", ThreadID: "1", MessageID: "5"},
			"hello", relay.MessageText, "agent:main:telegram:forum:-100123:1", "5", ""},
		{"private", `{"update_id":12,"message":{"message_id":3,"from":{"id":5,"first_name":"Bo","username":"bo"},"chat":{"id":5,"type":"private","first_name":"Bo"},"text":"/start now","entities":[{"type":"bot_command","offset":0,"length":6}]}}`,
			relay.SessionSource{Platform: "telegram", ChatID: "5", ChatType: "dm", ChatName: "Bo", UserID: "5", UserName: "Bo", MessageID: "3"},
			"/start now", relay.MessageCommand, "agent:main:telegram:dm:5", "3", ""},
		{"group reply with photo", `{"update_id":13,"message":{"message_id":8,"message_thread_id":6,"from":{"id":7,"first_name":"Cy"},"chat":{"id":-4001,"type":"group","title":"G"},"caption":"look","photo":[{"file_id":"x"}],"reply_to_message":{"message_id":6,"chat":{"id":-4001,"type":"group"}}}}`,
			relay.SessionSource{Platform: "telegram", ChatID: "-4001", ChatType: "group", ChatName: "G", UserID: "7", UserName: "Cy", MessageID: "8"},
			"look", relay.MessagePhoto, "agent:main:telegram:group:-4001:7", "8", "6"},
		{"channel post", `{"update_id":14,"channel_post":{"message_id":100,"sender_chat":{"id":-100777,"type":"channel","title":"News"},"chat":{"id":-100777,"type":"channel","title":"News"},"text":"breaking"}}`,
			relay.SessionSource{Platform: "telegram", ChatID: "-100777", ChatType: "channel", ChatName: "News", UserID: "-100777", UserName: "News", MessageID: "100"},
			"breaking", relay.MessageText, "agent:main:telegram:channel:-100777:-100777", "100", ""},
		{"edited message", `{"update_id":15,"edited_message":{"message_id":3,"from":{"id":5,"first_name":"Bo"},"chat":{"id":5,"type":"private"},"date":1,"edit_date":1700000100,"text":"fixed"}}`,
			relay.SessionSource{Platform: "telegram", ChatID: "5", ChatType: "dm", UserID: "5", UserName: "Bo", MessageID: "3", MessageIsEdit: true},
			"fixed", relay.MessageText, "agent:main:telegram:dm:5", "3:edit:1700000100", ""},
		{"big ids stay exact", `{"update_id":16,"message":{"message_id":9007199254740993,"from":{"id":9007199254740995,"first_name":"Z"},"chat":{"id":-1009007199254740993,"type":"supergroup","title":"Big"},"text":"x"}}`,
			relay.SessionSource{Platform: "telegram", ChatID: "-1009007199254740993", ChatType: "group", ChatName: "Big", UserID: "9007199254740995", UserName: "Z", MessageID: "9007199254740993"},
			"x", relay.MessageText, "agent:main:telegram:group:-1009007199254740993:9007199254740995", "9007199254740993", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			u, err := ParseUpdate([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			in, err := Normalize(u)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.wantSrc
			if want.ChatType != relay.ChatDM {
				want.ScopeID = want.ChatID // a group or channel is the scope of its chat
			}
			if in.Event.Source != want {
				t.Errorf("source\n got %+v\nwant %+v", in.Event.Source, want)
			}
			if in.Event.Text != tc.wantText || in.Event.MessageType != tc.wantType {
				t.Errorf("text %q type %q", in.Event.Text, in.Event.MessageType)
			}
			if key, _ := relay.SessionKey(in.Event.Source, relay.DefaultSessionKeyOptions()); key != tc.wantKey {
				t.Errorf("key %q, want %q", key, tc.wantKey)
			}
			if in.DedupeKey != tc.wantDup {
				t.Errorf("dedupe %q, want %q", in.DedupeKey, tc.wantDup)
			}
			if in.Event.ReplyToMessageID != tc.wantRe {
				t.Errorf("reply to %q, want %q", in.Event.ReplyToMessageID, tc.wantRe)
			}
		})
	}
	for name, body := range map[string]string{
		"callback query": `{"update_id":1,"callback_query":{"id":"x"}}`,
		"service":        `{"update_id":1,"message":{"message_id":1,"from":{"id":2},"chat":{"id":-2,"type":"group"},"new_chat_members":[{"id":3}]}}`,
	} {
		u, err := ParseUpdate([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := Normalize(u); !errors.Is(err, ErrIgnored) {
			t.Errorf("%s: err = %v, want ErrIgnored", name, err)
		}
	}
	// A bot's message is an event marked is_bot (the connector drops it
	// unless asked); an edit is marked message_is_edit.
	for body, want := range map[string]relay.SessionSource{
		`{"update_id":1,"message":{"message_id":1,"from":{"id":2,"is_bot":true},"chat":{"id":-2,"type":"group"},"text":"x"}}`:                  {IsBot: true},
		`{"update_id":1,"edited_message":{"message_id":1,"from":{"id":2},"chat":{"id":2,"type":"private"},"text":"x","edit_date":1700000001}}`: {MessageIsEdit: true},
		`{"update_id":1,"message":{"message_id":1,"from":{"id":2},"chat":{"id":2,"type":"private"},"text":"x"}}`:                               {},
	} {
		u, _ := ParseUpdate([]byte(body))
		in, err := Normalize(u)
		if err != nil || in.Event.Source.IsBot != want.IsBot || in.Event.Source.MessageIsEdit != want.MessageIsEdit {
			t.Errorf("%s: %+v, %v; want is_bot %v, message_is_edit %v", body, in.Event.Source, err, want.IsBot, want.MessageIsEdit)
		}
	}
	for _, body := range []string{`[]`, `{"message":{"message_id":1.5,"chat":{"id":1,"type":"private"}}}`, `{"message":{"message_id":1,"chat":{"id":"abc","type":"private"}}}`} {
		if _, err := ParseUpdate([]byte(body)); err == nil {
			t.Errorf("ParseUpdate(%s) succeeded", body)
		}
	}
	if _, err := Normalize(Update{Message: &Message{Text: "x"}}); err == nil || errors.Is(err, ErrIgnored) {
		t.Errorf("message without ids: %v", err)
	}
}

type call struct {
	Path   string
	Params map[string]any
}

func fakeBotAPI(t *testing.T, fail bool) (*httptest.Server, *[]call) {
	var calls []call
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var p map[string]any
		_ = json.Unmarshal(b, &p)
		calls = append(calls, call{r.URL.Path, p})
		if fail {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`))
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/getChat"):
			_, _ = w.Write([]byte(`{"ok":true,"result":{"id":-100123,"type":"supergroup","title":"Team","is_forum":true}}`))
		case strings.HasSuffix(r.URL.Path, "/sendMessage"):
			_, _ = w.Write([]byte(`{"ok":true,"result":{"message_id":501,"chat":{"id":-100123,"type":"supergroup"}}}`))
		default:
			_, _ = w.Write([]byte(`{"ok":true,"result":true}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func TestClient(t *testing.T) {
	srv, calls := fakeBotAPI(t, false)
	c := &Client{BaseURL: srv.URL, Token: "123:ABC"}
	ctx := t.Context()
	id, err := c.SendMessage(ctx, "-100123", "hi", SendOptions{ThreadID: "42", ReplyTo: "77", ParseMode: "MarkdownV2"})
	if err != nil || id != "501" {
		t.Fatalf("SendMessage = %q, %v", id, err)
	}
	if _, err := c.SendMessage(ctx, "-100123", "general", SendOptions{ThreadID: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.EditMessageText(ctx, "-100123", "501", "edited", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.SendChatAction(ctx, "-100123", "42", "typing"); err != nil {
		t.Fatal(err)
	}
	info, err := c.GetChat(ctx, "-100123")
	if err != nil || info.Name != "Team" || info.Type != "forum" {
		t.Fatalf("GetChat = %+v, %v", info, err)
	}
	c0 := (*calls)[0]
	if c0.Path != "/bot123:ABC/sendMessage" || c0.Params["chat_id"] != "-100123" || c0.Params["message_thread_id"] != float64(42) ||
		c0.Params["parse_mode"] != "MarkdownV2" || c0.Params["text"] != "hi" {
		t.Errorf("sendMessage call %+v", c0)
	}
	if rp, _ := c0.Params["reply_parameters"].(map[string]any); rp["message_id"] != float64(77) {
		t.Errorf("reply_parameters %v", c0.Params["reply_parameters"])
	}
	if _, ok := (*calls)[1].Params["message_thread_id"]; ok {
		t.Error("General topic sent a message_thread_id")
	}
	if c2 := (*calls)[2]; c2.Path != "/bot123:ABC/editMessageText" || c2.Params["message_id"] != float64(501) || c2.Params["text"] != "edited" {
		t.Errorf("editMessageText call %+v", c2)
	}
	if c3 := (*calls)[3]; c3.Path != "/bot123:ABC/sendChatAction" || c3.Params["action"] != "typing" || c3.Params["message_thread_id"] != float64(42) {
		t.Errorf("sendChatAction call %+v", c3)
	}
	if _, err := c.SendMessage(ctx, "1", "x", SendOptions{ReplyTo: "abc"}); err == nil {
		t.Error("non-integer reply_to accepted")
	}
}

func TestClientErrorsHideToken(t *testing.T) {
	srv, _ := fakeBotAPI(t, true)
	c := &Client{BaseURL: srv.URL, Token: "123:SECRET"}
	_, err := c.SendMessage(t.Context(), "1", "x", SendOptions{})
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("err = %v", err)
	}
	srv.Close()
	_, err = c.SendMessage(t.Context(), "1", "x", SendOptions{})
	if err == nil || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("transport err = %v", err)
	}
}

// FuzzWebhook runs arbitrary bodies through the update parser and
// normalizer: no panic, and every normalized source parses and keys.
func FuzzWebhook(f *testing.F) {
	f.Add([]byte(forumTopic))
	f.Add([]byte(`{"channel_post":{"message_id":1,"chat":{"id":-1,"type":"channel"},"text":"x"}}`))
	f.Add([]byte(`{"edited_message":{"message_id":1,"chat":{"id":1,"type":"private"},"from":{"id":1},"text":"x","edit_date":2}}`))
	f.Add([]byte(`{"callback_query":{"id":"77","from":{"id":9,"first_name":"Al"},"data":"hp1:ab.cd:once","message":{"message_id":6,"chat":{"id":-100,"type":"supergroup","is_forum":true},"message_thread_id":4,"is_topic_message":true}}}`))
	f.Add([]byte(`{"message":{"message_id":2,"chat":{"id":1,"type":"private"},"from":{"id":1},"photo":[{"file_id":"a"},{"file_id":"b","file_size":9}]}}`))
	f.Add([]byte(`{"message":{"message_id":3,"chat":{"id":1,"type":"private"},"from":{"id":1},"document":{"file_id":"d","file_name":"x.pdf","mime_type":"application/pdf"}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		u, err := ParseUpdate(body)
		if err != nil {
			return
		}
		in, err := Normalize(u)
		if err != nil {
			return
		}
		for _, fl := range in.Files {
			if fl.FileID == "" || fl.Kind == "" || fl.Mime == "" {
				t.Fatalf("attachment without id, kind or mime: %+v", fl)
			}
		}
		b, err := in.Event.Source.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		src, err := relay.ParseSource(b)
		if err != nil {
			t.Fatalf("normalized source does not parse: %v\n%s", err, b)
		}
		if _, err := relay.SessionKey(src, relay.DefaultSessionKeyOptions()); err != nil {
			t.Fatal(err)
		}
	})
}

// A reply carries the replied-to message as reply_to context.
func TestNormalizeReplyContext(t *testing.T) {
	u, err := ParseUpdate([]byte(`{"update_id":1,"message":{"message_id":8,"from":{"id":7,"first_name":"Cy"},
		"chat":{"id":-4001,"type":"group","title":"G"},"date":1,"text":"why?",
		"reply_to_message":{"message_id":5,"from":{"id":99,"is_bot":true,"first_name":"Hermes"},"chat":{"id":-4001,"type":"group"},"date":1,"text":"42"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	in, err := Normalize(u)
	if err != nil {
		t.Fatal(err)
	}
	if r := in.Event.ReplyTo; r == nil || r.Text != "42" || r.Author != "Hermes" || !r.IsOwn || in.Event.ReplyToMessageID != "5" {
		t.Errorf("reply context %+v (reply_to_message_id %q)", r, in.Event.ReplyToMessageID)
	}
	b, _ := in.Event.MarshalJSON()
	if !strings.Contains(string(b), `"reply_to":{"text":"42","author":"Hermes","is_own":true}`) {
		t.Errorf("wire: %s", b)
	}
}

func TestAttachmentKinds(t *testing.T) {
	for _, tc := range []struct {
		field string
		obj   string
		typ   relay.MessageType
		want  []File
	}{
		{"photo", `[{"file_id":"s","file_size":1},{"file_id":"b","file_size":9}]`, relay.MessagePhoto,
			[]File{{FileID: "b", Kind: "image", Mime: "image/jpeg", Size: 9}}},
		{"photo", `[]`, relay.MessagePhoto, nil},
		{"video", `{"file_id":"v","file_size":3}`, relay.MessageVideo, []File{{FileID: "v", Kind: "video", Mime: "video/mp4", Size: 3}}},
		{"voice", `{"file_id":"o","mime_type":"audio/opus"}`, relay.MessageVoice, []File{{FileID: "o", Kind: "voice", Mime: "audio/opus"}}},
		{"audio", `{"file_id":"a","file_name":"a.mp3"}`, relay.MessageAudio, []File{{FileID: "a", Kind: "audio", Mime: "audio/mpeg", Filename: "a.mp3"}}},
		{"document", `{"file_id":"d"}`, relay.MessageDocument, []File{{FileID: "d", Kind: "document", Mime: "application/octet-stream"}}},
		{"document", `{"file_name":"no id"}`, relay.MessageDocument, nil},
		{"sticker", `{"file_id":"k"}`, relay.MessageSticker, []File{{FileID: "k", Kind: "sticker", Mime: "image/webp"}}},
		{"location", `{"latitude":1,"longitude":2}`, relay.MessageLocation, nil},
		{"video", `null`, relay.MessageText, nil},
	} {
		var m Message
		if err := json.Unmarshal([]byte(`{"text":"x","`+tc.field+`":`+tc.obj+`}`), &m); err != nil {
			t.Fatal(err)
		}
		if got := messageType(&m); got != tc.typ {
			t.Errorf("%s %s: type %q, want %q", tc.field, tc.obj, got, tc.typ)
		}
		got, _ := json.Marshal(files(&m))
		want, _ := json.Marshal(tc.want)
		if string(got) != string(want) {
			t.Errorf("%s %s: files %s, want %s", tc.field, tc.obj, got, want)
		}
	}
}
