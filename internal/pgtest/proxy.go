package pgtest

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy between Postgres clients and a Postgres server for
// a test: it delays the bytes it carries each way, as a database at a
// distance would, and counts round trips.
//
// A round trip is what a client waits for: a burst of bytes from the
// client (one message or a pipelined batch of them, however many writes)
// and the server's reply to it. On each connection the first bytes the
// client sends while no reply is owed open a round trip; the first bytes
// of the server's delivered to the client close it and count it. Bytes
// the server sends unasked (a notification on a LISTEN connection) count
// nothing. So a client that pipelines ten statements and waits once costs
// one round trip; one that waits for each costs ten.
//
// Armed by CutAfterCommit, it cuts a connection the moment its server
// answers a COMMIT, so that the server has committed and the client never
// hears it.
//
// When tracing, each counted round trip is kept with what its burst asked
// for (Trips): the statements' texts, read from the protocol's Query,
// Parse and Bind messages.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string
	delay  atomic.Int64 // each way, in nanoseconds
	trips  atomic.Int64
	trace  atomic.Bool
	armed  atomic.Bool // CutAfterCommit's cut is to come

	mu     sync.Mutex
	cut    chan struct{} // closed once an armed cut is made
	conns  map[*proxyConn]struct{}
	nextID int
	log    []Trip
	closed bool
	wg     sync.WaitGroup
}

// Trip is one round trip: the proxied connection it was on (numbered from
// 1 in the order they were accepted, with the application_name it
// started with) and what its burst asked for, one
// entry per statement executed or prepared ("prepare: …"), in order.
type Trip struct {
	Conn       int
	App        string // the connection's application_name
	Statements []string
	// Took is the round trip as the client saw it, from the proxy's read
	// of the burst's first bytes to the delivery of the answer's first;
	// Server is the part of it the server took, from the burst's first
	// bytes written to it to its answer's first bytes read.
	Took, Server time.Duration
}

func (tr Trip) String() string {
	app := ""
	if tr.App != "" {
		app = " (" + tr.App + ")"
	}
	return fmt.Sprintf("conn %d%s: %s", tr.Conn, app, strings.Join(tr.Statements, " | "))
}

// NewProxy starts a proxy on a free port of 127.0.0.1 to the server dsn
// names (a postgres:// URL with one host), adding delay to each byte each
// way. It is closed, with every connection through it, when the test ends.
func NewProxy(t testing.TB, dsn string, delay time.Duration) *Proxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" || strings.Contains(u.Host, ",") {
		t.Fatalf("pgtest: proxy: want a postgres:// URL with one host, got %q (%v)", dsn, err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("pgtest: proxy: %v", err)
	}
	p := &Proxy{t: t, ln: ln, target: target, conns: map[*proxyConn]struct{}{}}
	p.delay.Store(int64(delay))
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

// DSN is dsn (a postgres:// URL) with its host and port the proxy's.
func (p *Proxy) DSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		p.t.Fatalf("pgtest: proxy: %v", err)
	}
	u.Host = p.ln.Addr().String()
	return u.String()
}

// SetDelay changes the delay each way, for bytes read from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

// RoundTrips is how many round trips every connection through the proxy
// has made so far.
func (p *Proxy) RoundTrips() int64 { return p.trips.Load() }

// Trace starts (or stops) keeping each round trip for Trips.
func (p *Proxy) Trace(on bool) { p.trace.Store(on) }

// Trips returns the round trips kept since the last call, and forgets
// them.
func (p *Proxy) Trips() []Trip {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.log
	p.log = nil
	return out
}

// CutAfterCommit arms a one-shot cut: the first connection that, from now
// on, has executed a COMMIT (a Query, or a Bind of a statement, whose text
// is COMMIT) is closed, both ways, when the server's answer holding that
// COMMIT's CommandComplete reaches the proxy, instead of being relayed.
// The server has committed; the client, waiting for the result, sees its
// connection drop. The channel returned is closed as the cut is made,
// before the connection closes.
func (p *Proxy) CutAfterCommit() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = make(chan struct{})
	p.armed.Store(true)
	return p.cut
}

// cutNow makes the armed cut on c, unless another connection made it
// first; it reports whether it did.
func (p *Proxy) cutNow(c *proxyConn) bool {
	if !p.armed.CompareAndSwap(true, false) {
		return false
	}
	p.mu.Lock()
	close(p.cut) // before the client can see the cut
	p.mu.Unlock()
	c.close()
	return true
}

// Close stops accepting, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	p.ln.Close()
	for c := range conns {
		c.close()
	}
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			client.Close()
			server.Close()
			return
		}
		p.nextID++
		c := &proxyConn{p: p, id: p.nextID, client: client, server: server, stmts: map[string]string{}, startup: true}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(4)
		toServer, toClient := make(chan chunk, 256), make(chan chunk, 256)
		go c.read(client, toServer, c.sent)
		go c.write(server, toServer, c.forwarded)
		go c.read(server, toClient, c.answered)
		go c.write(client, toClient, c.delivered)
	}
}

// chunk is bytes read from one side, due at the other at due.
type chunk struct {
	b   []byte
	due time.Time
}

// proxyConn is one client connection and its server connection.
type proxyConn struct {
	p              *Proxy
	id             int
	client, server net.Conn
	once           sync.Once

	mu       sync.Mutex
	awaiting bool // the client sent a burst the server has not answered
	// When the open round trip's burst was read, written to the server,
	// and its answer read (zero: not yet).
	opened, fwd, ans time.Time
	burst            []string // what that burst asked for (when tracing)
	// The client's protocol stream, for the statements' texts.
	pending []byte
	startup bool              // the next message is a startup-format one (no type byte)
	app     string            // the application_name the client started with
	stmts   map[string]string // prepared statement name -> its text
	// committing: the client executed a COMMIT whose answer has not been
	// seen; tail: the server stream's last bytes, for an answer split
	// across reads (both for CutAfterCommit).
	committing bool
	tail       []byte
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		c.client.Close()
		c.server.Close()
	})
}

// read copies what from sends into out, each chunk due after the delay,
// calling note on each first; a chunk note refuses ends the copy.
func (c *proxyConn) read(from net.Conn, out chan<- chunk, note func([]byte) bool) {
	defer c.p.wg.Done()
	defer close(out)
	buf := make([]byte, 64<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			b := append([]byte(nil), buf[:n]...)
			if note != nil && !note(b) {
				return
			}
			out <- chunk{b: b, due: time.Now().Add(time.Duration(c.p.delay.Load()))}
		}
		if err != nil {
			return
		}
	}
}

// write writes each chunk of in to to once it is due, calling note just
// before each; it closes both connections when in ends or a write fails.
func (c *proxyConn) write(to net.Conn, in <-chan chunk, note func()) {
	defer c.p.wg.Done()
	defer c.close()
	timer := time.NewTimer(0)
	<-timer.C
	for ch := range in {
		if wait := time.Until(ch.due); wait > 0 {
			timer.Reset(wait)
			<-timer.C
		}
		if note != nil {
			// Before the write: once the client has the bytes it may
			// send its next burst, which must open a round trip of its
			// own.
			note()
		}
		if _, err := to.Write(ch.b); err != nil {
			// Drain, so the reader is not left blocked on a full channel.
			c.close()
			for range in {
			}
			return
		}
	}
}

// sent notes bytes the client sent: a round trip opens when none is, and
// (when tracing) the statements they carry join its burst.
func (c *proxyConn) sent(b []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.awaiting {
		c.awaiting = true
		c.burst = nil
		c.opened, c.fwd, c.ans = time.Now(), time.Time{}, time.Time{}
	}
	c.pending = append(c.pending, b...)
	c.parse(c.p.trace.Load())
	return true
}

// commandCompleteCommit is the server's CommandComplete message for a
// COMMIT that committed: 'C', its length (4 + 7) and "COMMIT\0".
var commandCompleteCommit = []byte("C\x00\x00\x00\x0bCOMMIT\x00")

// answered notes bytes the server sent: with CutAfterCommit armed and a
// COMMIT executed on c, bytes that complete the COMMIT's CommandComplete
// cut c (and are not relayed).
func (c *proxyConn) answered(b []byte) bool {
	c.mu.Lock()
	if c.awaiting && c.ans.IsZero() {
		c.ans = time.Now()
	}
	c.mu.Unlock()
	if !c.p.armed.Load() {
		return true
	}
	c.mu.Lock()
	committing := c.committing
	seen := append(c.tail, b...)
	if k := len(commandCompleteCommit) - 1; len(seen) > k {
		c.tail = append(c.tail[:0], seen[len(seen)-k:]...)
	} else {
		c.tail = seen
	}
	c.mu.Unlock()
	if !committing || !bytes.Contains(seen, commandCompleteCommit) {
		return true
	}
	return !c.p.cutNow(c)
}

// forwarded notes bytes of the client's written to the server.
func (c *proxyConn) forwarded() {
	c.mu.Lock()
	if c.awaiting && c.fwd.IsZero() {
		c.fwd = time.Now()
	}
	c.mu.Unlock()
}

// delivered notes bytes of the server's delivered to the client: the
// round trip open, if any, is over.
func (c *proxyConn) delivered() {
	c.mu.Lock()
	if !c.awaiting {
		c.mu.Unlock()
		return
	}
	c.awaiting = false
	burst := c.burst
	c.burst = nil
	took, server := time.Since(c.opened), c.ans.Sub(c.fwd)
	c.mu.Unlock()
	c.p.trips.Add(1)
	if c.p.trace.Load() {
		c.p.mu.Lock()
		c.mu.Lock()
		app := c.app
		c.mu.Unlock()
		c.p.log = append(c.p.log, Trip{Conn: c.id, App: app, Statements: burst, Took: took, Server: server})
		c.p.mu.Unlock()
	}
}

// Startup-format request codes that another startup-format message
// follows (after the server's one-byte answer).
const (
	sslRequest    = 80877103
	gssencRequest = 80877104
)

// parse consumes the whole messages in c.pending, adding what they ask
// for to c.burst when keep is set (c.mu is held).
func (c *proxyConn) parse(keep bool) {
	for {
		b := c.pending
		if c.startup {
			if len(b) < 8 {
				return
			}
			n := int(binary.BigEndian.Uint32(b))
			if n < 8 || len(b) < n {
				return
			}
			code := binary.BigEndian.Uint32(b[4:])
			c.startup = code == sslRequest || code == gssencRequest
			if !c.startup {
				c.app = startupParam(b[8:n], "application_name")
			}
			if keep {
				c.burst = append(c.burst, "startup")
			}
			c.pending = b[n:]
			continue
		}
		if len(b) < 5 {
			return
		}
		n := int(binary.BigEndian.Uint32(b[1:]))
		if n < 4 || len(b) < 1+n {
			return
		}
		typ, body := b[0], b[5:1+n]
		c.pending = b[1+n:]
		c.message(typ, body, keep)
	}
}

// startupParam is the value of the parameter name in a startup
// message's parameters (pairs of C strings), "" when it has none.
func startupParam(b []byte, name string) string {
	fields := strings.Split(string(b), "\x00")
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == name {
			return fields[i+1]
		}
	}
	return ""
}

// message notes one frontend message.
func (c *proxyConn) message(typ byte, body []byte, keep bool) {
	cstr := func(b []byte) (string, []byte) {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		if i == len(b) {
			return string(b), nil
		}
		return string(b[:i]), b[i+1:]
	}
	switch typ {
	case 'P': // Parse: name, query
		name, rest := cstr(body)
		query, _ := cstr(rest)
		c.stmts[name] = query
		if keep && name != "" {
			c.burst = append(c.burst, "prepare: "+oneLine(query))
		}
	case 'B': // Bind: portal, statement
		_, rest := cstr(body)
		name, _ := cstr(rest)
		c.committing = c.committing || isCommit(c.stmts[name])
		if keep {
			c.burst = append(c.burst, oneLine(c.stmts[name]))
		}
	case 'Q': // Query
		query, _ := cstr(body)
		c.committing = c.committing || isCommit(query)
		if keep {
			c.burst = append(c.burst, oneLine(query))
		}
	case 'C': // Close: 'S' and a statement name
		if len(body) > 1 && body[0] == 'S' {
			name, _ := cstr(body[1:])
			delete(c.stmts, name)
		}
	case 'X':
		if keep {
			c.burst = append(c.burst, "terminate")
		}
	}
}

// isCommit reports whether query is a COMMIT.
func isCommit(query string) bool {
	return strings.EqualFold(strings.TrimRight(strings.TrimSpace(query), ";"), "COMMIT")
}

// oneLine is a statement's text on one line, its runs of white space one
// space each.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
