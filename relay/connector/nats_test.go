package connector_test

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/caduceus-dev/caduceus/internal/natstest"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
)

// natsRouter returns a router of its own process on its own connection.
func natsRouter(t *testing.T, url string) (*connector.NATSRouter, *nats.Conn) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	r, err := connector.NewNATSRouter(nc, connector.NATSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); nc.Close() })
	return r, nc
}

// settle returns once every claim from's router published so far has been
// applied by to's: from's publications reach the server (a flush is a round
// trip behind them), to has read what the server sent it before (likewise),
// and to's subscriptions have handled it (a barrier runs after the
// messages its subscriptions were given).
func settle(t *testing.T, from, to *nats.Conn) {
	t.Helper()
	if err := from.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := to.Flush(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	if err := to.Barrier(func() { close(done) }); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the router's subscriptions did not reach the barrier")
	}
}

// Two connector processes share one store and NATS: a session owned by a
// connection of the first receives, through the first, the interrupts and
// events that arrive at the second; the second's connections may not
// follow up in it.
func TestNATSRoutingAcrossProcesses(t *testing.T) {
	url := natstest.Start(t)
	r1, nc1 := natsRouter(t, url)
	r2, nc2 := natsRouter(t, url)
	e := newEnv(t, func(c *connector.Config) { c.Router = r1 })
	// The second process: same configuration and store, its own router.
	cfg2 := e.config
	cfg2.Router = r2
	cfg2.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c2, err := connector.New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(c2.Handler())
	t.Cleanup(func() { _ = c2.Close(); srv2.Close() })
	e2 := *e
	e2.conn, e2.srv = c2, srv2

	g1 := e.gateway("gw-a", secretA, "discord", discordApp)
	g2 := e2.gateway("gw-a2", secretA2, "discord", discordApp)
	key := "agent:main:discord:group:333:555"
	e.postDiscord(interaction("1200000000000000030", "111", "333", "555", interactionToken, "first"), nil)
	if in := g1.next(t); in.SessionKey != key {
		t.Fatalf("key %q", in.SessionKey)
	}
	settle(t, nc1, nc2)
	if o, _, ok := r2.Owner(slot1, key); !ok || o.ID() == "" {
		t.Fatal("the second process did not learn the owner")
	}
	// An interrupt sent through the second process reaches the owner on the first.
	if err := g2.Interrupt(t.Context(), key, "stop"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-g1.interrupts:
		if got != [2]string{key, "333"} {
			t.Errorf("interrupt %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the owner on the other process got no interrupt")
	}
	// The next event of the session, arriving at the second process, goes
	// to the owner on the first.
	e2.postDiscord(interaction("1200000000000000031", "111", "333", "555", "tok-31", "second"), nil)
	if in := g1.next(t); in.Event.Text != "/ask second" {
		t.Fatalf("forwarded event %+v", in.Event)
	}
	g2.none(t, "an event of a session owned elsewhere")
	// A connection of the second process may not follow up in it.
	if r := g2.FollowUp(t.Context(), key, relay.KindDiscordInteractionToken, "mine?", nil); r.Success || !strings.Contains(r.Error, "another connection") {
		t.Errorf("follow_up from a non-owner = %+v", r)
	}
	if r := g1.FollowUp(t.Context(), key, relay.KindDiscordInteractionToken, "done", nil); !r.Success {
		t.Errorf("follow_up from the owner = %+v", r)
	}
	// When the owner goes away the second process forgets it.
	_ = g1.Close()
	// The first process forgets the connection (announcing it) before it
	// releases the connection's leases.
	e.await(t, "the first process to let go of the owner", func() bool {
		_, _, ok := r1.Owner(slot1, key)
		return !ok && e.conn.Connections() == 0
	})
	settle(t, nc1, nc2)
	if _, _, ok := r2.Owner(slot1, key); ok {
		t.Fatal("the second process kept a gone owner")
	}
}

// The first message of a chat has no session owner. When it arrives at a
// process with no gateway for its bot, that process buffers it in the
// shared store and says so on NATS; the process holding the gateway drains
// it at once (not at its next maintenance tick, two minutes apart by
// default), the gateway's reply goes out through that process, and the
// platform receives it once.
func TestNATSFirstMessageReachesAGatewayOnAnotherProcess(t *testing.T) {
	url := natstest.Start(t)
	r1, nc1 := natsRouter(t, url)
	r2, nc2 := natsRouter(t, url)
	e := newEnv(t, func(c *connector.Config) { c.Router = r1 })
	cfg2 := e.config
	cfg2.Router = r2
	cfg2.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c2, err := connector.New(cfg2)
	if err != nil {
		t.Fatal(err)
	}
	srv2 := httptest.NewServer(c2.Handler())
	t.Cleanup(func() { _ = c2.Close(); srv2.Close() })
	e2 := *e
	e2.conn, e2.srv = c2, srv2

	g1 := e.gateway("gw-a", secretA, "telegram", telegramBot)
	settle(t, nc1, nc2)
	if s := e2.postTelegram(forumUpdate(1, 77, 42, "first words"), tgSecret); s != 200 {
		t.Fatalf("webhook at the second process: %d", s)
	}
	in := g1.next(t)
	if in.Event.Text != "first words" || in.SessionKey != "agent:main:telegram:forum:-1001234567890:42" {
		t.Fatalf("inbound %+v", in)
	}
	if res := g1.Send(t.Context(), forumChat, "hello back", "77", map[string]any{"thread_id": "42"}); !res.Success {
		t.Fatalf("reply through the first process: %+v", res)
	}
	e.await(t, "the buffered event to be acknowledged", func() bool {
		n, err := e.store.Pending(t.Context(), slot1, "telegram", telegramBot, e.clock.Now().Add(time.Hour), 10)
		return err == nil && len(n) == 0
	})
	sends := 0
	for _, c := range e.telegram.Calls() {
		if strings.HasSuffix(c.Path, "/sendMessage") && c.Body["text"] == "hello back" {
			sends++
		}
	}
	if sends != 1 {
		t.Errorf("the platform got the reply %d times, want once", sends)
	}
	// The session is now owned on the first process, and the second knows:
	// its next event goes straight there.
	settle(t, nc1, nc2)
	if o, _, ok := r2.Owner(slot1, in.SessionKey); !ok || o.ID() == "" {
		t.Fatal("the second process did not learn the new owner")
	}
	if s := e2.postTelegram(forumUpdate(2, 78, 42, "second words"), tgSecret); s != 200 {
		t.Fatalf("webhook: %d", s)
	}
	if in := g1.next(t); in.Event.Text != "second words" {
		t.Fatalf("forwarded %+v", in.Event)
	}
}
