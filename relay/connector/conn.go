package connector

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
)

// maxQueueBytes bounds what a connection may have queued and unwritten; a
// delivery beyond it fails and the event is buffered in the store instead.
const maxQueueBytes = 8 << 20

// maxOutboundInFlight bounds the outbound actions one connection may have
// running at once; the reader waits for a slot (backpressure).
const maxOutboundInFlight = 32

// conn is one gateway connection.
type conn struct {
	c         *Connector
	id        string
	gatewayID string
	tenant    contract.TenantSlot
	since     time.Time
	ws        *websocket.Conn
	ctx       context.Context
	cancel    context.CancelFunc
	sem       chan struct{}

	mu     sync.Mutex
	idents []ident
	idle   bool // after going_idle: nothing is delivered live
	drafts map[draftKey]*draftState
	ping   *time.Timer

	drainMu sync.Mutex // one drain at a time, so a connection never leases an event twice

	qmu     sync.Mutex
	queue   []byte
	spare   []byte
	writing bool
	dead    bool
}

type ident struct{ platform, bot string }

// ID implements Owner.
func (k *conn) ID() string { return k.id }

// Serves implements Owner. An idle connection serves nothing.
func (k *conn) Serves(platform, bot string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.idle {
		return false
	}
	for _, id := range k.idents {
		if id.platform == platform && id.bot == bot {
			return true
		}
	}
	return false
}

// said reports whether the connection said hello for (platform, bot),
// idle or not: an idle connection still performs outbound actions.
func (k *conn) said(platform, bot string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, id := range k.idents {
		if id.platform == platform && id.bot == bot {
			return true
		}
	}
	return false
}

func (k *conn) identities() []ident {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]ident(nil), k.idents...)
}

// Deliver implements Owner: it queues f; a writer goroutine, started only
// while there is something to write, sends everything queued as one
// newline-delimited WebSocket message.
func (k *conn) Deliver(f relay.Frame) bool {
	k.qmu.Lock()
	if k.dead || len(k.queue) > maxQueueBytes {
		k.qmu.Unlock()
		return false
	}
	q, err := relay.AppendFrame(k.queue, f)
	if err != nil {
		k.qmu.Unlock()
		k.c.log.Error("relay: encode frame", "type", f.Type, "err", err)
		return false
	}
	k.queue = q
	start := !k.writing
	k.writing = true
	k.qmu.Unlock()
	if start {
		go k.flush()
	}
	return true
}

func (k *conn) flush() {
	for {
		k.qmu.Lock()
		if len(k.queue) == 0 || k.dead {
			k.writing = false
			k.qmu.Unlock()
			return
		}
		buf := k.queue
		k.queue, k.spare = k.spare[:0], nil
		k.qmu.Unlock()
		ctx, cancel := context.WithTimeout(k.ctx, 30*time.Second)
		err := k.ws.Write(ctx, websocket.MessageText, buf)
		cancel()
		if err != nil {
			k.qmu.Lock()
			k.dead, k.writing = true, false
			k.qmu.Unlock()
			k.c.log.Info("relay: write failed; closing", "conn", k.id, "err", err)
			k.cancel()
			return
		}
		k.qmu.Lock()
		if k.spare == nil && cap(buf) <= 64<<10 {
			k.spare = buf[:0]
		}
		k.qmu.Unlock()
	}
}

func (k *conn) close(code websocket.StatusCode, reason string) {
	k.qmu.Lock()
	k.dead = true
	k.qmu.Unlock()
	_ = k.ws.Close(code, reason)
	k.cancel()
}

func (k *conn) schedulePing() {
	every := k.c.cfg.PingInterval
	if every <= 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.ping = time.AfterFunc(every, func() {
		ctx, cancel := context.WithTimeout(k.ctx, every)
		err := k.ws.Ping(ctx)
		cancel()
		if err != nil {
			if k.ctx.Err() == nil {
				// An unresponsive peer would not answer a close handshake either.
				k.c.log.Info("relay: keepalive failed; closing", "conn", k.id, "gateway", k.gatewayID)
				_ = k.ws.CloseNow()
				k.cancel()
			}
			return
		}
		k.schedulePing()
	})
}

// serveRelay is GET /relay: authenticate, upgrade, and read frames until the
// connection ends.
func (c *Connector) serveRelay(w http.ResponseWriter, r *http.Request) {
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	gatewayID, authErr := relay.VerifyToken(token, func(id string) [][]byte {
		return c.cfg.Gateways[id].Secrets
	}, c.now())
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return // Accept has answered the request
	}
	if authErr != nil {
		reason := relay.CloseReasonUnauthorized
		if errors.Is(authErr, relay.ErrTokenExpired) {
			reason = relay.CloseReasonExpired
		}
		claimed, _ := relay.TokenGateway(token)
		c.log.Warn("relay: upgrade refused", "reason", reason, "err", authErr, "remote", r.RemoteAddr)
		if g, ok := c.cfg.Gateways[claimed]; ok {
			c.record(r.Context(), entry{tenant: g.Tenant, action: "relay.connect", resource: "gateway:" + claimed,
				outcome: contract.OutcomeDeny, reason: reason, subjectOf: "gateway:" + claimed, gateway: claimed})
		}
		_ = ws.Close(relay.CloseUnauthorized, reason)
		return
	}
	g := c.cfg.Gateways[gatewayID]
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	k := &conn{c: c, id: contract.NewID("rconn"), gatewayID: gatewayID, tenant: g.Tenant, since: c.now(), ws: ws,
		ctx: ctx, cancel: cancel, sem: make(chan struct{}, maxOutboundInFlight)}
	if !c.register(k) {
		cancel()
		_ = ws.Close(websocket.StatusGoingAway, "connector shutting down")
		return
	}
	ws.SetReadLimit(relay.MaxFrameBytes + 1024)
	c.log.Info("relay: gateway connected", "conn", k.id, "gateway", gatewayID, "tenant", g.Tenant)
	c.record(ctx, entry{tenant: g.Tenant, action: "relay.connect", resource: "gateway:" + gatewayID,
		outcome: contract.OutcomeAllow, subjectOf: "gateway:" + gatewayID, gateway: gatewayID, conn: k.id})
	k.schedulePing()
	defer c.disconnected(k)
	split := relay.Splitter{OnMalformed: func(line []byte, err error) {
		c.log.Warn("relay: malformed frame skipped", "conn", k.id, "err", err, "bytes", len(line))
	}}
	for {
		_, msg, err := ws.Read(ctx)
		if err != nil {
			k.cancel()
			_ = ws.CloseNow()
			return
		}
		split.Feed(msg, func(f relay.Frame) { c.handleFrame(k, f) })
	}
}

// disconnected tears k down: no more pings or deliveries, its sessions lose
// their owner, its leased buffered events are released and offered to the
// tenant's other connections.
func (c *Connector) disconnected(k *conn) {
	k.mu.Lock()
	if k.ping != nil {
		k.ping.Stop()
	}
	k.mu.Unlock()
	k.qmu.Lock()
	k.dead = true
	k.qmu.Unlock()
	k.cancel()
	c.unregister(k)
	defer c.wg.Done()
	ctx := context.WithoutCancel(k.ctx)
	if err := c.cfg.Store.ReleaseLeases(ctx, k.tenant, k.id); err != nil {
		c.log.Error("relay: release leases", "conn", k.id, "err", err)
	}
	c.redrain(k.tenant)
	c.log.Info("relay: gateway disconnected", "conn", k.id, "gateway", k.gatewayID)
}

// handleFrame acts on one frame from a gateway.
func (c *Connector) handleFrame(k *conn, f relay.Frame) {
	switch f.Type {
	case relay.FrameHello:
		c.hello(k, f)
	case relay.FrameOutbound:
		if f.RequestID == "" {
			c.log.Warn("relay: outbound frame without requestId ignored", "conn", k.id)
			return
		}
		select {
		case k.sem <- struct{}{}:
		case <-k.ctx.Done():
			return
		}
		go func() {
			defer func() { <-k.sem }()
			res := c.outbound(k.ctx, k, f)
			k.Deliver(relay.Frame{Type: relay.FrameOutboundResult, RequestID: f.RequestID, Result: &res})
		}()
	case relay.FrameInterrupt:
		c.interruptFromGateway(k.ctx, k, f)
	case relay.FrameGoingIdle:
		c.goingIdle(k)
	case relay.FrameInboundAck:
		if f.BufferID == "" || isGatewayLeaseID(f.BufferID) {
			return // a gateway never acknowledges a Discord Gateway lease away
		}
		ok, err := c.cfg.Store.Ack(k.ctx, k.tenant, f.BufferID)
		if err != nil {
			c.log.Error("relay: ack", "conn", k.id, "err", err)
		} else if !ok {
			c.log.Debug("relay: ack for unknown buffer id", "conn", k.id, "buffer", f.BufferID)
		}
	default:
		c.log.Debug("relay: frame type ignored", "conn", k.id, "type", f.Type)
	}
}

// hello registers the identities a hello names on the connection, answers
// with one descriptor, and delivers what the tenant's buffer holds for
// them. platform "relay" (the gateway's default identity, botId "") names
// every configured edge: the descriptor is the edge's own when there is one,
// else a "relay" descriptor every edge can honour. A hello for a platform
// or bot not configured here is logged and answered with nothing, leaving
// the connection's other identities alone. A Discord hello's
// command_manifest is reconciled with the application's global commands in
// the background.
func (c *Connector) hello(k *conn, f relay.Frame) {
	platform := strings.ToLower(strings.TrimSpace(f.Platform))
	var edges []*edge
	if platform == relay.PlatformRelay && f.BotID == "" {
		edges = c.allEdges()
	} else {
		bot := f.BotID
		if bot == "" {
			bot, _ = c.defaultBot(platform)
		}
		if e := c.edge(platform, bot); e != nil {
			edges = []*edge{e}
		}
	}
	if len(edges) == 0 {
		c.log.Warn("relay: hello for a platform or bot not configured here; ignored", "conn", k.id, "platform", platform, "bot", f.BotID)
		return
	}
	k.mu.Lock()
	k.idle = false
	for _, e := range edges {
		known := false
		for _, id := range k.idents {
			known = known || id == ident{e.platform, e.bot}
		}
		if !known {
			k.idents = append(k.idents, ident{e.platform, e.bot})
		}
	}
	k.mu.Unlock()
	for _, e := range edges {
		c.serve(k, e.platform, e.bot)
	}
	d := edges[0].desc
	if len(edges) > 1 {
		d = relayDescriptor(edges)
	}
	k.Deliver(relay.Frame{Type: relay.FrameDescriptor, Descriptor: &d})
	if len(f.CommandManifest) > 0 && platform == "discord" {
		go c.reconcileCommands(k.ctx, edges[0], f.CommandManifest)
	}
	for _, e := range edges {
		go c.drain(k, e.platform, e.bot)
	}
}

// goingIdle answers going_idle: from now on nothing is delivered live on k
// (events of its tenant are buffered durably until a gateway says hello
// again, on a new dial), then going_idle_ack. Calls still running finish.
func (c *Connector) goingIdle(k *conn) {
	k.mu.Lock()
	k.idle = true
	k.mu.Unlock()
	c.unserve(k)
	c.router.Forget(k)
	k.Deliver(relay.Frame{Type: relay.FrameGoingIdleAck})
	c.log.Info("relay: gateway going idle; buffering", "conn", k.id, "gateway", k.gatewayID)
}
