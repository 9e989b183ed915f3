package discord

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/relay"
)

func TestVerifyRFC8032(t *testing.T) {
	// RFC 8032 §7.1, TEST 1 (empty message) and TEST 2 (one byte 0x72).
	pub1, _ := ParsePublicKey("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
	sig1 := "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
	if !verify(pub1, sig1, nil) {
		t.Error("TEST 1 refused")
	}
	pub2, _ := ParsePublicKey("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")
	sig2 := "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"
	// As a webhook: timestamp "r" and an empty body sign the message 0x72.
	if !Verify(pub2, sig2, "r", nil) {
		t.Error("TEST 2 refused")
	}
	if Verify(pub1, sig2, "r", nil) {
		t.Error("TEST 2 signature accepted under TEST 1 key")
	}
	if Verify(pub2, sig2, "", []byte("r")) {
		t.Error("empty timestamp accepted")
	}
}

func TestVerifyForgeries(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	body := []byte(`{"type":1}`)
	ts := "1700000000"
	sig := hex.EncodeToString(ed25519.Sign(priv, append([]byte(ts), body...)))
	if !Verify(pub, sig, ts, body) {
		t.Fatal("valid signature refused")
	}
	flipped := []byte(sig)
	if flipped[0] == 'a' {
		flipped[0] = 'b'
	} else {
		flipped[0] = 'a'
	}
	other, _, _ := ed25519.GenerateKey(nil)
	for name, ok := range map[string]bool{
		"body changed":      Verify(pub, sig, ts, []byte(`{"type":2}`)),
		"timestamp changed": Verify(pub, sig, "1700000001", body),
		"signature flipped": Verify(pub, string(flipped), ts, body),
		"other key":         Verify(other, sig, ts, body),
		"not hex":           Verify(pub, "zz"+sig[2:], ts, body),
		"short":             Verify(pub, sig[:64], ts, body),
		"nil key":           Verify(nil, sig, ts, body),
	} {
		if ok {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := ParsePublicKey("abcd"); err == nil {
		t.Error("short public key parsed")
	}
}

const guildCommand = `{"id":"1200000000000000001","application_id":"app1","type":2,"token":"SECRET-TOKEN-abc","version":1,
 "guild_id":"111","channel_id":"333","channel":{"id":"333","type":0,"name":"general","topic":"talk"},
 "member":{"nick":"Ally","user":{"id":"555","username":"al","global_name":"Al"}},
 "data":{"id":"cmd1","name":"ask","type":1,"options":[{"name":"prompt","type":3,"value":"what is up"},{"name":"n","type":4,"value":3}]}}`

func TestNormalize(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		wantText string
		wantType relay.MessageType
		wantSrc  relay.SessionSource
		wantKey  string
	}{
		{"guild slash command", guildCommand, "/ask what is up 3", relay.MessageCommand,
			relay.SessionSource{Platform: "discord", ChatID: "333", ChatType: "group", ChatName: "general", ChatTopic: "talk", UserID: "555", UserName: "Ally", GuildID: "111"},
			"agent:main:discord:group:333:555"},
		{"dm slash command with subcommand", `{"id":"2","application_id":"app1","type":2,"token":"TOK-x9","channel_id":"888","user":{"id":"555","username":"al"},
			"data":{"name":"memory","options":[{"name":"forget","type":1,"options":[{"name":"all","type":5,"value":true}]}]}}`,
			"/memory forget true", relay.MessageCommand,
			relay.SessionSource{Platform: "discord", ChatID: "888", ChatType: "dm", UserID: "555", UserName: "al"},
			"agent:main:discord:dm:888"},
		{"button", `{"id":"3","application_id":"app1","type":3,"token":"TOK-x9","guild_id":"111","channel_id":"333","member":{"user":{"id":"555","username":"al"}},
			"message":{"id":"999"},"data":{"custom_id":"approve:42","component_type":2}}`,
			"approve:42", relay.MessageText,
			relay.SessionSource{Platform: "discord", ChatID: "333", ChatType: "group", UserID: "555", UserName: "al", GuildID: "111", MessageID: "999"},
			"agent:main:discord:group:333:555"},
		{"select menu", `{"id":"4","application_id":"app1","type":3,"token":"TOK-x9","channel_id":"888","user":{"id":"5","username":"u"},
			"data":{"custom_id":"pick","component_type":3,"values":["a","b"]}}`,
			"pick a,b", relay.MessageText,
			relay.SessionSource{Platform: "discord", ChatID: "888", ChatType: "dm", UserID: "5", UserName: "u"},
			"agent:main:discord:dm:888"},
		{"modal submit", `{"id":"5","application_id":"app1","type":5,"token":"TOK-x9","channel_id":"888","user":{"id":"5","username":"u"},
			"data":{"custom_id":"m","components":[{"components":[{"custom_id":"a","value":"line one"}]},{"components":[{"custom_id":"b","value":"line two"}]}]}}`,
			"line one\nline two", relay.MessageText,
			relay.SessionSource{Platform: "discord", ChatID: "888", ChatType: "dm", UserID: "5", UserName: "u"},
			"agent:main:discord:dm:888"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i, err := ParseInteraction([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			in, err := Normalize(i)
			if err != nil {
				t.Fatal(err)
			}
			if in.Event.Text != tc.wantText || in.Event.MessageType != tc.wantType {
				t.Errorf("text %q type %q, want %q %q", in.Event.Text, in.Event.MessageType, tc.wantText, tc.wantType)
			}
			want := tc.wantSrc
			want.ScopeID = want.GuildID // scope_id is the guild, guild_id its alias
			if in.Event.Source != want {
				t.Errorf("source\n got %+v\nwant %+v", in.Event.Source, want)
			}
			if in.Event.MessageID != i.ID {
				t.Errorf("message id %q", in.Event.MessageID)
			}
			key, _ := relay.SessionKey(in.Event.Source, relay.DefaultSessionKeyOptions())
			if key != tc.wantKey {
				t.Errorf("key %q, want %q", key, tc.wantKey)
			}
			if in.Token != i.Token || in.ApplicationID != "app1" {
				t.Errorf("token/app not kept at the edge: %+v", in)
			}
			b, _ := json.Marshal(in.Event)
			if strings.Contains(string(b), i.Token) {
				t.Errorf("event JSON carries the interaction token: %s", b)
			}
		})
	}
	for name, body := range map[string]string{
		"ping":         `{"id":"1","type":1}`,
		"autocomplete": `{"id":"1","type":4,"channel_id":"1","user":{"id":"2"},"data":{"name":"x"}}`,
		"no channel":   `{"id":"1","type":2,"user":{"id":"2"},"data":{"name":"x"}}`,
		"no user":      `{"id":"1","type":2,"channel_id":"1","data":{"name":"x"}}`,
		"no data":      `{"id":"1","type":2,"channel_id":"1","user":{"id":"2"}}`,
	} {
		i, err := ParseInteraction([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := Normalize(i); err == nil {
			t.Errorf("%s: normalized", name)
		}
	}
	for _, body := range []string{``, `[]`, `{"type":"2"}`, `{"id":"1"}`, `{"type":2}`} {
		if _, err := ParseInteraction([]byte(body)); err == nil {
			t.Errorf("ParseInteraction(%q) succeeded", body)
		}
	}
}

func TestAck(t *testing.T) {
	for typ, want := range map[int]string{1: `{"type":1}`, 2: `{"type":5}`, 3: `{"type":6}`, 4: `{"type":8,"data":{"choices":[]}}`, 5: `{"type":5}`} {
		if got := string(Ack(Interaction{Type: typ})); got != want {
			t.Errorf("Ack(type %d) = %s, want %s", typ, got, want)
		}
	}
}

// fakeDiscord records requests and answers like the REST API.
type fakeReq struct {
	Method, Path, Auth string
	Body               map[string]any
}

func fakeDiscord(t *testing.T, status int) (*httptest.Server, *[]fakeReq) {
	var reqs []fakeReq
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &body)
		reqs = append(reqs, fakeReq{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), body})
		if status != 200 {
			w.WriteHeader(status)
			_, _ = w.Write([]byte(`{"message":"Unknown Webhook","code":10015}`))
			return
		}
		switch {
		case r.Method == http.MethodGet:
			_, _ = w.Write([]byte(`{"id":"333","type":0,"name":"general"}`))
		case strings.HasSuffix(r.URL.Path, "/typing"):
			w.WriteHeader(http.StatusNoContent)
		default:
			_, _ = w.Write([]byte(`{"id":"m-1"}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &reqs
}

func TestClient(t *testing.T) {
	srv, reqs := fakeDiscord(t, 200)
	c := &Client{BaseURL: srv.URL, BotToken: "bot-secret"}
	ctx := t.Context()
	id, err := c.Send(ctx, "333", "hello", "1001")
	if err != nil || id != "m-1" {
		t.Fatalf("Send = %q, %v", id, err)
	}
	if err := c.Edit(ctx, "333", "m-1", "edited"); err != nil {
		t.Fatal(err)
	}
	if err := c.Typing(ctx, "333"); err != nil {
		t.Fatal(err)
	}
	if id, err := c.FollowUp(ctx, "app1", "SECRET-TOKEN", "later"); err != nil || id != "m-1" {
		t.Fatalf("FollowUp = %q, %v", id, err)
	}
	info, err := c.Channel(ctx, "333")
	if err != nil || info.Name != "general" || info.Type != "group" {
		t.Fatalf("Channel = %+v, %v", info, err)
	}
	want := []struct{ method, path, auth, content string }{
		{"POST", "/channels/333/messages", "Bot bot-secret", "hello"},
		{"PATCH", "/channels/333/messages/m-1", "Bot bot-secret", "edited"},
		{"POST", "/channels/333/typing", "Bot bot-secret", ""},
		{"POST", "/webhooks/app1/SECRET-TOKEN?wait=true", "", "later"},
		{"GET", "/channels/333", "Bot bot-secret", ""},
	}
	if len(*reqs) != len(want) {
		t.Fatalf("%d requests", len(*reqs))
	}
	for i, w := range want {
		r := (*reqs)[i]
		got, _ := r.Body["content"].(string)
		if r.Method != w.method || r.Path != w.path || r.Auth != w.auth || got != w.content {
			t.Errorf("request %d = %s %s auth=%q content=%q; want %+v", i, r.Method, r.Path, r.Auth, got, w)
		}
	}
	ref, _ := (*reqs)[0].Body["message_reference"].(map[string]any)
	if ref["message_id"] != "1001" {
		t.Errorf("reply reference %v", (*reqs)[0].Body)
	}
}

func TestClientErrorsHideToken(t *testing.T) {
	srv, _ := fakeDiscord(t, 404)
	c := &Client{BaseURL: srv.URL}
	_, err := c.FollowUp(t.Context(), "app1", "SECRET-TOKEN", "x")
	if err == nil || strings.Contains(err.Error(), "SECRET-TOKEN") {
		t.Fatalf("err = %v", err)
	}
	srv.Close()
	_, err = c.FollowUp(t.Context(), "app1", "SECRET-TOKEN", "x")
	if err == nil || strings.Contains(err.Error(), "SECRET-TOKEN") {
		t.Fatalf("transport error = %v", err)
	}
}

// FuzzWebhook runs arbitrary bodies through the webhook parser and
// normalizer: no panic, and no normalized event carries the token.
func FuzzWebhook(f *testing.F) {
	f.Add([]byte(guildCommand))
	f.Add([]byte(`{"id":"1","type":1}`))
	f.Add([]byte(`{"id":"3","type":3,"token":"tok","channel_id":"1","user":{"id":"5"},"data":{"custom_id":"x","values":["tok"]}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		i, err := ParseInteraction(body)
		if err != nil {
			return
		}
		in, err := Normalize(i)
		if err != nil {
			return
		}
		b, err := json.Marshal(in.Event)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := relay.ParseSource(mustSource(t, b)); err != nil {
			t.Fatalf("normalized source does not parse: %v", err)
		}
	})
}

func mustSource(t *testing.T, event []byte) []byte {
	var m struct {
		Source json.RawMessage `json:"source"`
	}
	if err := json.Unmarshal(event, &m); err != nil {
		t.Fatal(err)
	}
	return m.Source
}

// An interaction in a thread is keyed like the thread's messages, and a
// prompt button comes back as a structured prompt_response.
func TestNormalizeThreadAndPrompt(t *testing.T) {
	body := `{"id":"9","application_id":"1","type":3,"token":"tok","version":1,"guild_id":"111","channel_id":"777",
		"channel":{"id":"777","type":11,"name":"handoff","parent_id":"333"},"member":{"user":{"id":"555","username":"al"}},
		"message":{"id":"4242"},"data":{"custom_id":"hp1:a1b2c3.0000ffff:once","component_type":2}}`
	i, err := ParseInteraction([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	in, err := Normalize(i)
	if err != nil {
		t.Fatal(err)
	}
	src := in.Event.Source
	if src.ChatType != relay.ChatThread || src.ChatID != "777" || src.ThreadID != "777" || src.ParentChatID != "333" || src.ScopeID != "111" {
		t.Errorf("thread source %+v", src)
	}
	if key, _ := relay.SessionKey(src, relay.DefaultSessionKeyOptions()); key != "agent:main:discord:thread:777:777" {
		t.Errorf("key %q", key)
	}
	pr := in.Event.PromptResponse
	if pr == nil || pr.PromptID != "a1b2c3.0000ffff" || pr.OptionID != "once" || pr.PromptMessageID != "4242" ||
		in.Event.Text != "/once" || in.Event.MessageType != relay.MessageCommand {
		t.Errorf("prompt response %+v, text %q", pr, in.Event.Text)
	}
	if _, ok := ParsePromptToken("hp1:nooption"); ok {
		t.Error("a token without an option parsed")
	}
}
