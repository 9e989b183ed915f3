// Package h1 is an HTTP/1.1 client transport for plain-HTTP upstreams that
// runs each exchange on its caller's goroutine.
//
// net/http's Transport gives every connection a reading and a writing
// goroutine: a request is handed to the writer, its answer handed back by
// the reader, and the reader is told when the body has been read. At one
// request at a time each handoff wakes a sleeping thread, and on a virtual
// machine that costs more than the exchange's own work. Transport writes the
// request and reads the answer (with net/http's own Request.Write and
// ReadResponse) on the goroutine that called RoundTrip and reads the body;
// a connection whose body was read to its end goes back to an idle pool.
//
// It handles what a gateway sends to a plain-HTTP upstream (a local model
// server, a sidecar, a fake): requests over http:// to the host named, with
// or without a body, keep-alive, streamed answers, interim 1xx answers,
// cancellation by the request's context. Everything else — https (TLS and
// HTTP/2), a request going through a proxy, an Expect or Upgrade header —
// goes to Fallback, net/http's Transport.
package h1

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Transport is an http.RoundTripper; its zero value is not usable: set
// Fallback.
type Transport struct {
	// Fallback carries the requests Transport does not (see the package
	// comment).
	Fallback http.RoundTripper
	// Proxy says which proxy a request goes through (nil: none); a request
	// with one goes to Fallback.
	Proxy func(*http.Request) (*url.URL, error)
	// Dial opens a connection (nil: a net.Dialer with a 10 s timeout).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// MaxIdlePerHost bounds the idle connections kept per host (0: 256).
	MaxIdlePerHost int
	// IdleTimeout is how long an idle connection may wait to be used
	// again (0: 90 s); an older one is closed when it is next looked at.
	IdleTimeout time.Duration

	mu   sync.Mutex
	idle map[string][]*conn // by host:port, the most recently used last
}

type conn struct {
	nc     net.Conn
	br     *bufio.Reader
	w      *countingWriter
	idleAt time.Time
}

// countingWriter counts what reached the connection, to tell a request
// that was not sent at all.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.carries(req) {
		return t.Fallback.RoundTrip(req)
	}
	addr := hostPort(req.URL)
	for attempt := 0; ; attempt++ {
		c, reused, err := t.get(req.Context(), addr)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := t.exchange(req, c, addr)
		if err == nil {
			return resp, nil
		}
		c.nc.Close()
		if attempt == 0 && reused && retryable(req, err) {
			// An idle connection the server closed as it was taken, as
			// net/http retries it: the request had not been written, or
			// it may be replayed and nothing came back.
			if req, err = rewind(req); err == nil {
				continue
			}
		}
		closeBody(req)
		if ctxErr := req.Context().Err(); ctxErr != nil {
			return nil, ctxErr
		}
		return nil, err
	}
}

// carries reports whether req is one Transport sends itself.
func (t *Transport) carries(req *http.Request) bool {
	if req.URL == nil || req.URL.Scheme != "http" || req.URL.Host == "" {
		return false
	}
	if req.Header.Get("Expect") != "" || req.Header.Get("Upgrade") != "" {
		return false
	}
	if t.Proxy != nil {
		if u, err := t.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

// exchange writes req on c and reads the head of its answer.
func (t *Transport) exchange(req *http.Request, c *conn, addr string) (*http.Response, error) {
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, sentErr{err, false}
	}
	// The context's end unblocks whatever this goroutine waits for on c.
	stop := context.AfterFunc(ctx, func() { c.nc.SetDeadline(time.Unix(1, 0)) })
	before := c.w.n
	// Request.Write buffers and flushes a writer that is not a
	// bufio.Writer itself, and then reports httptrace's WroteRequest.
	if err := req.Write(c.w); err != nil {
		stop()
		return nil, sentErr{err, c.w.n > before}
	}
	var (
		resp *http.Response
		err  error
	)
	for {
		resp, err = http.ReadResponse(c.br, req)
		if err != nil {
			stop()
			return nil, readErr{err, c.br.Buffered() > 0}
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		// An interim answer (100 Continue, 103 Early Hints): the final one follows.
	}
	b := &body{rc: resp.Body, t: t, c: c, addr: addr, ctx: ctx, stop: stop, keep: !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols}
	if resp.Body == http.NoBody {
		b.finish(true)
		return resp, nil
	}
	resp.Body = b
	return resp, nil
}

// sentErr is a failure to write a request: sent says whether any of it
// reached the connection.
type sentErr struct {
	err  error
	sent bool
}

func (e sentErr) Error() string { return e.err.Error() }
func (e sentErr) Unwrap() error { return e.err }

// readErr is a failure to read an answer's head: got says whether any of
// it came.
type readErr struct {
	err error
	got bool
}

func (e readErr) Error() string { return e.err.Error() }
func (e readErr) Unwrap() error { return e.err }

// retryable is net/http's rule for a request that failed on a reused
// connection: retried when nothing of it was written, or when it may be
// replayed (GET, HEAD, OPTIONS, TRACE, or an Idempotency-Key) and nothing
// came back.
func retryable(req *http.Request, err error) bool {
	if req.Context().Err() != nil {
		return false
	}
	var se sentErr
	if errors.As(err, &se) {
		return !se.sent
	}
	var re readErr
	if errors.As(err, &re) && !re.got && replayable(req) {
		return errors.Is(re.err, io.EOF) || errors.Is(re.err, io.ErrUnexpectedEOF) || errors.Is(re.err, syscall.ECONNRESET)
	}
	return false
}

func replayable(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// rewind is req with its body from the start again, for a second try.
func rewind(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("h1: the request's body cannot be read again")
	}
	b, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r := *req
	r.Body = b
	return &r, nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// body is an answer's body read from its connection: read to its end, the
// connection goes back to the pool; closed before, the connection closes.
type body struct {
	rc   io.ReadCloser
	t    *Transport
	c    *conn
	addr string
	ctx  context.Context
	stop func() bool
	keep bool // the connection may carry another request
	mu   sync.Mutex
	done bool
	eof  bool // done at its end, not closed before
}

// errClosed is a read of a body closed before its end, in net/http's words.
var errClosed = errors.New("http: read on closed response body")

func (b *body) Read(p []byte) (int, error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		if b.eof {
			return 0, io.EOF // as often as it is asked, as net/http's body
		}
		return 0, errClosed
	}
	b.mu.Unlock()
	n, err := b.rc.Read(p)
	if err == nil {
		return n, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return n, err
	}
	if err == io.EOF {
		b.eof = true
		b.finishLocked(true)
		return n, io.EOF
	}
	b.finishLocked(false)
	if ctxErr := b.ctx.Err(); ctxErr != nil {
		return n, ctxErr // the deadline the context's end set
	}
	return n, err
}

func (b *body) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.done {
		b.finishLocked(false)
	}
	return nil
}

func (b *body) finish(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finishLocked(ok)
}

func (b *body) finishLocked(ok bool) {
	b.done = true
	// stop reports false when the context's end already set the
	// connection's deadline: it cannot be used again.
	if ok && b.stop() && b.keep && b.c.br.Buffered() == 0 {
		b.rc.Close() // at its end: nothing to drain
		b.t.put(b.addr, b.c)
		return
	}
	b.stop()
	b.c.nc.Close()
}

// get takes an idle connection to addr, or dials one.
func (t *Transport) get(ctx context.Context, addr string) (*conn, bool, error) {
	now := time.Now()
	timeout := t.IdleTimeout
	if timeout <= 0 {
		timeout = 90 * time.Second
	}
	for {
		t.mu.Lock()
		pool := t.idle[addr]
		if len(pool) == 0 {
			t.mu.Unlock()
			break
		}
		c := pool[len(pool)-1]
		pool[len(pool)-1] = nil
		t.idle[addr] = pool[:len(pool)-1]
		t.mu.Unlock()
		if now.Sub(c.idleAt) > timeout || !alive(c.nc) {
			c.nc.Close()
			continue
		}
		return c, true, nil
	}
	dial := t.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, sentErr{err, false}
	}
	w := &countingWriter{w: nc}
	return &conn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), w: w}, false, nil
}

// put returns c to addr's idle pool.
func (t *Transport) put(addr string, c *conn) {
	max := t.MaxIdlePerHost
	if max <= 0 {
		max = 256
	}
	c.idleAt = time.Now()
	t.mu.Lock()
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	if len(t.idle[addr]) >= max {
		t.mu.Unlock()
		c.nc.Close()
		return
	}
	t.idle[addr] = append(t.idle[addr], c)
	t.mu.Unlock()
}

// CloseIdleConnections closes the idle connections, and Fallback's.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, pool := range idle {
		for _, c := range pool {
			c.nc.Close()
		}
	}
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// hostPort is u's host with its port (80 when it names none).
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(strings.TrimSuffix(strings.TrimPrefix(u.Hostname(), "["), "]"), "80")
}

var _ http.RoundTripper = (*Transport)(nil)
