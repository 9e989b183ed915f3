package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/natstest"
	"github.com/caduceus-dev/caduceus/relay/gateway"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestRelayAcrossThreeProcesses: three serve processes on one Postgres
// schema and one NATS server. A Hermes gateway connected to process a
// receives the first message of a Telegram chat whose webhook reached
// process c, replies through a, and the Bot API gets the reply once. One
// process holds the Discord bot's Gateway session; killed with SIGKILL,
// another opens the session once the lease runs out.
func TestRelayAcrossThreeProcesses(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts three serve processes and nats-server")
	}
	nats := natstest.Start(t)
	pg := storetest.FreshSchema(t, dsn)
	discord := newDiscordFake(t)
	var (
		mu    sync.Mutex
		sends []string
	)
	tg := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if strings.HasSuffix(r.URL.Path, "/sendMessage") {
			mu.Lock()
			sends = append(sends, string(b))
			mu.Unlock()
			fmt.Fprint(w, `{"ok":true,"result":{"message_id":900,"chat":{"id":5,"type":"private"}}}`)
			return
		}
		fmt.Fprint(w, `{"ok":true,"result":true}`)
	}))
	t.Cleanup(tg.Close)
	const secret = "a-shared-gateway-secret-of-40-characters"
	data := t.TempDir()
	file := writeConfig(t, data, fmt.Sprintf(`relay:
  gateways:
    gw-a: {tenant: slot-1, secrets: [%q]}
  telegram_base_url: %s
  telegram:
    acmebot: {token: "123:TOKEN", secret_token: "tg-secret", tenant: slot-1}
  discord_base_url: %s/api
  gateway_lease_ttl: 500ms
  discord:
    "123456789012345678":
      public_key: d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a
      bot_token: tok
      guilds: {"111": slot-1}
      gateway: true
`, secret, tg.URL, discord.srv.URL))
	var procs []*proc
	for range 3 {
		procs = append(procs, startProc(t, nil, "--config", file, "--store", pg, "--data", data, "--nats", nats))
	}
	a, c := procs[0], procs[2]

	// Telegram: the gateway is on a, the webhook reaches c.
	events := make(chan gateway.Inbound, 4)
	ad, err := gateway.New(gateway.Config{URL: a.url, GatewayID: "gw-a", Secret: []byte(secret), Platform: "telegram", BotID: "acmebot",
		OnEvent: func(_ context.Context, ev gateway.Inbound) error { events <- ev; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer ad.Close()
	update := `{"update_id":1,"message":{"message_id":77,"from":{"id":5,"first_name":"Ann"},"chat":{"id":5,"type":"private"},"date":1764612000,"text":"first words"}}`
	req, _ := http.NewRequest("POST", c.url+"/hooks/telegram/acmebot", strings.NewReader(update))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "tg-secret")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the webhook at c: %d", resp.StatusCode)
	}
	var ev gateway.Inbound
	select {
	case ev = <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("the first message, taken by c, did not reach the gateway on a")
	}
	if ev.Event.Text != "first words" {
		t.Fatalf("event %+v", ev.Event)
	}
	if res := ad.Send(t.Context(), "5", "hello back", "77", nil); !res.Success {
		t.Fatalf("the reply through a: %+v", res)
	}
	mu.Lock()
	got := append([]string(nil), sends...)
	mu.Unlock()
	if len(got) != 1 || !strings.Contains(got[0], "hello back") {
		t.Errorf("the Bot API got %d sendMessage calls, want the reply once: %q", len(got), got)
	}

	// Discord: one process holds the session; kill it, another takes over.
	select {
	case <-discord.sessions:
	case <-time.After(10 * time.Second):
		t.Fatalf("no Gateway session; the API saw:\n%s", discord.seen())
	}
	owner := -1
	for i, p := range procs {
		if strings.Contains(p.stderr.String(), "this process owns the bot's session") {
			if owner >= 0 {
				t.Fatalf("processes %d and %d both own the bot's session", owner, i)
			}
			owner = i
		}
	}
	if owner < 0 {
		t.Fatal("no process logged that it owns the session")
	}
	if err := procs[owner].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	select {
	case <-discord.sessions:
		t.Logf("process %d killed; another opened the session %v later", owner, time.Since(killed).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("no other process took the bot over after its owner was killed")
	}
	next := 0
	for i, p := range procs {
		if i != owner && strings.Contains(p.stderr.String(), "this process owns the bot's session") {
			next++
		}
	}
	if next != 1 {
		t.Errorf("%d surviving processes own the session, want 1", next)
	}
}
