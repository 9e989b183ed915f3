package server

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// The request log (Server.Logged, what serve listens with): one line per
// request, written when its answer is done,
// with what an operator needs to follow it and nothing a client sent
// beyond that. It names the request id (X-Request-Id: the client's when it
// is a short token, else a new one, and always sent back), the route (the
// pattern, never the raw path or query, which may carry tokens), the
// status, the duration, the bytes written, the tenant and key id when the
// key was known, and the remote address. Never a header value, a key, a
// secret or a byte of a body. Probes (/healthz, /readyz, /metrics) log at
// debug.

// HeaderRequestID carries the request id both ways.
const HeaderRequestID = "X-Request-Id"

// requestEntry is what the wrapper adds to a request's log line.
type requestEntry struct {
	tenant contract.TenantSlot
	keyID  string
}

type requestEntryKey struct{}

// noteCaller records the authenticated (or refused but known) caller of
// the request in ctx for its log line.
func noteCaller(ctx context.Context, c contract.Caller) {
	if e, ok := ctx.Value(requestEntryKey{}).(*requestEntry); ok {
		e.tenant, e.keyID = c.Identity.TenantSlot, c.KeyID
	}
}

// RequestIDFrom is the request id of a request's context ("" outside one).
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

type requestIDKey struct{}

// logRequest starts r's log line: it returns the writer and request to
// serve and the function that writes the line when the answer is done.
func (s *Server) logRequest(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request, func()) {
	start := time.Now()
	id := r.Header.Get(HeaderRequestID)
	if !validRequestID(id) {
		id = newRequestID()
	}
	w.Header().Set(HeaderRequestID, id)
	entry := &requestEntry{}
	ctx := context.WithValue(context.WithValue(r.Context(), requestEntryKey{}, entry), requestIDKey{}, id)
	r = r.WithContext(ctx)
	lw := &logWriter{ResponseWriter: w}
	return lw, r, func() {
		// The answer's own X-Request-Id is the line's (a handler may name
		// the request itself, e.g. by its receipt).
		if v := w.Header().Get(HeaderRequestID); v != "" {
			id = v
		}
		_, route := s.mux.Handler(r)
		if route == "" {
			route = "unmatched"
		}
		level := slog.LevelInfo
		switch route {
		case "GET /healthz", "GET /readyz", "GET /metrics":
			level = slog.LevelDebug
		}
		if !s.log.Enabled(ctx, level) {
			return
		}
		status := lw.status
		if status == 0 {
			status = http.StatusOK // the handler wrote nothing: net/http answers 200
		}
		attrs := []slog.Attr{
			slog.String("request_id", id),
			slog.String("route", route),
			slog.Int("status", status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.Int64("bytes", lw.bytes),
		}
		if entry.tenant != "" {
			attrs = append(attrs, slog.String("tenant", string(entry.tenant)), slog.String("key_id", entry.keyID))
		}
		attrs = append(attrs, slog.String("remote", r.RemoteAddr))
		s.log.LogAttrs(context.WithoutCancel(ctx), level, "request", attrs...)
	}
}

// validRequestID accepts a client's request id only when it is a short
// token of safe characters: anything else could forge or break log lines.
func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// logWriter records the status and the bytes of an answer; it passes
// Flush, Hijack (the relay's WebSockets) and Unwrap (http.ResponseController)
// through.
type logWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *logWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 || code == http.StatusSwitchingProtocols {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *logWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *logWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

func (w *logWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("server: the connection cannot be hijacked")
	}
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return h.Hijack()
}

func (w *logWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
