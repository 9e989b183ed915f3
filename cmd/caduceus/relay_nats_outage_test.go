package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/natstest"
	"github.com/caduceus-dev/caduceus/relay/gateway"
	"github.com/caduceus-dev/caduceus/store/storetest"
)

// TestRelayNATSOutage: two serve processes on one Postgres and one NATS
// server; a gateway on a, Telegram webhooks at b. NATS stops; b keeps
// acknowledging updates (and both keep answering /healthz); NATS comes
// back; the gateway receives every update b acknowledged, once each, in
// the order b took them.
func TestRelayNATSOutage(t *testing.T) {
	dsn := os.Getenv(storetest.EnvPostgres)
	if dsn == "" {
		t.Skip("CADUCEUS_TEST_POSTGRES not set; .ci/run sets it")
	}
	if testing.Short() {
		t.Skip("starts two serve processes and nats-server")
	}
	ns := natstest.StartServer(t)
	pg := storetest.FreshSchema(t, dsn)
	const secret = "a-shared-gateway-secret-of-40-characters"
	data := t.TempDir()
	file := writeConfig(t, data, fmt.Sprintf(`relay:
  gateways:
    gw-a: {tenant: slot-1, secrets: [%q]}
  telegram:
    acmebot: {token: "123:TOKEN", secret_token: "tg-secret", tenant: slot-1}
`, secret))
	a := startProc(t, nil, "--config", file, "--store", pg, "--data", data, "--nats", ns.URL)
	b := startProc(t, nil, "--config", file, "--store", pg, "--data", data, "--nats", ns.URL)

	events := make(chan gateway.Inbound, 64)
	ad, err := gateway.New(gateway.Config{URL: a.url, GatewayID: "gw-a", Secret: []byte(secret), Platform: "telegram", BotID: "acmebot",
		OnEvent: func(_ context.Context, ev gateway.Inbound) error { events <- ev; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if err := ad.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer ad.Close()

	post := func(base string, n int) int {
		t.Helper()
		update := fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"from":{"id":5,"first_name":"Ann"},"chat":{"id":5,"type":"private"},"date":1764612000,"text":"m%d"}}`, n, 100+n, n)
		req, _ := http.NewRequest("POST", base+"/hooks/telegram/acmebot", strings.NewReader(update))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "tg-secret")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("update %d: %v", n, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	next := func(within time.Duration) (string, bool) {
		t.Helper()
		select {
		case ev := <-events:
			return ev.Event.Text, true
		case <-time.After(within):
			return "", false
		}
	}
	healthy := func(p *proc) {
		t.Helper()
		resp, err := http.Get(p.url + "/healthz")
		if err != nil {
			t.Fatalf("/healthz of %s: %v", p.url, err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz of %s: %d", p.url, resp.StatusCode)
		}
	}

	// With NATS up, the chat's first update reaches the gateway (and a
	// claims the session, which b learns).
	if code := post(b.url, 1); code != 200 {
		t.Fatalf("update 1 at b: %d", code)
	}
	if got, ok := next(10 * time.Second); !ok || got != "m1" {
		t.Fatalf("before the outage the gateway got %q (ok %v), want m1", got, ok)
	}

	ns.Stop()
	stopped := time.Now()
	const during = 5
	var slowest time.Duration
	for n := 2; n < 2+during; n++ {
		start := time.Now()
		if code := post(b.url, n); code != 200 {
			t.Fatalf("update %d at b while NATS is away: %d", n, code)
		}
		// b does not wait on NATS (a forward's timeout is 2 s): it
		// buffers the update and answers. Logged, not asserted: a time
		// bound would fail on a busy machine.
		slowest = max(slowest, time.Since(start))
		healthy(a)
		healthy(b)
	}
	t.Logf("the slowest acknowledgement while NATS was away took %v", slowest.Round(time.Millisecond))
	t.Logf("b acknowledged %d updates in %v while NATS was away", during, time.Since(stopped).Round(time.Millisecond))
	ns.Start()
	back := time.Now()
	for n := 2; n < 2+during; n++ {
		got, ok := next(30 * time.Second)
		if !ok {
			t.Fatalf("update m%d, acknowledged by b while NATS was away, did not reach the gateway within 30 s of NATS's return", n)
		}
		if want := fmt.Sprintf("m%d", n); got != want {
			t.Fatalf("after NATS returned the gateway got %q, want %s (each update once, in order)", got, want)
		}
	}
	t.Logf("the gateway had every update %v after NATS returned", time.Since(back).Round(time.Millisecond))

	// Routing works again, and nothing came twice: the next event the
	// gateway sees is the one posted now.
	if code := post(b.url, 9); code != 200 {
		t.Fatalf("update 9 at b after the outage: %d", code)
	}
	if got, ok := next(30 * time.Second); !ok || got != "m9" {
		t.Fatalf("after the outage the gateway got %q (ok %v), want m9 and nothing twice", got, ok)
	}
	healthy(a)
	healthy(b)

	// Every buffered copy was acknowledged: nothing waits to come again
	// (checked at every write to the buffer).
	db, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	awaitRows(t, pg, []string{"relay_buffer"}, 10*time.Second, func() string {
		return fmt.Sprintf("%d events are still buffered after the gateway had them all: they would come again\n%s", left, b.stderr.String())
	}, func() bool {
		if err := db.QueryRow(`SELECT COUNT(*) FROM relay_buffer`).Scan(&left); err != nil {
			t.Fatal(err)
		}
		return left == 0
	})
}
