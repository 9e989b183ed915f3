package shim

import (
	"encoding/hex"
	"hash"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Headers the shim reads and writes.
const (
	HeaderConversation = "X-Caduceus-Conversation"
	HeaderProject      = "X-Caduceus-Project"
	HeaderHarness      = "X-Caduceus-Harness"
	// HeaderHermaHarness is seed 003's name for HeaderHarness, accepted as
	// an alias (HarnessOf).
	HeaderHermaHarness = "X-Herma-Harness"
	HeaderReceipt      = "X-Caduceus-Receipt"
	HeaderOverhead     = "X-Caduceus-Overhead-Us"
	// headerShouldRetry tells the official SDKs whether to retry.
	headerShouldRetry = "X-Should-Retry"
)

// HarnessOf is the harness a request attests: X-Caduceus-Harness, or seed
// 003's X-Herma-Harness when the first is absent.
func HarnessOf(h http.Header) string {
	if v := h.Get(HeaderHarness); v != "" {
		return v
	}
	return h.Get(HeaderHermaHarness)
}

// Refusal codes of the proxy.
const (
	CodeInvalidRequest  = "invalid_request"
	CodeOffline         = "offline"
	codeNoUpstream      = "upstream_not_configured"
	CodeUpstreamFailed  = "upstream_unreachable"
	codeTooLarge        = "request_too_large"
	codeBodyTimeout     = "request_timeout"
	codeUnauthenticated = "unauthenticated"
	// CodeReceiptNotRecorded answers (503) in place of an answer whose
	// receipt and audit record could not be stored: nothing was delivered.
	CodeReceiptNotRecorded = "receipt_not_recorded"
)

// AuditAction is the audit action of a proxied request.
const AuditAction = "shim.proxy"

// turn carries one request through the proxy.
type turn struct {
	start  time.Time
	caller contract.Caller
	req    *wire.Request
	conv   string // the conv_ id
	key    string // the session key it was named by, if any
	rc     Receipt
	r      *http.Request
	// unstored is why finish could not store the receipt (nil: it did).
	unstored error
	// served is the model identity that answered and its provider class
	// (the receipt's route), once an upstream answered.
	served *contract.Route
	// effort is the reasoning effort the request asks for (the route's
	// effort, seed 002), "" when none of the HUX enum.
	effort contract.Effort

	// guard is the turn's guardrails (nil: no policy applies).
	guard *guarding

	// hashing runs beside the rule work when a body is large (hash): the
	// request's and the forwarded body's sha256 are only read by finish,
	// which waits for them
	sums sync.WaitGroup
}

// hashBeside is the body size from which hash runs off the request's
// path. Below it the sum costs less than a goroutine: one started per sum
// woke an idle processor's thread (a futex wake and two context switches)
// to hash a few hundred bytes, two per forwarded turn, about half the
// goroutines serve started per request at one connection.
const hashBeside = 4 << 10

// hash sets *dst to the sha256 of b: at once when b is small, else beside
// the rule work (finish waits for it).
func (t *turn) hash(dst *string, b []byte) {
	if len(b) < hashBeside {
		*dst = contract.SHA256(b)
		return
	}
	t.sums.Add(1)
	go func() {
		defer t.sums.Done()
		*dst = contract.SHA256(b)
	}()
}

func (t *turn) overhead() int64 { return time.Since(t.start).Microseconds() }

// headers sets the headers of an answer the shim makes itself (a direct
// answer, a refusal): the receipt, the overhead, and the receipt id as the
// request id the protocol's SDK reads.
func (t *turn) headers(w http.ResponseWriter) {
	w.Header().Set(HeaderReceipt, t.rc.ID)
	w.Header().Set(wire.RequestIDHeader(t.rc.Protocol), t.rc.ID)
	t.rc.OverheadMicros = t.overhead()
	w.Header().Set(HeaderOverhead, strconv.FormatInt(t.rc.OverheadMicros, 10))
}

// observed is the turn as an Observer sees it.
func (t *turn) observed() Turn {
	return Turn{Caller: t.caller, Conversation: t.conv, Project: t.r.Header.Get(HeaderProject), Request: t.req, Receipt: t.rc}
}

func sum(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// abort ends the client's response abnormally, as an upstream's broken
// stream ended. An HTTP/1.1 connection is taken over and closed without
// the chunked body's last chunk (everything written before was flushed),
// so the handler returns as usual and the server's wrappers still count
// the request. Where there is no connection to take over (an HTTP/2
// stream, the edge's Fetch Response), the stream first gets p's own error
// event (wire.StreamError: code and message, never an answer), as a
// provider ends a stream that failed, since a reset alone may reach the
// client as a clean end (workerd delivers it so); then the handler panics
// with http.ErrAbortHandler, on which net/http resets the stream and the
// edge aborts its Response.
func abort(w http.ResponseWriter, p wire.Protocol, status int, code, message string) {
	rc := http.NewResponseController(w)
	if conn, _, err := rc.Hijack(); err == nil {
		conn.Close()
		return
	}
	if _, err := w.Write(wire.StreamError(p, status, code, message)); err == nil {
		_ = rc.Flush()
	}
	panic(http.ErrAbortHandler)
}

// truncateRunes is s cut to its first n runes.
func truncateRunes(s string, n int) string {
	if n <= 0 {
		return ""
	}
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
