package shimtest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
)

// SealLog is an audit log for benchmarks: it seals every entry as the
// store's log does (schema check, canonical JSON, hash chain) but keeps
// only the chain's head, so a long run does not grow.
type SealLog struct {
	mu   sync.Mutex
	seq  int64
	head string
}

// Append implements audit.Log.
func (l *SealLog) Append(_ context.Context, e audit.Entry) (audit.Record, error) {
	if err := audit.Check(e); err != nil {
		return audit.Record{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head == "" {
		l.head = audit.Genesis
	}
	l.seq++
	rec, err := audit.Seal(e, "evt_bench"+strconv.FormatInt(l.seq, 10), l.seq, l.head)
	if err != nil {
		return audit.Record{}, err
	}
	l.head = rec.Hash
	return rec, nil
}

// DropReceipts is a Memory store that keeps no receipt (a benchmark's list
// would grow with b.N).
type DropReceipts struct{ *Memory }

// AddReceipt drops the receipt.
func (DropReceipts) AddReceipt(context.Context, contract.TenantSlot, shim.Receipt) error { return nil }

// MemUpstream is an upstream that answers every request with Body as JSON,
// in memory, so a benchmark measures the shim, not a network.
type MemUpstream struct{ Body []byte }

// RoundTrip implements http.RoundTripper.
func (m MemUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(m.Body)), Request: r}, nil
}
