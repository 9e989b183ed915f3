package slack_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/slack"
)

// Slack's own worked example (https://api.slack.com/authentication/verifying-requests-from-slack):
// the signing secret, timestamp, body and the signature Slack computed.
const (
	docSecret    = "8f742231b10e8888abcd99yyyzzz85a5"
	docTimestamp = "1531420618"
	docBody      = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	docSignature = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestVerify(t *testing.T) {
	at := time.Unix(1531420618, 0)
	body := []byte(docBody)
	if got := slack.Sign(docSecret, docTimestamp, body); got != docSignature {
		t.Fatalf("Sign = %s, Slack's example says %s", got, docSignature)
	}
	cases := []struct {
		name            string
		secret, ts, sig string
		body            []byte
		now             time.Time
		want            error
	}{
		{"valid", docSecret, docTimestamp, docSignature, body, at, nil},
		{"valid 4m59s later", docSecret, docTimestamp, docSignature, body, at.Add(4*time.Minute + 59*time.Second), nil},
		{"stale: 5m01s later", docSecret, docTimestamp, docSignature, body, at.Add(5*time.Minute + time.Second), slack.ErrStale},
		{"stale: from the future", docSecret, docTimestamp, docSignature, body, at.Add(-6 * time.Minute), slack.ErrStale},
		{"body changed by one byte", docSecret, docTimestamp, docSignature, append([]byte(docBody[:len(docBody)-1]), 'd'), at, slack.ErrForged},
		{"timestamp changed", docSecret, "1531420619", docSignature, body, at, slack.ErrForged},
		{"wrong secret", "another-secret", docTimestamp, docSignature, body, at, slack.ErrForged},
		{"empty secret", "", docTimestamp, docSignature, body, at, slack.ErrForged},
		{"no v0 prefix", docSecret, docTimestamp, strings.TrimPrefix(docSignature, "v0="), body, at, slack.ErrForged},
		{"v1 scheme", docSecret, docTimestamp, "v1=" + docSignature[3:], body, at, slack.ErrForged},
		{"not hex", docSecret, docTimestamp, "v0=zz", body, at, slack.ErrForged},
		{"truncated", docSecret, docTimestamp, docSignature[:40], body, at, slack.ErrForged},
		{"no timestamp", docSecret, "", docSignature, body, at, slack.ErrForged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := slack.Verify(c.secret, c.ts, c.sig, c.body, c.now); !errors.Is(err, c.want) {
				t.Errorf("Verify = %v, want %v", err, c.want)
			}
		})
	}
}

func TestParseEnvelopeAndChallenge(t *testing.T) {
	e, err := slack.ParseEnvelope([]byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`))
	if err != nil || e.Type != slack.TypeURLVerification {
		t.Fatalf("parse: %+v %v", e, err)
	}
	if got := string(slack.ChallengeResponse(e)); got != `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}` {
		t.Errorf("challenge answer %s", got)
	}
	for _, bad := range []string{``, `[]`, `{}`, `{"type":"url_verification"}`, `{"type":"event_callback"}`, `{"type":1}`} {
		if _, err := slack.ParseEnvelope([]byte(bad)); err == nil {
			t.Errorf("ParseEnvelope(%s) accepted", bad)
		}
	}
}

func callback(event string) slack.Envelope {
	e, err := slack.ParseEnvelope([]byte(`{"type":"event_callback","team_id":"T1","api_app_id":"A1","event_id":"Ev1","event_time":1700000000,"event":` + event + `}`))
	if err != nil {
		panic(err)
	}
	return e
}

func TestNormalize(t *testing.T) {
	stamp := slack.Options{StampTopLevel: true}
	cases := []struct {
		name  string
		event string
		opts  slack.Options
		want  relay.SessionSource
		typ   relay.MessageType
		key   string
	}{
		{"channel top-level, stamped", `{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"hi","ts":"1700000000.000300"}`, stamp,
			relay.SessionSource{Platform: "slack", ChatID: "C1", ChatType: "group", UserID: "U1", ScopeID: "T1", GuildID: "T1", ThreadID: "1700000000.000300", MessageID: "1700000000.000300"},
			relay.MessageText, "agent:main:slack:group:T1:C1:1700000000.000300"},
		{"channel top-level, not stamped", `{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"hi","ts":"1700000000.000300"}`, slack.Options{},
			relay.SessionSource{Platform: "slack", ChatID: "C1", ChatType: "group", UserID: "U1", ScopeID: "T1", GuildID: "T1", MessageID: "1700000000.000300"},
			relay.MessageText, "agent:main:slack:group:T1:C1:U1"},
		{"reply in a thread", `{"type":"message","channel":"C1","channel_type":"channel","user":"U2","text":"more","ts":"1700000001.000400","thread_ts":"1700000000.000100"}`, stamp,
			relay.SessionSource{Platform: "slack", ChatID: "C1", ChatType: "group", UserID: "U2", ScopeID: "T1", GuildID: "T1", ThreadID: "1700000000.000100", MessageID: "1700000001.000400"},
			relay.MessageText, "agent:main:slack:group:T1:C1:1700000000.000100"},
		{"private channel", `{"type":"message","channel":"G1","channel_type":"group","user":"U1","text":"x","ts":"1.2"}`, slack.Options{},
			relay.SessionSource{Platform: "slack", ChatID: "G1", ChatType: "group", UserID: "U1", ScopeID: "T1", GuildID: "T1", MessageID: "1.2"},
			relay.MessageText, "agent:main:slack:group:T1:G1:U1"},
		{"group DM", `{"type":"message","channel":"G2","channel_type":"mpim","user":"U1","text":"x","ts":"1.2"}`, slack.Options{},
			relay.SessionSource{Platform: "slack", ChatID: "G2", ChatType: "group", UserID: "U1", ScopeID: "T1", GuildID: "T1", MessageID: "1.2"},
			relay.MessageText, "agent:main:slack:group:T1:G2:U1"},
		{"DM, stamped", `{"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":"1700000000.000200"}`, stamp,
			relay.SessionSource{Platform: "slack", ChatID: "D1", ChatType: "dm", UserID: "U1", ScopeID: "T1", GuildID: "T1", ThreadID: "1700000000.000200", MessageID: "1700000000.000200", OneToOneVerified: true},
			relay.MessageText, "agent:main:slack:dm:T1:D1:1700000000.000200"},
		{"DM, not stamped", `{"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":"1700000000.000200"}`, slack.Options{},
			relay.SessionSource{Platform: "slack", ChatID: "D1", ChatType: "dm", UserID: "U1", ScopeID: "T1", GuildID: "T1", MessageID: "1700000000.000200", OneToOneVerified: true},
			relay.MessageText, "agent:main:slack:dm:T1:D1"},
		{"app_mention (no channel_type)", `{"type":"app_mention","channel":"C1","user":"U1","text":"<@UBOT> hi","ts":"5.6","team":"T9"}`, slack.Options{},
			relay.SessionSource{Platform: "slack", ChatID: "C1", ChatType: "group", UserID: "U1", ScopeID: "T1", GuildID: "T1", MessageID: "5.6"},
			relay.MessageText, "agent:main:slack:group:T1:C1:U1"},
		{"file share with profile", `{"type":"message","subtype":"file_share","channel":"C1","channel_type":"channel","user":"U1","text":"","ts":"7.8","files":[{"id":"F1","mimetype":"image/png"}],"user_profile":{"display_name":"","real_name":"Ada L"}}`, slack.Options{},
			relay.SessionSource{Platform: "slack", ChatID: "C1", ChatType: "group", UserID: "U1", UserName: "Ada L", ScopeID: "T1", GuildID: "T1", MessageID: "7.8"},
			relay.MessagePhoto, "agent:main:slack:group:T1:C1:U1"},
		{"thread broadcast", `{"type":"message","subtype":"thread_broadcast","channel":"C1","channel_type":"channel","user":"U1","text":"x","ts":"9.1","thread_ts":"9.0"}`, stamp,
			relay.SessionSource{Platform: "slack", ChatID: "C1", ChatType: "group", UserID: "U1", ScopeID: "T1", GuildID: "T1", ThreadID: "9.0", MessageID: "9.1"},
			relay.MessageText, "agent:main:slack:group:T1:C1:9.0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, err := slack.Normalize(callback(c.event), c.opts)
			if err != nil {
				t.Fatal(err)
			}
			if in.Event.Source != c.want || in.Event.MessageType != c.typ || in.DedupeID != c.want.MessageID || in.Team != "T1" {
				t.Errorf("got %+v type %s dedupe %s\nwant %+v type %s", in.Event.Source, in.Event.MessageType, in.DedupeID, c.want, c.typ)
			}
			key, err := relay.SessionKey(in.Event.Source, relay.DefaultSessionKeyOptions())
			if err != nil || key != c.key {
				t.Errorf("key %q (%v), want %q", key, err, c.key)
			}
			// The wire form carries scope_id, and reads back the same.
			b, _ := json.Marshal(in.Event)
			var back relay.MessageEvent
			if err := json.Unmarshal(b, &back); err != nil || back.Source != in.Event.Source || !strings.Contains(string(b), `"scope_id":"T1"`) {
				t.Errorf("wire round trip: %s -> %+v %v", b, back.Source, err)
			}
		})
	}
	ignored := []string{
		`{"type":"message","subtype":"message_changed","channel":"C1","ts":"1.1","message":{"text":"x"}}`,
		`{"type":"message","subtype":"message_deleted","channel":"C1","ts":"1.1"}`,
		`{"type":"message","subtype":"channel_join","channel":"C1","user":"U1","text":"joined","ts":"1.1"}`,
		`{"type":"message","subtype":"message_changed","channel":"C1","ts":"1.2","message":{"user":"U1","text":"x https://e.com","ts":"1.1"}}`,
		`{"type":"message","channel":"C1","user":"UBOT","bot_id":"B1","app_id":"A1","text":"my own reply","ts":"1.1"}`,
		`{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"B1","bot_profile":{"app_id":"A1"},"text":"my own legacy reply","ts":"1.1"}`,
		`{"type":"message","subtype":"message_changed","channel":"C1","ts":"1.2","message":{"user":"UBOT","bot_id":"B1","app_id":"A1","text":"my edit","ts":"1.1","edited":{"user":"UBOT","ts":"1.2"}}}`,
		`{"type":"message","channel":"C1","user":"U1","text":"","ts":"1.1"}`,
		`{"type":"reaction_added","user":"U1","reaction":"thumbsup"}`,
	}
	for _, ev := range ignored {
		if _, err := slack.Normalize(callback(ev), stamp); !errors.Is(err, slack.ErrIgnored) {
			t.Errorf("Normalize(%s) = %v, want ErrIgnored", ev, err)
		}
	}
	// Another app's bot is is_bot (the connector drops it unless asked);
	// an edit is the edited message, message_is_edit, deduplicated per edit.
	for ev, want := range map[string]relay.SessionSource{
		`{"type":"message","subtype":"bot_message","channel":"C1","channel_type":"channel","bot_id":"B2","app_id":"A2","text":"beep","ts":"1.1"}`: {
			Platform: "slack", ChatID: "C1", ChatType: "group", UserID: "B2", ScopeID: "T1", GuildID: "T1", MessageID: "1.1", IsBot: true},
		`{"type":"message","channel":"C1","channel_type":"channel","user":"U9","bot_id":"B2","app_id":"A2","text":"beep","ts":"1.1"}`: {
			Platform: "slack", ChatID: "C1", ChatType: "group", UserID: "U9", ScopeID: "T1", GuildID: "T1", MessageID: "1.1", IsBot: true},
		`{"type":"message","subtype":"message_changed","channel":"D1","channel_type":"im","ts":"1.3","hidden":true,
			"message":{"type":"message","user":"U1","text":"fixed","ts":"1.1","edited":{"user":"U1","ts":"1.3"}},"previous_message":{"user":"U1","text":"fxed","ts":"1.1"}}`: {
			Platform: "slack", ChatID: "D1", ChatType: "dm", UserID: "U1", ScopeID: "T1", GuildID: "T1", MessageID: "1.1", MessageIsEdit: true, OneToOneVerified: true},
	} {
		in, err := slack.Normalize(callback(ev), slack.Options{})
		if err != nil || in.Event.Source != want {
			t.Errorf("Normalize(%s):\n got %+v, %v\nwant %+v", ev, in.Event.Source, err, want)
		}
		if want.MessageIsEdit && (in.DedupeID != "1.1:edit:1.3" || in.Event.Text != "fixed") {
			t.Errorf("edit: dedupe %q text %q", in.DedupeID, in.Event.Text)
		}
	}
	if _, err := slack.Normalize(callback(`{"type":"message","user":"U1","text":"x","ts":"1.1"}`), stamp); err == nil || errors.Is(err, slack.ErrIgnored) {
		t.Errorf("a message without a channel: %v", err)
	}
}

// The session-key vectors of HERMES-RELAY §7 rows 22–25 (Slack).
func TestSlackSessionKeyVectors(t *testing.T) {
	cases := []struct{ src, key string }{
		{`{"platform":"slack","chat_type":"group","scope_id":"T1","chat_id":"C1","user_id":"U1","thread_id":"1700000000.000100"}`, "agent:main:slack:group:T1:C1:1700000000.000100"},
		{`{"platform":"slack","chat_type":"dm","scope_id":"T1","chat_id":"D1","user_id":"U1"}`, "agent:main:slack:dm:T1:D1"},
		{`{"platform":"slack","chat_type":"group","scope_id":"T1","chat_id":"C1","user_id":"U1"}`, "agent:main:slack:group:T1:C1:U1"},
		{`{"platform":"slack","chat_type":"channel","chat_id":"C123","thread_id":"1700000000.000001","user_id":"U1"}`, "agent:main:slack:channel:C123:1700000000.000001"},
		// scope_id is keyed for Slack only.
		{`{"platform":"discord","chat_type":"group","scope_id":"G1","chat_id":"C1","user_id":"U1"}`, "agent:main:discord:group:C1:U1"},
	}
	for _, c := range cases {
		src, err := relay.ParseSource([]byte(c.src))
		if err != nil {
			t.Fatal(err)
		}
		if key, _ := relay.SessionKey(src, relay.DefaultSessionKeyOptions()); key != c.key {
			t.Errorf("%s -> %q, want %q", c.src, key, c.key)
		}
	}
}

// fakeSlack is an httptest fake of the Web API.
type fakeSlack struct {
	mu    sync.Mutex
	calls []string
	n     int
}

func (f *fakeSlack) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.n++
	n := f.n
	f.calls = append(f.calls, r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(b))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.Contains(string(b), "C404"):
		io.WriteString(w, `{"ok":false,"error":"channel_not_found"}`)
	case strings.HasSuffix(r.URL.Path, "/chat.postMessage"):
		io.WriteString(w, `{"ok":true,"channel":"C1","ts":"1700000099.00000`+strconv.Itoa(n)+`"}`)
	case strings.HasSuffix(r.URL.Path, "/conversations.info"):
		if strings.Contains(string(b), "D1") {
			io.WriteString(w, `{"ok":true,"channel":{"id":"D1","is_im":true,"user":"U1"}}`)
			return
		}
		io.WriteString(w, `{"ok":true,"channel":{"id":"C1","name":"general","is_channel":true}}`)
	default:
		io.WriteString(w, `{"ok":true}`)
	}
}

func TestClient(t *testing.T) {
	f := &fakeSlack{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	c := &slack.Client{BaseURL: srv.URL, Token: "xoxb-secret"}
	ctx := t.Context()
	ts, err := c.PostMessage(ctx, "C1", "hello *world*", "1700000000.000100")
	if err != nil || ts != "1700000099.000001" {
		t.Fatalf("post: %q %v", ts, err)
	}
	if err := c.Update(ctx, "C1", ts, "edited"); err != nil {
		t.Fatal(err)
	}
	if err := c.SetStatus(ctx, "C1", "1700000000.000100", "is thinking…"); err != nil {
		t.Fatal(err)
	}
	if info, err := c.ConversationInfo(ctx, "C1"); err != nil || info != (slack.ChatInfo{Name: "general", Type: "group"}) {
		t.Errorf("info: %+v %v", info, err)
	}
	if info, err := c.ConversationInfo(ctx, "D1"); err != nil || info != (slack.ChatInfo{Name: "U1", Type: "dm"}) {
		t.Errorf("dm info: %+v %v", info, err)
	}
	_, err = c.PostMessage(ctx, "C404", "x", "")
	var apiErr *slack.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != "channel_not_found" || strings.Contains(err.Error(), "xoxb") {
		t.Errorf("error answer: %v", err)
	}
	want := []string{
		`/chat.postMessage Bearer xoxb-secret {"channel":"C1","text":"hello *world*","thread_ts":"1700000000.000100"}`,
		`/chat.update Bearer xoxb-secret {"channel":"C1","text":"edited","ts":"1700000099.000001"}`,
		`/assistant.threads.setStatus Bearer xoxb-secret {"channel_id":"C1","status":"is thinking…","thread_ts":"1700000000.000100"}`,
		`/conversations.info Bearer xoxb-secret channel=C1`,
	}
	for i, w := range want {
		if f.calls[i] != w {
			t.Errorf("call %d: %s\nwant %s", i, f.calls[i], w)
		}
	}
}

func TestDescriptor(t *testing.T) {
	d := slack.Descriptor()
	b, _ := json.Marshal(d)
	for _, k := range []string{`"max_message_length":40000`, `"len_unit":"chars"`, `"markdown_dialect":"mrkdwn"`, `"supported_ops":["send","edit","typing","get_chat_info"]`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("descriptor %s lacks %s", b, k)
		}
	}
}

func FuzzParseEnvelope(f *testing.F) {
	f.Add([]byte(`{"type":"url_verification","challenge":"c"}`))
	f.Add([]byte(`{"type":"event_callback","team_id":"T1","event":{"type":"message","channel":"C1","user":"U1","text":"hi","ts":"1.1","thread_ts":"1.0"}}`))
	f.Add([]byte(`{"type":"event_callback","event":{"type":"app_mention","channel":"D1","user":"U1","files":[{"mimetype":"audio/ogg"}],"ts":"1"}}`))
	f.Add([]byte(`{"type":"event_callback","api_app_id":"A1","event":{"type":"message","subtype":"message_changed","channel":"D1","channel_type":"im","ts":"1.3","message":{"user":"U1","text":"x","ts":"1.1","edited":{"user":"U1","ts":"1.3"}}}}`))
	f.Add([]byte(`{"type":"event_callback","api_app_id":"A1","event":{"type":"message","subtype":"bot_message","channel":"C1","bot_id":"B2","app_id":"A2","text":"x","ts":"1.1"}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		e, err := slack.ParseEnvelope(body)
		if err != nil {
			return
		}
		in, err := slack.Normalize(e, slack.Options{StampTopLevel: true})
		if err != nil {
			return
		}
		s := in.Event.Source
		if s.Platform != "slack" || s.ChatID == "" || s.UserID == "" || s.MessageID == "" || s.ThreadID == "" {
			t.Fatalf("normalized an unkeyable message: %+v", s)
		}
		if _, err := relay.SessionKey(s, relay.DefaultSessionKeyOptions()); err != nil {
			t.Fatal(err)
		}
	})
}
