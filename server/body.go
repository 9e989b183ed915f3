package server

import (
	"io"
	"net/http"
	"time"
)

// DefaultBodyReadTimeout is Config.BodyReadTimeout's default.
const DefaultBodyReadTimeout = 30 * time.Second

// deadlineBody bounds how long a request body may take to arrive: its first
// Read sets the connection's read deadline (http.ResponseController) to
// timeout from then, and reading to the end clears it again, so the handler's
// own work after the body (a long upstream call, a stream) is not bounded.
// A handler that returns without reading the body to its end (a refusal
// before the body, an error midway) gets the body closed unread: the server
// then closes the connection after the reply instead of draining what a
// slow or hostile client still has to send.
//
// Every route's body goes through it (Server.ServeHTTP); requests without a
// body (GET, the WebSocket upgrade of /relay) are left alone, since a read
// deadline set while nothing reads would cancel the request's context.
type deadlineBody struct {
	body    io.ReadCloser
	ctl     *http.ResponseController
	timeout time.Duration
	armed   bool // the deadline is set
	done    bool // EOF or an error was seen
	eof     bool // the body was read to its end
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.done {
		return b.body.Read(p)
	}
	if !b.armed {
		b.armed = true
		_ = b.ctl.SetReadDeadline(time.Now().Add(b.timeout))
	}
	n, err := b.body.Read(p)
	if err != nil {
		b.done = true
		if err == io.EOF {
			b.eof = true
			_ = b.ctl.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

func (b *deadlineBody) Close() error { return b.body.Close() }

// finish runs after the handler: a body not read to its end is closed.
func (b *deadlineBody) finish() {
	if !b.eof {
		// Close would drain what is left (up to 256 KiB) to keep the
		// connection; an expired deadline makes it give up at once, and
		// the server then closes the connection after the reply.
		_ = b.ctl.SetReadDeadline(time.Now())
		_ = b.body.Close()
	}
}

// boundBody returns r with its body under the read deadline (a shallow
// copy: the server's own request keeps its body, which net/http inspects
// after the handler), and the func to run when the handler is done.
func (s *Server) boundBody(w http.ResponseWriter, r *http.Request) (*http.Request, func()) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return r, func() {}
	}
	b := &deadlineBody{body: r.Body, ctl: http.NewResponseController(w), timeout: s.cfg.BodyReadTimeout}
	r2 := *r
	r2.Body = b
	return &r2, b.finish
}
