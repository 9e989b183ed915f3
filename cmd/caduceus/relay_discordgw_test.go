package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caduceus-dev/caduceus/relay/gateway"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// discordFake is an httptest Discord: the REST API (GET /gateway/bot, GET
// /channels/{id}, POST /channels/{id}/messages) and the Gateway, which
// answers hello, READY and heartbeat acks and hands each identified
// connection to the test.
type discordFake struct {
	srv      *httptest.Server
	mu       sync.Mutex
	rest     []string
	sessions chan *websocket.Conn
}

func newDiscordFake(t *testing.T) *discordFake {
	f := &discordFake{sessions: make(chan *websocket.Conn, 4)}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/gateway" {
			f.gateway(w, r)
			return
		}
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.rest = append(f.rest, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(b))
		f.mu.Unlock()
		switch {
		case r.URL.Path == "/api/gateway/bot":
			fmt.Fprintf(w, `{"url":%q,"shards":1}`, "ws"+strings.TrimPrefix(f.srv.URL, "http")+"/gateway")
		case r.Method == http.MethodGet:
			fmt.Fprintf(w, `{"id":%q,"type":0,"name":"general"}`, strings.TrimPrefix(r.URL.Path, "/api/channels/"))
		default:
			fmt.Fprint(w, `{"id":"msg-out-1"}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *discordFake) gateway(w http.ResponseWriter, r *http.Request) {
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	ctx := r.Context()
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{"op":10,"d":{"heartbeat_interval":45000}}`))
	if _, b, err := ws.Read(ctx); err != nil || !strings.Contains(string(b), `"op":2`) {
		return
	}
	_ = ws.Write(ctx, websocket.MessageText, []byte(`{"op":0,"s":1,"t":"READY","d":{"v":10,"session_id":"s1","resume_gateway_url":"","user":{"id":"999","username":"agent","bot":true}}}`))
	f.sessions <- ws
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			return
		}
		if strings.Contains(string(b), `"op":1,`) || strings.Contains(string(b), `"op":1}`) {
			_ = ws.Write(ctx, websocket.MessageText, []byte(`{"op":11}`))
		}
	}
}

func (f *discordFake) seen() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.rest, "\n")
}

// TestDiscordGatewayThroughTheServer: `serve` with a Discord app marked
// gateway: true opens the Gateway session (URL from GET /gateway/bot on the
// configured API base), a MESSAGE_CREATE reaches a gateway adapter with the
// gateway's session key, and the reply reaches the REST API with the bot
// token from the environment.
func TestDiscordGatewayThroughTheServer(t *testing.T) {
	discord := newDiscordFake(t)
	const app = "123456789012345678"
	secret := "a-shared-gateway-secret-of-40-characters"
	cfg := filepath.Join(t.TempDir(), "caduceus.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`relay:
  gateways:
    gw-a: {tenant: slot-1, secrets: ["env:GW_A_SECRET"]}
  discord_base_url: %s/api
  discord:
    "%s":
      public_key: d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a
      bot_token: env:DISCORD_BOT_TOKEN
      guilds: {"111": slot-1}
      gateway: true
`, discord.srv.URL, app)), 0o600)
	env := map[string]string{"GW_A_SECRET": secret, "DISCORD_BOT_TOKEN": "discord-e2e-token"}
	in := startEnv(t, func(k string) string { return env[k] }, "--config", cfg)

	var ws *websocket.Conn
	select {
	case ws = <-discord.sessions:
	case <-time.After(10 * time.Second):
		t.Fatalf("serve opened no Gateway session; the API saw:\n%s", discord.seen())
	}

	events := make(chan gateway.Inbound, 4)
	a, err := gateway.New(gateway.Config{URL: in.url, GatewayID: "gw-a", Secret: []byte(secret), Platform: "discord", BotID: app,
		OnEvent: func(_ context.Context, ev gateway.Inbound) error { events <- ev; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go a.Run(ctx)
	defer a.Close()

	msg := `{"op":0,"s":2,"t":"MESSAGE_CREATE","d":{"id":"m-e2e","channel_id":"333","guild_id":"111",` +
		`"author":{"id":"777","username":"al"},"content":"<@999> hello from discord","mentions":[{"id":"999"}],"attachments":[]}}`
	if err := ws.Write(t.Context(), websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	var ev gateway.Inbound
	select {
	case ev = <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("the message did not reach the gateway")
	}
	if ev.Event.Text != "hello from discord" || ev.SessionKey != "agent:main:discord:group:333:777" || ev.Event.Source.ScopeID != "111" {
		t.Errorf("event %+v key %q", ev.Event, ev.SessionKey)
	}
	if res := a.Send(t.Context(), "333", "reply", "m-e2e", nil); !res.Success ||
		!strings.Contains(discord.seen(), "POST /api/channels/333/messages Bot discord-e2e-token") {
		t.Errorf("reply: %+v; the API saw:\n%s", res, discord.seen())
	}
	if !strings.Contains(discord.seen(), "GET /api/gateway/bot Bot discord-e2e-token") {
		t.Errorf("the Gateway URL was not asked of GET /gateway/bot:\n%s", discord.seen())
	}
}

// TestDiscordGatewayOneOwnerOnPostgres: two `serve` processes on one
// Postgres store, both configured for the same bot's Gateway: only one
// opens a session; when it stops, the other takes the bot over.
func TestDiscordGatewayOneOwnerOnPostgres(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	pg := storetest.FreshSchema(t, dsn)
	discord := newDiscordFake(t)
	cfg := filepath.Join(t.TempDir(), "caduceus.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`relay:
  gateways:
    gw-a: {tenant: slot-1, secrets: ["a-shared-gateway-secret-of-40-characters"]}
  discord_base_url: %s/api
  gateway_lease_ttl: 300ms
  discord:
    "123456789012345678":
      public_key: d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a
      bot_token: tok
      guilds: {"111": slot-1}
      gateway: true
`, discord.srv.URL)), 0o600)
	noenv := func(string) string { return "" }
	first := startEnv(t, noenv, "--config", cfg, "--store", pg)
	select {
	case <-discord.sessions:
	case <-time.After(10 * time.Second):
		t.Fatalf("no Gateway session; the API saw:\n%s", discord.seen())
	}
	startEnv(t, noenv, "--config", cfg, "--store", pg)
	// The second process asks for the lease every 100 ms; over a second
	// (ten attempts) it must never get it while the first renews.
	select {
	case <-discord.sessions:
		t.Fatal("a second serve process opened a Gateway session for the same bot")
	case <-time.After(time.Second):
	}
	first.cancel() // its shutdown releases the lease (the cleanup waits for it to exit)
	select {
	case <-discord.sessions:
	case <-time.After(20 * time.Second):
		t.Fatal("the second serve did not take the bot over after the first stopped")
	}
}
