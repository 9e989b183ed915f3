package discord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caduceus-dev/caduceus/relay"
)

// fakeGateway is an httptest Discord Gateway: every WebSocket connection is
// handed to the test, which scripts it.
type fakeGateway struct {
	srv   *httptest.Server
	conns chan *fakeGatewayConn
}

type fakeGatewayConn struct {
	t    *testing.T
	ws   *websocket.Conn
	path string
	done chan struct{}
}

func newFakeGateway(t *testing.T) *fakeGateway {
	f := &fakeGateway{conns: make(chan *fakeGatewayConn, 8)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/gateway/bot" {
			if r.Header.Get("Authorization") != "Bot tok" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			fmt.Fprintf(w, `{"url":%q,"shards":1}`, f.url("/gw"))
			return
		}
		if q := r.URL.Query(); q.Get("v") != "10" || q.Get("encoding") != "json" {
			http.Error(w, "bad query", http.StatusBadRequest)
			return
		}
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		c := &fakeGatewayConn{t: t, ws: ws, path: r.URL.Path, done: make(chan struct{})}
		f.conns <- c
		select {
		case <-c.done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeGateway) url(path string) string {
	return "ws" + strings.TrimPrefix(f.srv.URL, "http") + path
}

func (f *fakeGateway) next(t *testing.T) *fakeGatewayConn {
	t.Helper()
	select {
	case c := <-f.conns:
		t.Cleanup(func() { c.ws.CloseNow(); close(c.done) })
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not connect within 10 s")
		return nil
	}
}

func (c *fakeGatewayConn) send(op int, d any, seq int64, event string) {
	c.t.Helper()
	p := map[string]any{"op": op, "d": d}
	if op == OpDispatch {
		p["s"], p["t"] = seq, event
	}
	b, _ := json.Marshal(p)
	if err := c.ws.Write(c.t.Context(), websocket.MessageText, b); err != nil {
		c.t.Fatalf("fake gateway write: %v", err)
	}
}

func (c *fakeGatewayConn) hello(intervalMS int) {
	c.send(OpHello, map[string]any{"heartbeat_interval": intervalMS}, 0, "")
}

// recv returns the next payload the session sent.
func (c *fakeGatewayConn) recv() (int, map[string]any, json.RawMessage) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 10*time.Second)
	defer cancel()
	_, b, err := c.ws.Read(ctx)
	if err != nil {
		c.t.Fatalf("fake gateway read: %v", err)
	}
	var p struct {
		Op int             `json:"op"`
		D  json.RawMessage `json:"d"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		c.t.Fatalf("session sent %s: %v", b, err)
	}
	var d map[string]any
	_ = json.Unmarshal(p.D, &d)
	return p.Op, d, p.D
}

// closed waits for the session to end this connection.
func (c *fakeGatewayConn) closed() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), 10*time.Second)
	defer cancel()
	for {
		if _, _, err := c.ws.Read(ctx); err != nil {
			if ctx.Err() != nil {
				c.t.Fatal("the session kept the connection open")
			}
			return
		}
	}
}

func startSession(t *testing.T, s *Session) (<-chan MessageCreate, <-chan error) {
	msgs := make(chan MessageCreate, 16)
	s.OnMessage = func(_ context.Context, m MessageCreate, bot string) {
		if bot != "bot-user" {
			t.Errorf("OnMessage bot user %q, want bot-user (from READY)", bot)
		}
		msgs <- m
	}
	if s.ReconnectDelay == 0 {
		s.ReconnectDelay = time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc, done := make(chan error, 1), make(chan struct{})
	go func() { errc <- s.Run(ctx); close(done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("Run did not return after cancel")
		}
	})
	return msgs, errc
}

func ready(c *fakeGatewayConn, seq int64, session, resumeURL string) {
	c.send(OpDispatch, map[string]any{"v": 10, "session_id": session, "resume_gateway_url": resumeURL,
		"user": map[string]any{"id": "bot-user", "username": "agent", "bot": true}}, seq, "READY")
}

const guildMessage = `{"id":"m1","channel_id":"c1","guild_id":"g1","author":{"id":"u1","username":"al"},"content":"hi <@bot-user>"}`

func TestSessionIdentifyDispatchResumeInvalidate(t *testing.T) {
	f := newFakeGateway(t)
	sess := &Session{API: &Client{BaseURL: f.srv.URL + "/api", BotToken: "tok"}, Token: "tok"}
	msgs, _ := startSession(t, sess)

	// Connect: GET /gateway/bot names the URL; hello, then identify.
	c1 := f.next(t)
	if c1.path != "/gw" {
		t.Fatalf("first connection to %q, want /gw from GET /gateway/bot", c1.path)
	}
	c1.hello(45000)
	op, d, _ := c1.recv()
	if op != OpIdentify || d["token"] != "tok" || d["intents"] != float64(MessageIntents) {
		t.Fatalf("first payload op %d %v, want identify with the token and intents %d", op, d, MessageIntents)
	}
	ready(c1, 1, "sess-1", f.url("/resume"))
	c1.send(OpDispatch, json.RawMessage(guildMessage), 2, "MESSAGE_CREATE")
	select {
	case m := <-msgs:
		if m.ID != "m1" || m.GuildID != "g1" || m.Content != "hi <@bot-user>" {
			t.Fatalf("message %+v", m)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("MESSAGE_CREATE did not reach OnMessage")
	}

	// Disconnect: the session resumes on resume_gateway_url with the last seq.
	c1.ws.Close(websocket.StatusGoingAway, "bye")
	c2 := f.next(t)
	if c2.path != "/resume" {
		t.Fatalf("reconnected to %q, want the resume_gateway_url", c2.path)
	}
	c2.hello(45000)
	op, d, _ = c2.recv()
	if op != OpResume || d["session_id"] != "sess-1" || d["seq"] != float64(2) || d["token"] != "tok" {
		t.Fatalf("after a disconnect: op %d %v, want resume of sess-1 at seq 2", op, d)
	}
	c2.send(OpDispatch, map[string]any{}, 3, "RESUMED")

	// Op 7: reconnect and resume again, now at seq 3.
	c2.send(OpReconnect, nil, 0, "")
	c3 := f.next(t)
	c3.hello(45000)
	if op, d, _ = c3.recv(); op != OpResume || d["seq"] != float64(3) {
		t.Fatalf("after op 7: op %d %v, want resume at seq 3", op, d)
	}

	// Op 9, not resumable: a fresh identify on the Gateway URL.
	c3.send(OpInvalidSession, false, 0, "")
	c4 := f.next(t)
	if c4.path != "/gw" {
		t.Fatalf("after an invalid session connected to %q, want the gateway URL", c4.path)
	}
	c4.hello(45000)
	if op, _, _ = c4.recv(); op != OpIdentify {
		t.Fatalf("after op 9 (d=false): op %d, want identify", op)
	}
	if id, seq := sess.State(); id != "" || seq != 0 {
		t.Fatalf("state after invalid session: %q %d, want none", id, seq)
	}
}

func TestSessionHeartbeat(t *testing.T) {
	f := newFakeGateway(t)
	sess := &Session{Token: "tok", GatewayURL: f.url("/gw"), jitter: func() float64 { return 0 }}
	startSession(t, sess)

	c1 := f.next(t)
	c1.hello(300)
	if op, _, _ := c1.recv(); op != OpIdentify {
		t.Fatalf("op %d, want identify", op)
	}
	// The first beat (jitter 0) carries null: no sequence yet.
	if op, _, raw := c1.recv(); op != OpHeartbeat || string(raw) != "null" {
		t.Fatalf("op %d %s, want heartbeat null", op, raw)
	}
	c1.send(OpHeartbeatAck, nil, 0, "")
	ready(c1, 5, "sess-hb", "")
	for {
		op, _, raw := c1.recv()
		if op != OpHeartbeat {
			t.Fatalf("op %d, want heartbeat", op)
		}
		if string(raw) == "5" {
			break // acknowledged beats continue; this one carries the last seq
		}
		c1.send(OpHeartbeatAck, nil, 0, "")
	}
	// Not acknowledged: the next beat is due, so the session drops the
	// zombie connection and resumes (on the gateway URL: READY named no
	// resume URL).
	c1.closed()
	c2 := f.next(t)
	c2.hello(60000)
	if op, d, _ := c2.recv(); op != OpResume || d["session_id"] != "sess-hb" || d["seq"] != float64(5) {
		t.Fatalf("after a missed ack: op %d %v, want resume at seq 5", op, d)
	}
	if op, _, _ := c2.recv(); op != OpHeartbeat { // jitter 0: the first beat at once
		t.Fatalf("op %d, want heartbeat", op)
	}
	c2.send(OpHeartbeatAck, nil, 0, "")
	// Op 1 from the Gateway is answered at once (the interval is a minute).
	c2.send(OpHeartbeat, nil, 0, "")
	if op, _, _ := c2.recv(); op != OpHeartbeat {
		t.Fatalf("op %d, want a heartbeat answering op 1", op)
	}
}

func TestSessionFatalClose(t *testing.T) {
	f := newFakeGateway(t)
	sess := &Session{Token: "bad", GatewayURL: f.url("/gw")}
	_, errc := startSession(t, sess)
	c := f.next(t)
	c.hello(45000)
	c.recv()
	c.ws.Close(4004, "Authentication failed.")
	select {
	case err := <-errc:
		var fatal errFatal
		if !errors.As(err, &fatal) || fatal.code != 4004 {
			t.Fatalf("Run returned %v, want the 4004 close", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run kept reconnecting after 4004")
	}
}

func TestNormalizeMessage(t *testing.T) {
	member := &Member{Nick: "Ally"}
	cases := []struct {
		name string
		m    MessageCreate
		ch   ChannelKind
		want relay.SessionSource
		text string
	}{
		{"guild channel", MessageCreate{ID: "m1", ChannelID: "c1", GuildID: "g1", Author: User{ID: "u1", Username: "al"}, Member: member,
			Content: "<@bot> hello <@u2>", Mentions: []User{{ID: "bot"}, {ID: "u2"}}}, ChannelKind{Name: "general"},
			relay.SessionSource{Platform: "discord", ChatID: "c1", ChatType: "group", ChatName: "general", UserID: "u1", UserName: "Ally",
				UserHandle: "al", ScopeID: "g1", GuildID: "g1", MessageID: "m1"}, "hello <@u2>"},
		{"thread", MessageCreate{ID: "m2", ChannelID: "t1", GuildID: "g1", Author: User{ID: "u1", Username: "al", GlobalName: "Al"},
			Content: "<@!bot> in thread"}, ChannelKind{Thread: true, ParentID: "c1"},
			relay.SessionSource{Platform: "discord", ChatID: "t1", ChatType: "thread", ThreadID: "t1", ParentChatID: "c1", UserID: "u1",
				UserName: "Al", UserHandle: "al", ScopeID: "g1", GuildID: "g1", MessageID: "m2"}, "in thread"},
		{"dm", MessageCreate{ID: "m3", ChannelID: "d1", Author: User{ID: "u1", Username: "al"}, Content: "/reset"}, ChannelKind{},
			relay.SessionSource{Platform: "discord", ChatID: "d1", ChatType: "dm", UserID: "u1", UserName: "al", UserHandle: "al",
				MessageID: "m3"}, "/reset"},
	}
	for _, tc := range cases {
		ev, err := NormalizeMessage(tc.m, "bot", tc.ch)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if ev.Source != tc.want || ev.Text != tc.text {
			t.Errorf("%s:\n got %+v %q\nwant %+v %q", tc.name, ev.Source, ev.Text, tc.want, tc.text)
		}
	}
	ev, _ := NormalizeMessage(cases[2].m, "bot", ChannelKind{})
	if ev.MessageType != relay.MessageCommand {
		t.Errorf("/reset is %q, want command", ev.MessageType)
	}

	att := MessageCreate{ID: "m4", ChannelID: "d1", Author: User{ID: "u1"}, Attachments: []Attachment{
		{ID: "a1", Filename: "cat.png", Size: 10, URL: "https://cdn.discordapp.com/a/cat.png"},
		{ID: "a2", Filename: "notes.txt", ContentType: "text/plain", URL: "https://cdn.discordapp.com/a/notes.txt"}}}
	ev, err := NormalizeMessage(att, "bot", ChannelKind{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.MediaURLs) != 2 || ev.Media[0].Kind != "image" || ev.Media[0].Mime != "image/png" || ev.Media[1].Kind != "document" ||
		ev.Media[0].Size != 10 || ev.Media[1].Filename != "notes.txt" {
		t.Errorf("attachments: %v %+v", ev.MediaURLs, ev.Media)
	}

	// Another bot's or a webhook's message is is_bot (the connector drops
	// it unless asked); an edit is message_is_edit.
	for name, tc := range map[string]struct {
		m           MessageCreate
		bot, edited bool
	}{
		"bot":     {MessageCreate{ID: "m", ChannelID: "c", Author: User{ID: "b2", Bot: true}, Content: "x"}, true, false},
		"webhook": {MessageCreate{ID: "m", ChannelID: "c", Author: User{ID: "w"}, WebhookID: "w", Content: "x"}, true, false},
		"edit":    {MessageCreate{ID: "m", ChannelID: "c", Author: User{ID: "u"}, Content: "x", EditedTimestamp: "2026-12-01T10:00:00Z", Edit: true}, false, true},
		"person":  {MessageCreate{ID: "m", ChannelID: "c", Author: User{ID: "u"}, Content: "x"}, false, false},
	} {
		ev, err := NormalizeMessage(tc.m, "bot", ChannelKind{})
		if err != nil || ev.Source.IsBot != tc.bot || ev.Source.MessageIsEdit != tc.edited {
			t.Errorf("%s message: %+v, %v; want is_bot %v, message_is_edit %v", name, ev.Source, err, tc.bot, tc.edited)
		}
	}
	for name, m := range map[string]MessageCreate{
		"own":   {ID: "m", ChannelID: "c", Author: User{ID: "bot"}, Content: "x"},
		"empty": {ID: "m", ChannelID: "c", Author: User{ID: "u"}, Content: "<@bot>"},
	} {
		if _, err := NormalizeMessage(m, "bot", ChannelKind{}); !errors.Is(err, ErrIgnored) {
			t.Errorf("%s message: %v, want ErrIgnored", name, err)
		}
	}
}

func TestParseGatewayErrors(t *testing.T) {
	for _, b := range []string{``, `[]`, `{"d":1}`, `{"op":"x"}`} {
		if _, err := ParsePayload([]byte(b)); err == nil {
			t.Errorf("ParsePayload(%q) accepted", b)
		}
	}
	for _, b := range []string{`{}`, `{"id":"1","channel_id":"c"}`, `{"id":"1","author":{"id":"u"}}`, `{"id":1}`} {
		if _, err := ParseMessageCreate([]byte(b)); err == nil {
			t.Errorf("ParseMessageCreate(%q) accepted", b)
		}
	}
}

func FuzzGatewayDispatch(f *testing.F) {
	f.Add([]byte(`{"op":0,"s":2,"t":"MESSAGE_CREATE","d":` + guildMessage + `}`))
	f.Add([]byte(`{"op":0,"s":3,"t":"MESSAGE_CREATE","d":{"id":"m","channel_id":"c","author":{"id":"u"},"attachments":[{"url":"https://x/y.png","filename":"y.png"}]}}`))
	f.Add([]byte(`{"op":10,"d":{"heartbeat_interval":41250}}`))
	f.Add([]byte(`{"op":9,"d":false}`))
	f.Add([]byte(`{"op":0,"s":4,"t":"MESSAGE_UPDATE","d":{"id":"m","channel_id":"c","author":{"id":"u","bot":true},"content":"x","edited_timestamp":"2026-12-01T10:00:00Z"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePayload(b)
		if err != nil || p.Op != OpDispatch {
			return
		}
		m, err := ParseMessageCreate(p.D)
		if err != nil {
			return
		}
		ev, err := NormalizeMessage(m, "bot", ChannelKind{Thread: len(b)%2 == 0, ParentID: "p"})
		if err != nil {
			if !errors.Is(err, ErrIgnored) {
				t.Fatalf("NormalizeMessage error %v is not ErrIgnored", err)
			}
			return
		}
		if ev.Source.ChatID != m.ChannelID || ev.Source.UserID != m.Author.ID || ev.Source.Scope() != m.GuildID {
			t.Fatalf("source %+v does not match message %+v", ev.Source, m)
		}
		if len(ev.MediaURLs) != len(ev.Media) {
			t.Fatalf("media urls %d, media %d", len(ev.MediaURLs), len(ev.Media))
		}
		if _, err := json.Marshal(ev); err != nil {
			t.Fatalf("event does not encode: %v", err)
		}
	})
}

// BenchmarkGatewayDispatch is the per-message cost on the session's read
// loop: parse the frame, decode MESSAGE_CREATE, normalise.
func BenchmarkGatewayDispatch(b *testing.B) {
	frame := []byte(`{"op":0,"s":2,"t":"MESSAGE_CREATE","d":{"id":"m1","channel_id":"c1","guild_id":"g1","author":{"id":"u1","username":"al"},` +
		`"member":{"nick":"Al"},"content":"<@bot> summarise the thread please","mentions":[{"id":"bot"}],` +
		`"attachments":[{"id":"a1","filename":"cat.png","size":10,"url":"https://cdn.discordapp.com/a/cat.png"}]}}`)
	b.ReportAllocs()
	for b.Loop() {
		p, err := ParsePayload(frame)
		if err != nil {
			b.Fatal(err)
		}
		m, err := ParseMessageCreate(p.D)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := NormalizeMessage(m, "bot", ChannelKind{}); err != nil {
			b.Fatal(err)
		}
	}
}
