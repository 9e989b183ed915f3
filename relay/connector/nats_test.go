package connector_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
)

// startNATS runs a nats-server on a free loopback port for the test.
func startNATS(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("nats-server is not installed; CI must run the NATS router test")
		}
		t.Skip("nats-server is not installed; the NATS router needs it for this test")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "-a", "127.0.0.1", "-p", fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if nc, err := nats.Connect(url); err == nil {
			nc.Close()
			return url
		}
		if time.Now().After(deadline) {
			t.Fatal("nats-server did not start")
		}
	}
}

func natsRouter(t *testing.T, url string) *connector.NATSRouter {
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
	return r
}

// Two connector processes share one store and NATS: a session owned by a
// connection of the first receives, through the first, the interrupts and
// events that arrive at the second; the second's connections may not
// follow up in it.
func TestNATSRoutingAcrossProcesses(t *testing.T) {
	url := startNATS(t)
	r1, r2 := natsRouter(t, url), natsRouter(t, url)
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
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if o, _, ok := r2.Owner(slot1, key); ok && o.ID() != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second process never learned the owner")
		}
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
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, _, ok := r2.Owner(slot1, key); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second process kept a gone owner")
		}
	}
}
