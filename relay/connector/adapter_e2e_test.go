package connector_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/gateway"
)

// Without a connection every call fails with the gateway's own result.
func TestAdapterNotConnected(t *testing.T) {
	a, err := gateway.New(gateway.Config{URL: "http://127.0.0.1:1", GatewayID: "gw-a", Secret: secretA, Platform: "discord"})
	if err != nil {
		t.Fatal(err)
	}
	want := relay.Result{Success: false, Error: "relay transport not connected"}
	for name, r := range map[string]relay.Result{
		"send":          a.Send(t.Context(), "1", "x", "", nil),
		"edit":          a.Edit(t.Context(), "1", "2", "x", nil),
		"typing":        a.Typing(t.Context(), "1", nil),
		"follow_up":     a.FollowUp(t.Context(), "k", relay.KindDiscordInteractionToken, "x", nil),
		"get_chat_info": a.GetChatInfo(t.Context(), "1"),
	} {
		if r != want {
			t.Errorf("%s = %+v", name, r)
		}
	}
	if err := a.Interrupt(t.Context(), "k", ""); !errors.Is(err, gateway.ErrNotConnected) {
		t.Errorf("Interrupt = %v", err)
	}
	if got := gateway.DialURL("https://relay.example/"); got != "wss://relay.example/relay" {
		t.Errorf("DialURL = %q", got)
	}
	if got := gateway.DialURL("http://h:1/relay"); got != "ws://h:1/relay" {
		t.Errorf("DialURL = %q", got)
	}
	if _, err := gateway.New(gateway.Config{URL: "x"}); err == nil {
		t.Error("New without gateway id or secret succeeded")
	}
}

// An outbound call the connector does not answer in time yields the
// gateway's timeout result; the connection stays usable.
func TestAdapterOutboundTimeout(t *testing.T) {
	slow := make(chan struct{})
	t.Cleanup(func() { close(slow) })
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-slow:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(stall.Close)
	e := newEnv(t, func(c *connector.Config) { c.DiscordBaseURL = stall.URL })
	g := e.gateway("gw-a", secretA, "discord", discordApp)
	a, _ := gateway.New(gateway.Config{URL: e.srv.URL, GatewayID: "gw-a", Secret: secretA, Platform: "discord", BotID: discordApp,
		OutboundTimeout: 150 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(context.Context, gateway.Inbound) error { return nil }})
	if err := a.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	_ = g
	e.postDiscord(interaction("1200000000000000010", "111", "333", "555", interactionToken, "x"), nil)
	time.Sleep(100 * time.Millisecond) // the chat is bound once the event is in
	start := time.Now()
	r := a.Typing(t.Context(), "333", nil)
	if r != (relay.Result{Success: false, Error: "relay outbound timed out"}) {
		t.Fatalf("Typing against a stalled platform = %+v", r)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("timeout took %v", d)
	}
	if r := a.GetChatInfo(t.Context(), "unbound"); r.Success || r.Error == "relay outbound timed out" {
		t.Errorf("connection unusable after a timeout: %+v", r)
	}
}

// Run reconnects with backoff after the connector goes away; events posted
// meanwhile are kept in the store and arrive after the reconnect; an
// expired-token refusal is retried, not terminal.
func TestAdapterReconnects(t *testing.T) {
	e := newEnv(t)
	// A server whose handler can be swapped: the connector "restarts" on
	// the same address and store.
	var h atomic.Value
	h.Store(e.conn.Handler())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.Load().(http.Handler).ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	events := make(chan gateway.Inbound, 10)
	var connects atomic.Int32
	a, _ := gateway.New(gateway.Config{URL: srv.URL, GatewayID: "gw-a", Secret: secretA, Platform: "telegram", BotID: telegramBot,
		MinBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnEvent: func(_ context.Context, in gateway.Inbound) error { events <- in; return nil }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	waitConnected := func() {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
		defer wcancel()
		if err := a.WaitConnected(wctx); err != nil {
			t.Fatalf("not connected: %v", err)
		}
		connects.Add(1)
	}
	waitConnected()

	// Restart: close the first connector, post while it is down, serve a
	// second connector over the same store.
	_ = e.conn.Close()
	for deadline := time.Now().Add(5 * time.Second); a.Connected(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("adapter did not notice the connector going away")
		}
	}
	c2, err := connector.New(connector.Config{
		Gateways: map[string]connector.Gateway{"gw-a": {Tenant: slot1, Secrets: [][]byte{secretA}}},
		Telegram: map[string]connector.TelegramBot{telegramBot: {Token: "123:TGTOKEN", SecretToken: tgSecret, Tenant: slot1}},
		Store:    e.store, Audit: e.audit, Now: e.clock.Now, TelegramBaseURL: e.telegram.srv.URL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c2.Close() })
	// While the first connector's socket is gone and before the adapter is
	// back, an update arrives at the second.
	e.clock.Advance(time.Hour) // every token now looks expired: refused with "expired", and retried
	h.Store(c2.Handler())
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/telegram/"+telegramBot, stringsReader(forumUpdate(7, 700, 42, "while you were away")))
	req.Header.Set("X-Telegram-Bot-Api-Secret-Token", tgSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("webhook: %v %v", resp, err)
	}
	resp.Body.Close()
	time.Sleep(200 * time.Millisecond)
	if a.Connected() {
		t.Fatal("connected with an expired token")
	}
	e.clock.Advance(-time.Hour)
	waitConnected()
	select {
	case in := <-events:
		if in.Event.Text != "while you were away" || in.BufferID == "" {
			t.Errorf("after reconnect: %+v", in)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the buffered event did not arrive after the reconnect")
	}
	cancel()
	_ = a.Close()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return")
	}
}

// freezer is a TCP proxy whose traffic can be frozen, to make a live
// connection silently stop (a half-open network) without closing it.
type freezer struct {
	ln     net.Listener
	frozen atomic.Bool
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			pump := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if err != nil {
						dst.Close()
						return
					}
					for f.frozen.Load() {
						time.Sleep(5 * time.Millisecond)
					}
					if _, err := dst.Write(buf[:n]); err != nil {
						src.Close()
						return
					}
				}
			}
			go pump(out, in)
			go pump(in, out)
		}
	}()
	return f
}

// An adapter whose connector stops answering pings drops the connection and
// dials again.
func TestAdapterKeepalive(t *testing.T) {
	e := newEnv(t, func(c *connector.Config) { c.PingInterval = -1 })
	fr := newFreezer(t, strings.TrimPrefix(e.srv.URL, "http://"))
	a, _ := gateway.New(gateway.Config{URL: "http://" + fr.ln.Addr().String(), GatewayID: "gw-a", Secret: secretA,
		Platform: "discord", BotID: discordApp, PingInterval: 50 * time.Millisecond,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = a.Run(ctx) }()
	wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
	defer wcancel()
	if err := a.WaitConnected(wctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // pings answered: still connected
	if !a.Connected() {
		t.Fatal("dropped while the connector answered")
	}
	fr.frozen.Store(true)
	for deadline := time.Now().Add(5 * time.Second); a.Connected(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the adapter did not notice a connector that stopped answering")
		}
	}
	fr.frozen.Store(false)
	if err := a.WaitConnected(wctx); err != nil {
		t.Fatalf("no reconnect: %v", err)
	}
	_ = a.Close()
}
