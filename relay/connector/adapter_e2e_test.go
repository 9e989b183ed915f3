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
	"sync"
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
	if err := a.WaitDisconnected(t.Context()); err != nil {
		t.Errorf("WaitDisconnected without a connection = %v", err)
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
	// The chat is bound once the event is delivered (to either adapter).
	e.await(t, "the interaction's delivery", func() bool { return e.auditActions(slot1)["relay.deliver/allow"] == 1 })
	// The test's context never ends, so a timeout result can only be the
	// adapter's outbound timer: the platform never answers.
	r := a.Typing(t.Context(), "333", nil)
	if r != (relay.Result{Success: false, Error: "relay outbound timed out"}) {
		t.Fatalf("Typing against a stalled platform = %+v", r)
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
	if err := a.WaitDisconnected(ctx); err != nil {
		t.Fatalf("adapter did not notice the connector going away: %v", err)
	}
	c2, err := connector.New(connector.Config{
		Gateways: map[string]connector.Gateway{"gw-a": {Tenant: slot1, Secrets: [][]byte{secretA}}},
		Telegram: map[string]connector.TelegramBot{telegramBot: {Token: "123:TGTOKEN", SecretToken: tgSecret, Tenant: slot1}},
		Store:    e.config.Store, Audit: e.config.Audit, Now: e.clock.Now, TelegramBaseURL: e.telegram.srv.URL,
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
	// The adapter keeps dialling: wait for two refusals as expired (each
	// recorded by the second connector), then it must not be connected.
	expired := func() int {
		n := 0
		for _, r := range e.audit.Records(slot1) {
			if r.Outcome.Action == "relay.connect" && r.Outcome.Reason == relay.CloseReasonExpired {
				n++
			}
		}
		return n
	}
	e.await(t, "two upgrades refused as expired", func() bool { return expired() >= 2 })
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
// connection silently stop (a half-open network) without closing it. It
// counts the connections it accepts and the chunks it passes on each way,
// and signals changed after each.
type freezer struct {
	ln      net.Listener
	mu      sync.Mutex
	open    chan struct{} // closed while traffic flows
	accepts atomic.Int32
	up      atomic.Int32 // chunks from the client to the target
	down    atomic.Int32 // chunks from the target to the client
	changed chan struct{}
}

func newFreezer(t *testing.T, target string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, open: make(chan struct{}), changed: make(chan struct{}, 1)}
	close(f.open)
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
			f.count(&f.accepts)
			go f.pump(out, in, &f.up)
			go f.pump(in, out, &f.down)
		}
	}()
	return f
}

// pump copies src to dst, counting each chunk in chunks.
func (f *freezer) pump(dst, src net.Conn, chunks *atomic.Int32) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			dst.Close()
			return
		}
		f.mu.Lock()
		open := f.open
		f.mu.Unlock()
		<-open // frozen: hold the bytes until thawed
		if _, err := dst.Write(buf[:n]); err != nil {
			src.Close()
			return
		}
		f.count(chunks)
	}
}

func (f *freezer) count(n *atomic.Int32) {
	n.Add(1)
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.open = make(chan struct{})
	f.mu.Unlock()
}

func (f *freezer) thaw() {
	f.mu.Lock()
	close(f.open)
	f.mu.Unlock()
}

// await blocks until cond holds, reading it again after each chunk or
// connection the freezer passes on.
func (f *freezer) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-f.changed:
		case <-timeout:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
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
	// After the handshake every chunk up is a ping (the connector does not
	// ping: PingInterval -1), and the adapter sends its next ping only
	// once the last one was answered: four pings sent on the one
	// connection are three answered.
	up := fr.up.Load()
	fr.await(t, "three pings answered", func() bool { return fr.up.Load() >= up+4 })
	if !a.Connected() || fr.accepts.Load() != 1 {
		t.Fatalf("dropped while the connector answered (connected %v, %d dials)", a.Connected(), fr.accepts.Load())
	}
	fr.freeze()
	if err := a.WaitDisconnected(wctx); err != nil {
		t.Fatalf("the adapter did not notice a connector that stopped answering: %v", err)
	}
	fr.thaw()
	if err := a.WaitConnected(wctx); err != nil {
		t.Fatalf("no reconnect: %v", err)
	}
	_ = a.Close()
}
