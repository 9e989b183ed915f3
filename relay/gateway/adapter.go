// Package gateway is the gateway side of the relay: the Go client a gateway
// (an agent) embeds to dial a connector, handshake, receive MessageEvents
// and interrupts, and send outbound actions. It holds no platform crypto:
// the connector verified everything at the edge, and this side re-validates
// nothing (a test enforces that no platform package or crypto/ed25519 user
// is among its dependencies, beyond the standard library's TLS).
package gateway

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/caduceus-dev/caduceus/relay"
)

// Config configures an Adapter.
type Config struct {
	// URL is the connector's base URL (http, https, ws or wss); "/relay"
	// is appended when missing.
	URL       string
	GatewayID string
	Secret    []byte
	TokenTTL  time.Duration // lifetime of each upgrade token (default 5 min)

	Platform string // the platform to hello ("discord", "telegram")
	BotID    string // the application or bot the connector knows
	// Identities, when set, are the identities to hello, in order (one
	// hello each on every dial, as the current gateway does); Platform and
	// BotID are then ignored. With neither, the adapter says hello as the
	// gateway's default identity, platform "relay" with botId "".
	Identities []Identity

	// OnEvent handles an inbound event. Events of one session are handled
	// in order, sessions concurrently. A buffered event is acknowledged
	// (and so released by the connector) only when OnEvent returns nil.
	OnEvent func(ctx context.Context, in Inbound) error
	// OnInterrupt is called for each interrupt_inbound: cancel the turn of
	// that session.
	OnInterrupt func(sessionKey, chatID string)

	// SessionKeys are the switches used to compute Inbound.SessionKey
	// (the gateway defaults when nil).
	SessionKeys *relay.SessionKeyOptions

	OutboundTimeout  time.Duration // default 30 s
	HandshakeTimeout time.Duration // default 30 s
	// PingInterval is how often the adapter pings the connector; a ping
	// unanswered within the interval ends the connection (and Run dials
	// again). Default 30 s; negative: no pings.
	PingInterval time.Duration
	MinBackoff   time.Duration // default 1 s
	MaxBackoff   time.Duration // default 30 s
	HTTPClient   *http.Client
	Logger       *slog.Logger
}

// Identity is one fronted platform identity of a hello.
type Identity struct {
	Platform string
	BotID    string
	// CommandManifest is sent with a Discord hello (the slash commands the
	// connector reconciles with the application's global commands).
	CommandManifest json.RawMessage
}

// Inbound is one event as the gateway receives it.
type Inbound struct {
	Event      relay.MessageEvent
	SessionKey string
	BufferID   string // set when the connector held the event while no gateway was connected
	// Platform and BotID are the identity that received the event (the
	// hello it answers to), distinct from the tenant (seed 004, Appendix A).
	Platform string
	BotID    string
}

// ErrUnauthorized is returned by Connect and Run when the connector refuses
// the token for good (close code 4401 with a reason other than "expired").
var ErrUnauthorized = errors.New("gateway: connector refused the token")

// ErrNotConnected is returned by Interrupt without a connection.
var ErrNotConnected = errors.New("gateway: " + relay.ErrTextNotConnected)

// Adapter is one gateway's link to a connector. Its methods are safe for
// concurrent use.
type Adapter struct {
	cfg  Config
	log  *slog.Logger
	keys relay.SessionKeyOptions

	mu        sync.Mutex
	cur       *link
	connected chan struct{} // closed while connected
	pending   map[string]chan relay.Result
	desc      relay.CapabilityDescriptor
	hasDesc   bool
	descs     map[string]relay.CapabilityDescriptor // by platform, this dial's
	idleAck   chan struct{}                         // closed by going_idle_ack
	closed    bool

	smu      sync.Mutex
	sessions map[string][]Inbound // per-session queues being dispatched
}

// link is one live WebSocket connection.
type link struct {
	ws     *websocket.Conn
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	ended  chan struct{} // closed once the adapter has let go of the link
	status websocket.StatusCode
	reason string
}

// New returns an Adapter; nothing is dialled until Connect or Run.
func New(cfg Config) (*Adapter, error) {
	if cfg.URL == "" || cfg.GatewayID == "" || len(cfg.Secret) == 0 {
		return nil, fmt.Errorf("gateway: URL, GatewayID and Secret are required")
	}
	if len(cfg.Identities) == 0 {
		p := cfg.Platform
		if p == "" {
			p = relay.PlatformRelay
		}
		cfg.Identities = []Identity{{Platform: p, BotID: cfg.BotID}}
	}
	if cfg.TokenTTL <= 0 {
		cfg.TokenTTL = 5 * time.Minute
	}
	if cfg.OutboundTimeout <= 0 {
		cfg.OutboundTimeout = 30 * time.Second
	}
	if cfg.PingInterval == 0 {
		cfg.PingInterval = 30 * time.Second
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = time.Second
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.MinBackoff)
	}
	a := &Adapter{cfg: cfg, log: cfg.Logger, keys: relay.DefaultSessionKeyOptions(),
		connected: make(chan struct{}), pending: map[string]chan relay.Result{}, sessions: map[string][]Inbound{}}
	if a.log == nil {
		a.log = slog.Default()
	}
	a.log = a.log.With("component", "relay-gateway", "gateway", cfg.GatewayID)
	if cfg.SessionKeys != nil {
		a.keys = *cfg.SessionKeys
	}
	return a, nil
}

// DialURL normalizes a connector base URL to its ws(s)://…/relay endpoint.
func DialURL(u string) string {
	u = strings.TrimSpace(u)
	switch {
	case strings.HasPrefix(u, "https://"):
		u = "wss://" + u[len("https://"):]
	case strings.HasPrefix(u, "http://"):
		u = "ws://" + u[len("http://"):]
	}
	u = strings.TrimRight(u, "/")
	if !strings.HasSuffix(u, "/relay") {
		u += "/relay"
	}
	return u
}

// Connect dials the connector once, says hello and waits for the
// descriptor. The connection then runs in the background until it fails or
// Close is called; Run reconnects, Connect does not.
func (a *Adapter) Connect(ctx context.Context) error {
	l, err := a.dial(ctx)
	if err != nil {
		return err
	}
	go a.wait(l)
	return nil
}

// Run keeps the adapter connected until ctx ends or the connector refuses
// its token for good (ErrUnauthorized), reconnecting with exponential
// backoff and jitter after each failure.
func (a *Adapter) Run(ctx context.Context) error {
	backoff := a.cfg.MinBackoff
	for {
		l, err := a.dial(ctx)
		if err == nil {
			backoff = a.cfg.MinBackoff
			a.wait(l)
			if l.status == relay.CloseUnauthorized && l.reason != relay.CloseReasonExpired {
				// Possibly revoked: one immediate re-dial with a fresh
				// token decides (HERMES-RELAY.md §1.3).
				a.log.Info("relay: connector closed 4401; re-dialling once with a fresh token", "reason", l.reason)
				continue
			}
		} else if errors.Is(err, ErrUnauthorized) {
			return err
		}
		if ctx.Err() != nil || a.isClosed() {
			return ctx.Err()
		}
		sleep := backoff/2 + rand.N(backoff/2+1)
		a.log.Info("relay: reconnecting", "in", sleep, "err", err)
		select {
		case <-time.After(sleep):
		case <-ctx.Done():
			return ctx.Err()
		}
		backoff = min(backoff*2, a.cfg.MaxBackoff)
	}
}

func (a *Adapter) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

func (a *Adapter) dial(ctx context.Context) (*link, error) {
	if a.isClosed() {
		return nil, fmt.Errorf("gateway: adapter closed")
	}
	token := relay.MintToken(a.cfg.Secret, a.cfg.GatewayID, a.cfg.TokenTTL)
	hctx, cancel := context.WithTimeout(ctx, a.cfg.HandshakeTimeout)
	defer cancel()
	ws, _, err := websocket.Dial(hctx, DialURL(a.cfg.URL), &websocket.DialOptions{
		HTTPClient:      a.cfg.HTTPClient,
		HTTPHeader:      http.Header{"Authorization": {"Bearer " + token}},
		CompressionMode: websocket.CompressionDisabled,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: dial: %w", err)
	}
	ws.SetReadLimit(relay.MaxFrameBytes + 1024)
	lctx, lcancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &link{ws: ws, ctx: lctx, cancel: lcancel, done: make(chan struct{}), ended: make(chan struct{})}
	var hello []byte
	for _, id := range a.cfg.Identities {
		f := relay.Frame{Type: relay.FrameHello, Platform: id.Platform, BotID: id.BotID}
		if id.Platform == "discord" {
			f.CommandManifest = id.CommandManifest
		}
		if hello, err = relay.AppendFrame(hello, f); err != nil {
			lcancel()
			_ = ws.CloseNow()
			return nil, fmt.Errorf("gateway: hello: %w", err)
		}
	}
	a.mu.Lock()
	a.descs = map[string]relay.CapabilityDescriptor{}
	a.mu.Unlock()
	if err := ws.Write(hctx, websocket.MessageText, hello); err != nil {
		lcancel()
		_ = ws.CloseNow()
		return nil, fmt.Errorf("gateway: hello: %w", err)
	}
	got := make(chan error, 1)
	go a.read(l, got)
	select {
	case err := <-got:
		if err != nil {
			lcancel()
			<-l.done
			return nil, err
		}
	case <-hctx.Done():
		lcancel()
		_ = ws.CloseNow()
		<-l.done
		return nil, fmt.Errorf("gateway: no descriptor: %w", hctx.Err())
	}
	a.keepalive(l)
	return l, nil
}

// keepalive pings the connector every PingInterval while l lives; an
// unanswered ping closes l. No goroutine waits between pings.
func (a *Adapter) keepalive(l *link) {
	every := a.cfg.PingInterval
	if every <= 0 {
		return
	}
	time.AfterFunc(every, func() {
		if l.ctx.Err() != nil {
			return
		}
		ctx, cancel := context.WithTimeout(l.ctx, every)
		err := l.ws.Ping(ctx)
		cancel()
		if err != nil {
			if l.ctx.Err() == nil {
				a.log.Info("relay: connector did not answer a ping; closing")
				_ = l.ws.CloseNow()
				l.cancel()
			}
			return
		}
		a.keepalive(l)
	})
}

// wait blocks until l ends, then fails the requests still waiting on it.
func (a *Adapter) wait(l *link) {
	<-l.done
	a.mu.Lock()
	if a.cur == l {
		a.cur = nil
		a.connected = make(chan struct{})
	}
	waiting := a.pending
	a.pending = map[string]chan relay.Result{}
	a.mu.Unlock()
	close(l.ended)
	for _, ch := range waiting {
		ch <- relay.Failure(relay.ErrTextNotConnected)
	}
}

// read pumps frames from l. The first descriptor completes the handshake
// (reported on got); read ends when the connection does.
func (a *Adapter) read(l *link, got chan<- error) {
	defer close(l.done)
	defer l.cancel()
	handshook := false
	split := relay.Splitter{OnMalformed: func(line []byte, err error) {
		a.log.Warn("relay: malformed frame skipped", "err", err, "bytes", len(line))
	}}
	var buf bytes.Buffer // reused for every message: frames copy what they keep
	for {
		msg, err := readMessage(l, &buf)
		if err != nil {
			l.status = websocket.CloseStatus(err)
			var ce websocket.CloseError
			if errors.As(err, &ce) {
				l.reason = ce.Reason
			}
			if !handshook {
				if l.status == relay.CloseUnauthorized && l.reason != relay.CloseReasonExpired {
					got <- ErrUnauthorized
				} else {
					got <- fmt.Errorf("gateway: connection ended before the descriptor: %w", err)
				}
			}
			_ = l.ws.CloseNow()
			return
		}
		split.Feed(msg, func(f relay.Frame) {
			switch f.Type {
			case relay.FrameDescriptor:
				a.mu.Lock()
				if !handshook {
					// The first descriptor of a dial is the default.
					a.desc, a.hasDesc = *f.Descriptor, true
				}
				if a.descs != nil {
					a.descs[f.Descriptor.Platform] = *f.Descriptor
				}
				if !handshook {
					a.cur = l
					close(a.connected)
				}
				a.mu.Unlock()
				if !handshook {
					handshook = true
					got <- nil
				}
			case relay.FrameOutboundResult:
				a.mu.Lock()
				ch := a.pending[f.RequestID]
				delete(a.pending, f.RequestID)
				a.mu.Unlock()
				if ch != nil {
					ch <- *f.Result
				}
			case relay.FrameInbound:
				key, err := relay.EventSessionKey(*f.Event, a.keys)
				if err != nil {
					a.log.Warn("relay: inbound event cannot be keyed; skipped", "err", err)
					return
				}
				a.dispatch(l, Inbound{Event: *f.Event, SessionKey: key, BufferID: f.BufferID, Platform: f.Platform, BotID: f.BotID})
			case relay.FrameGoingIdleAck:
				a.mu.Lock()
				if a.idleAck != nil {
					close(a.idleAck)
					a.idleAck = nil
				}
				a.mu.Unlock()
			case relay.FrameInterruptInbound:
				if a.cfg.OnInterrupt != nil {
					go a.cfg.OnInterrupt(f.SessionKey, f.ChatID)
				}
			}
		})
	}
}

// readMessage reads the next message of l into buf (reset first) and
// returns its bytes, valid until the next call. The connection's read limit
// applies as it does to websocket.Conn.Read.
func readMessage(l *link, buf *bytes.Buffer) ([]byte, error) {
	if buf.Cap() > 256<<10 {
		*buf = bytes.Buffer{} // do not keep a rare large message's memory
	}
	buf.Reset()
	_, r, err := l.ws.Reader(l.ctx)
	if err != nil {
		return nil, err
	}
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// dispatch queues in behind its session's earlier events; one goroutine per
// busy session drains the queue, so idle sessions cost nothing.
func (a *Adapter) dispatch(l *link, in Inbound) {
	a.smu.Lock()
	q, busy := a.sessions[in.SessionKey]
	a.sessions[in.SessionKey] = append(q, in)
	a.smu.Unlock()
	if busy {
		return
	}
	go func() {
		for {
			a.smu.Lock()
			q := a.sessions[in.SessionKey]
			if len(q) == 0 {
				delete(a.sessions, in.SessionKey)
				a.smu.Unlock()
				return
			}
			next := q[0]
			a.sessions[in.SessionKey] = q[1:]
			a.smu.Unlock()
			a.handle(l, next)
		}
	}()
}

func (a *Adapter) handle(l *link, in Inbound) {
	var err error
	if a.cfg.OnEvent != nil {
		err = a.cfg.OnEvent(l.ctx, in)
	}
	if err != nil {
		a.log.Warn("relay: inbound handler failed; not acknowledged", "err", err, "buffer", in.BufferID)
		return
	}
	if in.BufferID != "" {
		ack, _ := relay.AppendFrame(nil, relay.Frame{Type: relay.FrameInboundAck, BufferID: in.BufferID})
		if err := l.ws.Write(l.ctx, websocket.MessageText, ack); err != nil {
			a.log.Info("relay: ack not sent; the connector will deliver again", "buffer", in.BufferID)
		}
	}
}

// Descriptor returns the descriptor of the current or last connection.
func (a *Adapter) Descriptor() (relay.CapabilityDescriptor, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.desc, a.hasDesc
}

// Connected reports whether the handshake is complete on a live connection.
func (a *Adapter) Connected() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cur != nil
}

// WaitConnected blocks until the adapter is connected or ctx ends.
func (a *Adapter) WaitConnected(ctx context.Context) error {
	a.mu.Lock()
	ch := a.connected
	a.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// WaitDisconnected blocks until the connection of the moment has ended
// (Connected reports false from then on, until a new dial completes), or
// ctx ends. Without a connection it returns at once.
func (a *Adapter) WaitDisconnected(ctx context.Context) error {
	a.mu.Lock()
	l := a.cur
	a.mu.Unlock()
	if l == nil {
		return nil
	}
	select {
	case <-l.ended:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Descriptors returns the descriptors of the current or last dial, by
// platform (one per hello the connector answered).
func (a *Adapter) Descriptors() map[string]relay.CapabilityDescriptor {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]relay.CapabilityDescriptor, len(a.descs))
	for k, v := range a.descs {
		out[k] = v
	}
	return out
}

// GoIdle sends going_idle and waits for going_idle_ack (or ctx): from the
// ack on, the connector buffers this gateway's events until it dials again.
func (a *Adapter) GoIdle(ctx context.Context) error {
	a.mu.Lock()
	l := a.cur
	if l == nil {
		a.mu.Unlock()
		return ErrNotConnected
	}
	ack := make(chan struct{})
	a.idleAck = ack
	a.mu.Unlock()
	b, _ := relay.AppendFrame(nil, relay.Frame{Type: relay.FrameGoingIdle})
	if err := l.ws.Write(ctx, websocket.MessageText, b); err != nil {
		return err
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close asks the connector to buffer (going_idle, up to 2 s for the ack, as
// the gateway does on shutdown), ends the connection and stops Run from
// reconnecting.
func (a *Adapter) Close() error {
	if a.Connected() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := a.GoIdle(ctx); err != nil {
			a.log.Info("relay: no going_idle_ack; closing anyway", "err", err)
		}
		cancel()
	}
	a.mu.Lock()
	a.closed = true
	l := a.cur
	a.mu.Unlock()
	if l != nil {
		_ = l.ws.Close(websocket.StatusNormalClosure, "gateway closing")
		l.cancel()
		<-l.done
	}
	return nil
}

// newRequestID is a hex UUID (v4).
func newRequestID() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// call sends an outbound action and waits for its result: at most the
// outbound timeout ({"success":false,"error":"relay outbound timed out"}),
// and {"success":false,"error":"relay transport not connected"} without a
// connection or when it ends first.
func (a *Adapter) call(ctx context.Context, action relay.Action) relay.Result {
	return a.CallAs(ctx, "", "", action)
}

// CallAs sends any outbound action for the identity (platform, botID) —
// both empty for the connection's first — and waits for its result, as
// call does.
func (a *Adapter) CallAs(ctx context.Context, platform, botID string, action relay.Action) relay.Result {
	id := newRequestID()
	ch := make(chan relay.Result, 1)
	a.mu.Lock()
	l := a.cur
	if l == nil {
		a.mu.Unlock()
		return relay.Failure(relay.ErrTextNotConnected)
	}
	a.pending[id] = ch
	a.mu.Unlock()
	forget := func() {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}
	frame, err := relay.AppendFrame(nil, relay.Frame{Type: relay.FrameOutbound, RequestID: id, Action: &action, Platform: platform, BotID: botID})
	if err != nil {
		forget()
		return relay.Failure("relay: " + err.Error())
	}
	timer := time.NewTimer(a.cfg.OutboundTimeout)
	defer timer.Stop()
	wctx, cancel := context.WithTimeout(ctx, a.cfg.OutboundTimeout)
	err = l.ws.Write(wctx, websocket.MessageText, frame)
	cancel()
	if err != nil {
		forget()
		if ctx.Err() != nil {
			return relay.Failure(relay.ErrTextTimeout)
		}
		return relay.Failure(relay.ErrTextNotConnected)
	}
	select {
	case r := <-ch:
		return r
	case <-timer.C:
		forget()
		return relay.Failure(relay.ErrTextTimeout)
	case <-ctx.Done():
		forget()
		return relay.Failure(relay.ErrTextTimeout)
	}
}

// Send posts content to chatID. The connector splits it to the platform's
// limit; MessageID is the last chunk's.
func (a *Adapter) Send(ctx context.Context, chatID, content, replyTo string, metadata map[string]any) relay.Result {
	return a.call(ctx, relay.Action{Op: relay.OpSend, ChatID: chatID, Content: content, ReplyTo: replyTo, Metadata: metadata})
}

// Edit replaces a message's content.
func (a *Adapter) Edit(ctx context.Context, chatID, messageID, content string, metadata map[string]any) relay.Result {
	return a.call(ctx, relay.Action{Op: relay.OpEdit, ChatID: chatID, MessageID: messageID, Content: content, Metadata: metadata})
}

// Typing shows the typing indicator in chatID.
func (a *Adapter) Typing(ctx context.Context, chatID string, metadata map[string]any) relay.Result {
	return a.call(ctx, relay.Action{Op: relay.OpTyping, ChatID: chatID, Metadata: metadata})
}

// FollowUp asks the connector to use the capability of kind it holds for
// sessionKey (the gateway never sees it).
func (a *Adapter) FollowUp(ctx context.Context, sessionKey, kind, content string, metadata map[string]any) relay.Result {
	return a.call(ctx, relay.Action{Op: relay.OpFollowUp, SessionKey: sessionKey, Kind: kind, Content: content, Metadata: metadata})
}

// GetChatInfo returns the chat's name and type in the result's Name and Type.
func (a *Adapter) GetChatInfo(ctx context.Context, chatID string) relay.Result {
	return a.call(ctx, relay.Action{Op: relay.OpGetChatInfo, ChatID: chatID})
}

// React adds (or removes) emoji on a message.
func (a *Adapter) React(ctx context.Context, chatID, messageID, emoji string, remove bool) relay.Result {
	return a.call(ctx, relay.Action{Op: relay.OpReact, ChatID: chatID, MessageID: messageID, Emoji: emoji, Remove: remove})
}

// Delete deletes a message.
func (a *Adapter) Delete(ctx context.Context, chatID, messageID string) relay.Result {
	return a.call(ctx, relay.Action{Op: relay.OpDelete, ChatID: chatID, MessageID: messageID})
}

// Draft streams draftID's content into one message; final seals it and the
// result's MessageID is the sealed message.
func (a *Adapter) Draft(ctx context.Context, chatID string, draftID int64, content string, final bool) relay.Result {
	return a.call(ctx, relay.Action{Op: relay.OpDraft, ChatID: chatID, DraftID: &draftID, Content: content, Final: final})
}

// Interrupt sends a fire-and-forget interrupt for sessionKey; the connector
// forwards it to the connection that owns the session. reason may be empty
// (sent as null).
func (a *Adapter) Interrupt(ctx context.Context, sessionKey, reason string) error {
	a.mu.Lock()
	l := a.cur
	a.mu.Unlock()
	if l == nil {
		return ErrNotConnected
	}
	f := relay.Frame{Type: relay.FrameInterrupt, SessionKey: sessionKey}
	if reason != "" {
		f.Reason = &reason
	}
	b, err := relay.AppendFrame(nil, f)
	if err != nil {
		return err
	}
	return l.ws.Write(ctx, websocket.MessageText, b)
}
