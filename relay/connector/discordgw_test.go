package connector_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
)

// fakeDiscordGateway is an httptest Discord Gateway that plays Discord's
// side on its own: hello, READY (or RESUMED) after identify (or resume),
// an ack for every heartbeat. The test sends dispatches.
type fakeDiscordGateway struct {
	srv   *httptest.Server
	conns chan *gatewayConn
	seq   atomic.Int64
}

type gatewayConn struct {
	ws     *websocket.Conn
	op     int            // the session's first payload: 2 identify, 6 resume
	d      map[string]any // and its data
	closed chan struct{}  // closed when the session drops the connection
}

func newFakeDiscordGateway(t *testing.T) *fakeDiscordGateway {
	f := &fakeDiscordGateway{conns: make(chan *gatewayConn, 8)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer ws.CloseNow()
		ctx := r.Context()
		_ = ws.Write(ctx, websocket.MessageText, []byte(`{"op":10,"d":{"heartbeat_interval":45000}}`))
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		var first struct {
			Op int            `json:"op"`
			D  map[string]any `json:"d"`
		}
		_ = json.Unmarshal(b, &first)
		c := &gatewayConn{ws: ws, op: first.Op, d: first.D, closed: make(chan struct{})}
		defer close(c.closed)
		if first.Op == 2 {
			_ = ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"op":0,"s":%d,"t":"READY","d":{"v":10,"session_id":"sess-%p",
				"resume_gateway_url":%q,"user":{"id":"999","username":"agent","bot":true}}}`, f.seq.Add(1), c, f.url()))
		} else {
			_ = ws.Write(ctx, websocket.MessageText, fmt.Appendf(nil, `{"op":0,"s":%d,"t":"RESUMED","d":{}}`, f.seq.Add(1)))
		}
		f.conns <- c
		for {
			_, b, err := ws.Read(ctx)
			if err != nil {
				return
			}
			if strings.HasPrefix(string(b), `{"d":`) && strings.Contains(string(b), `"op":1`) {
				_ = ws.Write(ctx, websocket.MessageText, []byte(`{"op":11}`))
			}
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeDiscordGateway) url() string { return "ws" + strings.TrimPrefix(f.srv.URL, "http") }

func (f *fakeDiscordGateway) next(t *testing.T) *gatewayConn {
	t.Helper()
	select {
	case c := <-f.conns:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no Gateway session connected within 10 s")
		return nil
	}
}

// noConn asserts no session is connected now.
func (f *fakeDiscordGateway) noConn(t *testing.T, what string) {
	t.Helper()
	select {
	case c := <-f.conns:
		t.Fatalf("%s: a second Gateway session connected (op %d)", what, c.op)
	default:
	}
}

// message sends a MESSAGE_CREATE dispatch on c.
func (f *fakeDiscordGateway) message(t *testing.T, c *gatewayConn, guild, channel, user, id, content string, bot bool) {
	t.Helper()
	g := ""
	if guild != "" {
		g = fmt.Sprintf(`"guild_id":%q,"member":{"nick":"Nick%s"},`, guild, user)
	}
	b := fmt.Appendf(nil, `{"op":0,"s":%d,"t":"MESSAGE_CREATE","d":{"id":%q,"channel_id":%q,%s"author":{"id":%q,"username":"u%s","bot":%v},
		"content":%q,"mentions":[],"attachments":[]}}`, f.seq.Add(1), id, channel, g, user, user, bot, content)
	if err := c.ws.Write(t.Context(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func withDiscordGateway(f *fakeDiscordGateway) func(*connector.Config) {
	return func(c *connector.Config) {
		app := c.Discord[discordApp]
		app.Gateway, app.GatewayURL = true, f.url()
		c.Discord[discordApp] = app
		c.GatewayLeaseTTL = 150 * time.Millisecond
	}
}

func TestDiscordGatewayMessages(t *testing.T) {
	f := newFakeDiscordGateway(t)
	e := newEnv(t, withDiscordGateway(f))
	g := e.gateway("gw-a", secretA, "discord", discordApp)

	c := f.next(t)
	if c.op != 2 || c.d["token"] != "discord-bot-token" || c.d["intents"] != float64(1<<9|1<<12|1<<15) {
		t.Fatalf("first payload op %d %v, want identify with the bot token and the message intents", c.op, c.d)
	}

	f.message(t, c, "111", "333", "777", "m-1", "<@999> hello there", false)
	in := g.next(t)
	src := in.Event.Source
	if in.SessionKey != "agent:main:discord:group:333:777" || in.Event.Text != "hello there" || src.ChatType != "group" ||
		src.ScopeID != "111" || src.UserName != "Nick777" || src.ChatName != "general" || src.MessageID != "m-1" {
		t.Errorf("guild message: key %q event %+v", in.SessionKey, in.Event)
	}

	f.message(t, c, "111", "thr-1", "777", "m-2", "in the thread", false)
	in = g.next(t)
	src = in.Event.Source
	if in.SessionKey != "agent:main:discord:thread:thr-1:thr-1" || src.ChatType != "thread" || src.ThreadID != "thr-1" ||
		src.ParentChatID != "333" {
		t.Errorf("thread message: key %q source %+v", in.SessionKey, src)
	}

	f.message(t, c, "", "dm-1", "555", "m-3", "a DM", false)
	in = g.next(t)
	if in.SessionKey != "agent:main:discord:dm:dm-1" || in.Event.Source.ChatType != "dm" || in.Event.Source.ScopeID != "" {
		t.Errorf("dm: key %q source %+v", in.SessionKey, in.Event.Source)
	}

	// Bots (including this one) and another tenant's guild never reach
	// this gateway; a redelivered message id is dropped.
	f.message(t, c, "111", "333", "888", "m-4", "from a bot", true)
	f.message(t, c, "111", "333", "999", "m-5", "my own words", false)
	f.message(t, c, "222", "444", "777", "m-6", "other tenant", false)
	f.message(t, c, "111", "333", "777", "m-1", "<@999> hello there", false)
	g.none(t, "bot, own, other-tenant and duplicate messages")

	// Replies go out through the REST client.
	if res := g.Send(t.Context(), "thr-1", "answer", "m-2", nil); !res.Success {
		t.Fatalf("send: %+v", res)
	}
	var posted bool
	for _, call := range e.discord.Calls() {
		if call.Method == "POST" && call.Path == "/channels/thr-1/messages" && call.Body["content"] == "answer" &&
			call.Auth == "Bot discord-bot-token" {
			posted = true
		}
	}
	if !posted {
		t.Errorf("reply not posted: %+v", e.discord.Calls())
	}

	// A dropped connection is resumed with the session and last seq.
	lastSeq := f.seq.Load()
	c.ws.CloseNow()
	c2 := f.next(t)
	if c2.op != 6 || !strings.HasPrefix(fmt.Sprint(c2.d["session_id"]), "sess-") || c2.d["seq"] != float64(lastSeq) {
		t.Fatalf("after a disconnect: op %d %v, want resume at seq %d", c2.op, c2.d, lastSeq)
	}
	f.message(t, c2, "111", "333", "777", "m-7", "after resume", false)
	if in := g.next(t); in.Event.Text != "after resume" {
		t.Errorf("after resume: %+v", in.Event)
	}
}

// leaseStore is a relay.Store that reports every attempt on a Gateway lease
// and can be made to fail them (a process that lost its database).
type leaseStore struct {
	relay.Store
	fail     atomic.Bool
	attempts chan bool // the outcome of each Gateway lease attempt
	enqueued chan relay.Buffered
}

func (s *leaseStore) Enqueue(ctx context.Context, b relay.Buffered, limit int) (bool, error) {
	ok, err := s.Store.Enqueue(ctx, b, limit)
	if ok && s.enqueued != nil && !strings.HasPrefix(b.ID, "rbuf_discordgw_") {
		s.enqueued <- b
	}
	return ok, err
}

func (s *leaseStore) Lease(ctx context.Context, tenant contract.TenantSlot, id, owner string, now, until time.Time) (bool, error) {
	if !strings.HasPrefix(id, "rbuf_discordgw_") {
		return s.Store.Lease(ctx, tenant, id, owner, now, until)
	}
	ok, err := false, errors.New("database unreachable")
	if !s.fail.Load() {
		ok, err = s.Store.Lease(ctx, tenant, id, owner, now, until)
	}
	select {
	case s.attempts <- ok:
	default:
	}
	return ok, err
}

// attempt waits for the next Gateway lease attempt and returns its outcome.
func (s *leaseStore) attempt(t *testing.T) bool {
	t.Helper()
	select {
	case ok := <-s.attempts:
		return ok
	case <-time.After(10 * time.Second):
		t.Fatal("no Gateway lease attempt within 10 s")
		return false
	}
}

func TestDiscordGatewayLease(t *testing.T) {
	f := newFakeDiscordGateway(t)
	var storeA *leaseStore
	e := newEnv(t, withDiscordGateway(f), func(c *connector.Config) {
		storeA = &leaseStore{Store: c.Store, attempts: make(chan bool, 1)}
		c.Store = storeA
	})
	cA := f.next(t) // the first connector holds the lease and runs the session

	// A second connector on the same store: it asks for the lease every
	// tick and never gets it, so it never connects.
	storeB := &leaseStore{Store: e.store, attempts: make(chan bool, 1), enqueued: make(chan relay.Buffered, 8)}
	cfgB := e.config
	cfgB.Store = storeB
	b, err := connector.New(cfgB)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	for range 3 {
		if storeB.attempt(t) {
			t.Fatal("the second connector took a lease the first holds")
		}
	}
	f.noConn(t, "while the first connector holds the lease")

	// The first connector loses its store: its renewal fails and it stops
	// its session at once. The lease has not run out, so the second still
	// waits.
	storeA.fail.Store(true)
	for storeA.attempt(t) {
	}
	select {
	case <-cA.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the first connector kept its session after losing the lease")
	}
	for range 2 {
		if storeB.attempt(t) {
			t.Fatal("the second connector took an unexpired lease")
		}
	}
	f.noConn(t, "before the lease expired")

	// Once the lease has expired, the second connector takes the bot over
	// with a fresh identify, and its messages reach the store.
	e.clock.Advance(time.Second)
	for !storeB.attempt(t) {
	}
	c := f.next(t)
	if c.op != 2 {
		t.Fatalf("takeover: op %d, want identify", c.op)
	}
	f.message(t, c, "111", "333", "777", "m-b", "to the new owner", false)
	select {
	case buf := <-storeB.enqueued:
		if buf.SessionKey != "agent:main:discord:group:333:777" || !strings.Contains(string(buf.Event), "to the new owner") {
			t.Errorf("buffered %q %s", buf.SessionKey, buf.Event)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the new owner's message was not buffered")
	}
}

func TestDiscordGatewayConfig(t *testing.T) {
	e := newEnv(t)
	for name, mutate := range map[string]func(*connector.DiscordApp){
		"no bot token": func(a *connector.DiscordApp) { a.BotToken = "" },
		"no tenant":    func(a *connector.DiscordApp) { a.Guilds, a.Users, a.Tenant = nil, nil, "" },
	} {
		cfg := e.config
		app := cfg.Discord[discordApp]
		app.Gateway = true
		mutate(&app)
		cfg.Discord = map[string]connector.DiscordApp{discordApp: app}
		_, err := connector.New(cfg)
		if contract.KindOf(err) != contract.KindInvalid || !strings.Contains(err.Error(), "gateway needs bot_token and a tenant") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// A gateway cannot acknowledge the Gateway lease row away (it lives in the
// tenant's buffer).
func TestDiscordGatewayLeaseNotAcknowledgeable(t *testing.T) {
	f := newFakeDiscordGateway(t)
	e := newEnv(t, withDiscordGateway(f))
	f.next(t)
	ws := rawConn(t, e, relay.MintToken(secretA, "gw-a", time.Minute))
	write(t, ws, `{"type":"hello","platform":"discord","botId":"`+discordApp+`"}`+"\n")
	if fr := readFrame(t, ws); fr.Type != relay.FrameDescriptor {
		t.Fatalf("hello answered %+v", fr)
	}
	write(t, ws, `{"type":"inbound_ack","bufferId":"rbuf_discordgw_`+discordApp+`"}`+"\n")
	// Frames are read in order: once this outbound is answered, the ack
	// before it has been handled.
	write(t, ws, `{"type":"outbound","requestId":"r1","action":{"op":"teleport","chat_id":"333"}}`+"\n")
	if fr := readFrame(t, ws); fr.Type != relay.FrameOutboundResult || fr.RequestID != "r1" {
		t.Fatalf("outbound answered %+v", fr)
	}
	rows, err := e.store.Pending(t.Context(), slot1, "discord.gateway-lease", discordApp, e.clock.Now().Add(time.Hour), 0)
	if err != nil || len(rows) != 1 {
		t.Fatalf("lease rows after the ack: %d %v", len(rows), err)
	}
}

// Attachments of a Gateway message are copied from Discord's CDN into the
// media store under the guild's tenant (CDN links expire); one the CDN
// does not serve keeps its link; one on another host is listed as it came
// and never fetched.
func TestDiscordGatewayAttachmentsRehosted(t *testing.T) {
	var fetched atomic.Int32
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		if r.URL.Path != "/attachments/1/2/cat.png" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		io.WriteString(w, "\x89PNG cat bytes")
	}))
	t.Cleanup(cdn.Close)
	f := newFakeDiscordGateway(t)
	// The fake CDN is on the host of the configured API base (the fake
	// Discord API, 127.0.0.1), which is allowed beside Discord's CDN hosts.
	e := newEnv(t, withDiscordGateway(f), withPublicURL)
	g := e.gateway("gw-a", secretA, "discord", discordApp)
	c := f.next(t)
	b := fmt.Appendf(nil, `{"op":0,"s":%d,"t":"MESSAGE_CREATE","d":{"id":"m-9","channel_id":"333","guild_id":"111","member":{"nick":"N"},
		"author":{"id":"777","username":"u"},"content":"look","mentions":[],"attachments":[
		{"id":"a1","filename":"cat.png","content_type":"image/png","size":14,"url":%q},
		{"id":"a2","filename":"gone.png","content_type":"image/png","size":5,"url":%q},
		{"id":"a3","filename":"x.bin","size":1,"url":"https://elsewhere.example/x.bin"}]}}`,
		f.seq.Add(1), cdn.URL+"/attachments/1/2/cat.png", cdn.URL+"/attachments/1/2/gone.png")
	if err := c.ws.Write(t.Context(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	in := g.next(t)
	urls := in.Event.MediaURLs
	if len(urls) != 3 || len(in.Event.Media) != 3 || !strings.HasPrefix(urls[0], "https://relay.example.com/relay/media/rmed") ||
		urls[1] != cdn.URL+"/attachments/1/2/gone.png" || urls[2] != "https://elsewhere.example/x.bin" {
		t.Fatalf("media urls %v", urls)
	}
	if m := in.Event.Media[0]; m.Mime != "image/png" || m.Kind != "image" || m.Filename != "cat.png" || m.Size != 14 {
		t.Errorf("re-hosted media entry %+v", m)
	}
	code, body, _ := e.getMedia(t, urls[0], "gw-a", secretA)
	if code != 200 || string(body) != "\x89PNG cat bytes" {
		t.Errorf("re-hosted bytes: %d %q", code, body)
	}
	if code, _, _ := e.getMedia(t, urls[0], "gw-b", secretB); code != 404 {
		t.Errorf("another tenant's gateway read the attachment: %d", code)
	}
	if n := fetched.Load(); n != 2 {
		t.Errorf("the CDN was asked %d times, want 2 (the other host is never fetched)", n)
	}
}
