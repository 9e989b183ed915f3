package connector

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
)

// NATSRouter is the Router for several connector processes behind one load
// balancer: each process announces on NATS which of its connections owns a
// session, keeps what the others announce, and forwards frames for a
// connection of another process to that process, which delivers them. The
// last claim wins; a process that disappears without saying so leaves its
// claims until a newer one replaces them, and deliveries to it fail (the
// event is then buffered in the shared store).
type NATSRouter struct {
	nc      *nats.Conn
	process string
	prefix  string
	timeout time.Duration

	local *LocalRouter
	mu    sync.RWMutex
	// remote holds the sessions owned in other processes.
	remote map[routeKey]*remoteOwner
	// conns holds this process's owners by id, for forwarded frames.
	conns map[string]Owner
	subs  []*nats.Subscription
	// onBuffered runs for another process's buffered signal.
	onBuffered atomic.Pointer[func(contract.TenantSlot, string, string)]
	closed     atomic.Bool
}

// NATSOptions configure a NATSRouter.
type NATSOptions struct {
	// Subject prefix (default "caduceus.relay"); processes sharing sessions
	// use the same one.
	Prefix string
	// Timeout of a forwarded delivery (default 2 s).
	Timeout time.Duration
}

type claimMsg struct {
	Process string              `json:"p"`
	Conn    string              `json:"c"`
	Tenant  contract.TenantSlot `json:"t,omitempty"`
	Key     string              `json:"k,omitempty"`
	ChatID  string              `json:"chat,omitempty"`
	Serves  [][2]string         `json:"s,omitempty"`
}

type bufferedMsg struct {
	Process  string              `json:"p"`
	Tenant   contract.TenantSlot `json:"t"`
	Platform string              `json:"pl"`
	Bot      string              `json:"b"`
}

type forwardMsg struct {
	Conn  string          `json:"c"`
	Frame json.RawMessage `json:"f"`
}

// NewNATSRouter subscribes on nc and returns the router. Close it before
// closing nc.
func NewNATSRouter(nc *nats.Conn, o NATSOptions) (*NATSRouter, error) {
	if o.Prefix == "" {
		o.Prefix = "caduceus.relay"
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	r := &NATSRouter{nc: nc, process: contract.NewID("rproc"), prefix: o.Prefix, timeout: o.Timeout,
		local: NewLocalRouter(), remote: map[routeKey]*remoteOwner{}, conns: map[string]Owner{}}
	sub := func(subject string, fn nats.MsgHandler) error {
		s, err := nc.Subscribe(subject, fn)
		if err != nil {
			r.Close()
			return fmt.Errorf("connector: nats: subscribe %s: %w", subject, err)
		}
		r.subs = append(r.subs, s)
		return nil
	}
	// Claims and drops share one subject so they are handled in the order
	// each process sent them.
	if err := sub(r.prefix+".own", r.onOwn); err != nil {
		return nil, err
	}
	if err := sub(r.prefix+".proc."+r.process, r.onForward); err != nil {
		return nil, err
	}
	if err := sub(r.prefix+".buffered", r.onBufferedMsg); err != nil {
		return nil, err
	}
	if err := nc.Flush(); err != nil {
		r.Close()
		return nil, fmt.Errorf("connector: nats: %w", err)
	}
	// What was said while the connection was down is lost (claims, buffered
	// signals): on reconnecting, claim this process's sessions again, drain
	// what the shared buffer holds for this process's connections, and tell
	// the others to drain theirs.
	prev := nc.Opts.ReconnectedCB
	nc.SetReconnectHandler(func(c *nats.Conn) {
		if prev != nil {
			prev(c)
		}
		r.reconnected()
	})
	return r, nil
}

// reconnected runs when the NATS connection is back after an outage.
func (r *NATSRouter) reconnected() {
	if r.closed.Load() {
		return
	}
	r.local.mu.RLock()
	claims := make([]claimMsg, 0, len(r.local.owners))
	for k, rt := range r.local.owners {
		m := claimMsg{Process: r.process, Conn: rt.owner.ID(), Tenant: k.tenant, Key: k.key, ChatID: rt.chatID}
		if c, ok := rt.owner.(*conn); ok {
			for _, id := range c.identities() {
				m.Serves = append(m.Serves, [2]string{id.platform, id.bot})
			}
		}
		claims = append(claims, m)
	}
	r.local.mu.RUnlock()
	for _, m := range claims {
		b, _ := json.Marshal(m)
		_ = r.nc.Publish(r.prefix+".own", b)
	}
	b, _ := json.Marshal(bufferedMsg{Process: r.process}) // no tenant: every buffer
	_ = r.nc.Publish(r.prefix+".buffered", b)
	if fn := r.onBuffered.Load(); fn != nil {
		(*fn)("", "", "")
	}
}

// Close unsubscribes.
func (r *NATSRouter) Close() {
	r.closed.Store(true)
	for _, s := range r.subs {
		_ = s.Unsubscribe()
	}
	r.subs = nil
}

// Owner implements Router: this process's owner, else another process's.
func (r *NATSRouter) Owner(tenant contract.TenantSlot, key string) (Owner, string, bool) {
	if o, chat, ok := r.local.Owner(tenant, key); ok {
		return o, chat, true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	ro, ok := r.remote[routeKey{tenant, key}]
	if !ok {
		return nil, "", false
	}
	return ro, ro.chatID, true
}

// SetOwner implements Router. Making a connection of this process the owner
// is announced to the others.
func (r *NATSRouter) SetOwner(tenant contract.TenantSlot, key, chatID string, o Owner) {
	k := routeKey{tenant, key}
	if ro, ok := o.(*remoteOwner); ok {
		r.mu.Lock()
		if cur := r.remote[k]; cur == ro {
			cp := *ro
			cp.chatID = chatID
			r.remote[k] = &cp
		}
		r.mu.Unlock()
		return
	}
	prev, prevChat, had := r.local.Owner(tenant, key)
	r.local.SetOwner(tenant, key, chatID, o)
	r.mu.Lock()
	delete(r.remote, k)
	r.conns[o.ID()] = o
	r.mu.Unlock()
	if had && prev == o && prevChat == chatID {
		return
	}
	m := claimMsg{Process: r.process, Conn: o.ID(), Tenant: tenant, Key: key, ChatID: chatID}
	if c, ok := o.(*conn); ok {
		for _, id := range c.identities() {
			m.Serves = append(m.Serves, [2]string{id.platform, id.bot})
		}
	}
	b, _ := json.Marshal(m)
	_ = r.nc.Publish(r.prefix+".own", b)
}

// Forget implements Router and announces that o is gone.
func (r *NATSRouter) Forget(o Owner) {
	r.local.Forget(o)
	r.mu.Lock()
	delete(r.conns, o.ID())
	r.mu.Unlock()
	b, _ := json.Marshal(claimMsg{Process: r.process, Conn: o.ID()})
	_ = r.nc.Publish(r.prefix+".own", b) // a claim without a key is a drop
}

func (r *NATSRouter) onOwn(msg *nats.Msg) {
	var m claimMsg
	if json.Unmarshal(msg.Data, &m) != nil || m.Process == r.process {
		return
	}
	if m.Key == "" {
		r.drop(m)
		return
	}
	k := routeKey{m.Tenant, m.Key}
	// The newer claim wins: this process's connection no longer owns it.
	if o, _, ok := r.local.Owner(m.Tenant, m.Key); ok {
		r.local.mu.Lock()
		if r.local.owners[k].owner == o {
			delete(r.local.owners, k)
			delete(r.local.byConn[o], k)
		}
		r.local.mu.Unlock()
	}
	r.mu.Lock()
	r.remote[k] = &remoteOwner{r: r, process: m.Process, conn: m.Conn, chatID: m.ChatID, serves: m.Serves}
	r.mu.Unlock()
}

// Buffered implements BufferSignal: published on <prefix>.buffered.
func (r *NATSRouter) Buffered(tenant contract.TenantSlot, platform, bot string) {
	b, _ := json.Marshal(bufferedMsg{Process: r.process, Tenant: tenant, Platform: platform, Bot: bot})
	_ = r.nc.Publish(r.prefix+".buffered", b)
}

// OnBuffered implements BufferSignal.
func (r *NATSRouter) OnBuffered(fn func(tenant contract.TenantSlot, platform, bot string)) {
	r.onBuffered.Store(&fn)
}

func (r *NATSRouter) onBufferedMsg(msg *nats.Msg) {
	var m bufferedMsg
	if json.Unmarshal(msg.Data, &m) != nil || m.Process == r.process {
		return
	}
	if fn := r.onBuffered.Load(); fn != nil {
		(*fn)(m.Tenant, m.Platform, m.Bot)
	}
}

func (r *NATSRouter) drop(m claimMsg) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k, ro := range r.remote {
		if ro.process == m.Process && ro.conn == m.Conn {
			delete(r.remote, k)
		}
	}
}

func (r *NATSRouter) onForward(msg *nats.Msg) {
	var m forwardMsg
	ok := false
	if json.Unmarshal(msg.Data, &m) == nil {
		r.mu.RLock()
		o := r.conns[m.Conn]
		r.mu.RUnlock()
		if f, err := relay.ParseFrame(m.Frame); o != nil && err == nil {
			ok = o.Deliver(f)
		}
	}
	reply := []byte("0")
	if ok {
		reply = []byte("1")
	}
	_ = msg.Respond(reply)
}

// remoteOwner is a connection of another process.
type remoteOwner struct {
	r       *NATSRouter
	process string
	conn    string
	chatID  string
	serves  [][2]string
}

func (o *remoteOwner) ID() string { return o.conn }

func (o *remoteOwner) Serves(platform, bot string) bool {
	for _, s := range o.serves {
		if s[0] == platform && s[1] == bot {
			return true
		}
	}
	return false
}

// Deliver forwards f to the owning process and waits for its answer. It
// fails at once while the NATS connection is down: the caller buffers the
// event in the shared store, and the owning process drains it when it
// hears of it (at the latest on the reconnection, or its maintenance tick).
func (o *remoteOwner) Deliver(f relay.Frame) bool {
	if o.r.nc.Status() != nats.CONNECTED {
		return false
	}
	fb, err := f.MarshalJSON()
	if err != nil {
		return false
	}
	b, _ := json.Marshal(forwardMsg{Conn: o.conn, Frame: fb})
	reply, err := o.r.nc.Request(o.r.prefix+".proc."+o.process, b, o.r.timeout)
	return err == nil && string(reply.Data) == "1"
}
