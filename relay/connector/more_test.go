package connector_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/gateway"
	"github.com/caduceus-dev/caduceus/relay/relaytest"
)

// Markup Telegram cannot parse is sent again as plain text, for sends and
// edits alike.
func TestTelegramMarkupFallback(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	r := g.Send(t.Context(), forumChat, "*unclosed bold", "", nil)
	if !r.Success {
		t.Fatalf("Send = %+v", r)
	}
	r = g.Edit(t.Context(), forumChat, r.MessageID, "*unclosed again", nil)
	if !r.Success {
		t.Fatalf("Edit = %+v", r)
	}
	calls := e.telegram.Calls()
	if len(calls) != 4 {
		t.Fatalf("%d calls, want 4 (each refused once, then plain)", len(calls))
	}
	for i, c := range calls {
		_, withMode := c.Body["parse_mode"]
		if withMode != (i%2 == 0) {
			t.Errorf("call %d (%s) parse_mode present = %v", i, c.Path, withMode)
		}
	}
	if !strings.HasSuffix(calls[3].Path, "/editMessageText") {
		t.Errorf("last call %s", calls[3].Path)
	}
	// An edit longer than the platform allows is refused before the API.
	if r := g.Edit(t.Context(), forumChat, "501", strings.Repeat("😀", 2049), nil); r.Success || !strings.Contains(r.Error, "over the limit") {
		t.Errorf("long edit = %+v", r)
	}
}

// A peer that stops answering pings is closed; one that answers stays.
func TestKeepalive(t *testing.T) {
	e := newEnv(t, func(c *connector.Config) { c.PingInterval = 50 * time.Millisecond })
	// The answering adapter reads (so it answers pings) and sends none of
	// its own; it talks through a proxy that counts the connector's pings.
	fr := newFreezer(t, strings.TrimPrefix(e.srv.URL, "http://"))
	a, err := gateway.New(gateway.Config{URL: "http://" + fr.ln.Addr().String(), GatewayID: "gw-a", Secret: secretA,
		Platform: "discord", BotID: discordApp, PingInterval: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	ws := rawConn(t, e, relay.MintToken(secretA, "gw-a", time.Minute))
	write(t, ws, `{"type":"hello","platform":"discord","botId":"`+discordApp+`"}`+"\n")
	// The raw peer never reads again: its pongs never come.
	e.await(t, "the silent peer closed", func() bool {
		return strings.Contains(e.logs.String(), "keepalive failed; closing") && e.conn.Connections() == 1
	})
	// The connector sends its next ping only once the last one was
	// answered: five chunks down after the handshake (one may still be the
	// descriptor) are at least three pings answered.
	down := fr.down.Load()
	fr.await(t, "three pings answered", func() bool { return fr.down.Load() >= down+5 })
	if !a.Connected() || fr.accepts.Load() != 1 || e.conn.Connections() != 1 {
		t.Fatalf("the answering adapter was dropped (connected %v, %d dials, %d connections)", a.Connected(), fr.accepts.Load(), e.conn.Connections())
	}
}

// Connector.Interrupt reaches the owner of a session, and says so.
func TestConnectorInterrupt(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "discord", discordApp)
	key := "agent:main:discord:group:333:555"
	if e.conn.Interrupt(t.Context(), slot1, key) {
		t.Fatal("interrupt of an unowned session reported delivered")
	}
	e.postDiscord(interaction("1200000000000000020", "111", "333", "555", interactionToken, "x"), nil)
	g.next(t)
	if !e.conn.Interrupt(t.Context(), slot1, key) {
		t.Fatal("interrupt not delivered")
	}
	select {
	case got := <-g.interrupts:
		if got != [2]string{key, "333"} {
			t.Errorf("interrupt %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no interrupt")
	}
	if e.conn.Interrupt(t.Context(), slot2, key) {
		t.Error("another tenant's interrupt delivered")
	}
}

// Telegram webhook edges: unknown bots, unparseable bodies, updates with
// nothing to deliver, chats of no tenant.
func TestTelegramWebhookEdges(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	post := func(path, body string) int {
		req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(body))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", tgSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		name, path, body string
		want             int
	}{
		{"unknown bot", "/hooks/telegram/other", forumUpdate(1, 1, 42, "x"), 404},
		{"not json", "/hooks/telegram/" + telegramBot, "{", 400},
		{"callback query", "/hooks/telegram/" + telegramBot, `{"update_id":3,"callback_query":{"id":"q"}}`, 200},
		{"chat of no tenant", "/hooks/telegram/" + telegramBot, `{"update_id":4,"message":{"message_id":9,"from":{"id":7},"chat":{"id":777,"type":"private"},"text":"hi"}}`, 200},
		{"too large", "/hooks/telegram/" + telegramBot, `{"x":"` + strings.Repeat("a", 1<<20) + `"}`, 413},
		{"GET", "", "", 405},
	} {
		var got int
		if tc.name == "GET" {
			resp, err := http.Get(e.srv.URL + "/hooks/telegram/" + telegramBot)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got = resp.StatusCode
		} else {
			got = post(tc.path, tc.body)
		}
		if got != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, got, tc.want)
		}
	}
	g.none(t, "webhook edge cases")
	if n := len(e.audit.Records(slot1)) + len(e.audit.Records(slot2)); n != 1 { // the connect
		t.Errorf("%d audit records, want only the connection's", n)
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	store, log := relaytest.NewMemory(), audit.NewMemory()
	good := func() connector.Config {
		return connector.Config{Store: store, Audit: log,
			Gateways: map[string]connector.Gateway{"gw": {Tenant: slot1, Secrets: [][]byte{secretA}}}}
	}
	for name, mutate := range map[string]func(*connector.Config){
		"no store": func(c *connector.Config) { c.Store = nil },
		"no audit": func(c *connector.Config) { c.Audit = nil },
		"bad tenant": func(c *connector.Config) {
			c.Gateways["gw"] = connector.Gateway{Tenant: "tenant-1", Secrets: [][]byte{secretA}}
		},
		"short secret": func(c *connector.Config) {
			c.Gateways["gw"] = connector.Gateway{Tenant: slot1, Secrets: [][]byte{[]byte("short")}}
		},
		"no secret":       func(c *connector.Config) { c.Gateways["gw"] = connector.Gateway{Tenant: slot1} },
		"bad discord key": func(c *connector.Config) { c.Discord = map[string]connector.DiscordApp{"a": {PublicKey: "zz"}} },
		"no tg secret":    func(c *connector.Config) { c.Telegram = map[string]connector.TelegramBot{"b": {Token: "t"}} },
		"bad guild tenant": func(c *connector.Config) {
			c.Discord = map[string]connector.DiscordApp{"a": {PublicKey: strings.Repeat("ab", 32), Guilds: map[string]contract.TenantSlot{"1": "x"}}}
		},
	} {
		cfg := good()
		mutate(&cfg)
		if _, err := connector.New(cfg); contract.KindOf(err) != contract.KindInvalid {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
	c, err := connector.New(good())
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
}

// Deliver refuses what it cannot attribute or key, and stores nothing.
func TestDeliverRefusesBadInput(t *testing.T) {
	e := newEnv(t)
	ev := relay.MessageEvent{Text: "x", MessageID: "1", Source: relay.SessionSource{Platform: "telegram", ChatType: "dm", ChatID: "5"}}
	if _, err := e.conn.Deliver(t.Context(), connector.Inbound{Tenant: "tenant-one", Bot: telegramBot, Event: ev, DedupeID: "1"}); contract.KindOf(err) != contract.KindInvalid {
		t.Errorf("bad tenant: %v", err)
	}
	ev.Source.Platform = ""
	if _, err := e.conn.Deliver(t.Context(), connector.Inbound{Tenant: slot1, Bot: telegramBot, Event: ev, DedupeID: "1"}); contract.KindOf(err) != contract.KindInvalid {
		t.Errorf("unkeyable source: %v", err)
	}
	wa := relay.MessageEvent{Text: "x", MessageID: "1", Source: relay.SessionSource{Platform: "whatsapp", ChatType: "dm", ChatID: " +1 555 123 4567 "}}
	if _, err := e.conn.Deliver(t.Context(), connector.Inbound{Tenant: slot1, Bot: telegramBot, Event: wa, DedupeID: "1"}); contract.KindOf(err) != contract.KindInvalid || !strings.Contains(err.Error(), "WhatsApp") {
		t.Errorf("unsafe WhatsApp id: %v", err)
	}
	if first, _ := e.store.MarkSeen(t.Context(), slot1, "whatsapp: +1 555 123 4567 :1", time.Now()); !first {
		t.Error("a refused WhatsApp event was marked seen")
	}
	if first, _ := e.store.MarkSeen(t.Context(), slot1, ":5:1", time.Now()); !first {
		t.Error("a refused event was marked seen")
	}
	if len(e.audit.Records(slot1)) != 0 {
		t.Error("a refused event was recorded as a delivery")
	}
	// A valid one is delivered... into the buffer, with no gateway connected.
	ev.Source.Platform = "telegram"
	if d, err := e.conn.Deliver(t.Context(), connector.Inbound{Tenant: slot1, Bot: telegramBot, Event: ev, DedupeID: "1"}); err != nil || d != connector.Buffered {
		t.Errorf("Deliver = %v, %v", d, err)
	}
	if d, _ := e.conn.Deliver(t.Context(), connector.Inbound{Tenant: slot1, Bot: telegramBot, Event: ev, DedupeID: "1"}); d != connector.Duplicate {
		t.Errorf("second Deliver = %v", d)
	}
}

// With no gateway and a full buffer, an event is dropped and the refusal
// recorded.
func TestBufferFull(t *testing.T) {
	e := newEnv(t, func(c *connector.Config) { c.BufferLimit = 2 })
	for i := 1; i <= 3; i++ {
		if s := e.postTelegram(forumUpdate(i, 200+i, 42, "m"), tgSecret); s != 200 {
			t.Fatalf("webhook %d", s)
		}
	}
	acts := e.auditActions(slot1)
	if acts["relay.buffer/allow"] != 2 || acts["relay.buffer/deny"] != 1 {
		t.Fatalf("audit %v", acts)
	}
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	g.next(t)
	g.next(t)
	g.none(t, "the dropped event")
}

// An interrupt of a session whose key is past the record's resource
// bound (200 bytes) in multibyte text, or holds a NUL, is recorded like
// any other: the resource is cut on a character boundary and kept as
// valid text, not refused by the audit log.
func TestInterruptOfAnOddSessionKeyIsRecorded(t *testing.T) {
	e := newEnv(t)
	for _, key := range []string{
		"agent:main:discord:group:333:" + strings.Repeat("é", 120),
		"agent:main:discord:group:333:a\x00b",
		"agent:main:discord:group:333:\xff",
	} {
		before := e.auditActions(slot1)["relay.interrupt/not_found"]
		if e.conn.Interrupt(t.Context(), slot1, key) {
			t.Fatalf("interrupt of an unowned session %q reported delivered", key)
		}
		if got := e.auditActions(slot1)["relay.interrupt/not_found"]; got != before+1 {
			t.Errorf("session %q: %d refusals recorded, want %d", key, got, before+1)
		}
	}
}
