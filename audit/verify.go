package audit

import (
	"bytes"
	"context"
	"fmt"
	"strconv"

	"github.com/caduceus-dev/caduceus/contract"
)

// Row is a stored record as the store hands it to Verify: the indexed
// columns as stored, the body and the two hashes.
type Row struct {
	ID       string
	Tenant   contract.TenantSlot
	Seq      int64
	Action   string
	Outcome  string
	Body     []byte
	PrevHash string
	Hash     string
}

// Source is what Verify reads: the tenants, each tenant's rows in chain
// order, and the head the store believes each chain ends at.
type Source interface {
	Tenants(ctx context.Context) ([]contract.TenantSlot, error)
	Head(ctx context.Context, tenant contract.TenantSlot) (seq int64, hash string, err error)
	Scan(ctx context.Context, tenant contract.TenantSlot, fn func(Row) error) error
}

// Break describes the first broken link found.
type Break struct {
	Tenant contract.TenantSlot
	Seq    int64
	ID     string
	Reason string
}

func (b *Break) Error() string {
	return fmt.Sprintf("audit: chain of %s broken at seq %d (record %s): %s", b.Tenant, b.Seq, b.ID, b.Reason)
}

// Report is the result of Verify.
type Report struct {
	Tenants int
	Records int64
	Break   *Break // nil when every chain is whole
}

// Verify recomputes the chains of the given tenants (all when none) and
// stops at the first broken link: a body whose hash differs (an altered
// row), a prev_hash that does not match the previous record, a gap in seq
// (a removed row), a chain that ends before its head (removed tail rows), or
// indexed columns that disagree with the hashed body. progress, if not nil,
// is called every 10,000 records.
func Verify(ctx context.Context, src Source, progress func(checked int64), tenants ...contract.TenantSlot) (Report, error) {
	var rep Report
	if len(tenants) == 0 {
		var err error
		if tenants, err = src.Tenants(ctx); err != nil {
			return rep, err
		}
	}
	for _, tenant := range tenants {
		rep.Tenants++
		headSeq, headHash, err := src.Head(ctx, tenant)
		if err != nil {
			return rep, err
		}
		prev := Genesis
		next := int64(1)
		brk := func(r Row, reason string) error {
			rep.Break = &Break{Tenant: tenant, Seq: r.Seq, ID: r.ID, Reason: reason}
			return errStop
		}
		err = src.Scan(ctx, tenant, func(r Row) error {
			if r.Seq != next {
				return brk(r, fmt.Sprintf("expected seq %d, found %d: a record was removed", next, r.Seq))
			}
			if r.PrevHash != prev {
				return brk(r, "prev_hash does not match the previous record's hash")
			}
			h, err := Link(prev, r.Body)
			if err != nil {
				return brk(r, err.Error())
			}
			if h != r.Hash {
				return brk(r, "hash does not match the record body: the record was altered")
			}
			if reason := columnsMatch(r); reason != "" {
				return brk(r, reason)
			}
			prev = h
			next++
			rep.Records++
			if progress != nil && rep.Records%10000 == 0 {
				progress(rep.Records)
			}
			return nil
		})
		if err == errStop {
			return rep, nil
		}
		if err != nil {
			return rep, err
		}
		if next-1 != headSeq || (headSeq > 0 && prev != headHash) {
			rep.Break = &Break{Tenant: tenant, Seq: next, Reason: fmt.Sprintf("chain ends at seq %d but its head is seq %d: records were removed", next-1, headSeq)}
			return rep, nil
		}
	}
	return rep, nil
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}

// columnsMatch checks the stored index columns against the hashed body
// without a full decode: the body is canonical JSON, so each field appears
// exactly once with a known spelling.
func columnsMatch(r Row) string {
	checks := []struct{ key, want string }{
		{`"id":`, strconv.Quote(r.ID)},
		{`"tenant":`, strconv.Quote(string(r.Tenant))},
		{`"seq":`, strconv.FormatInt(r.Seq, 10)},
		{`"action":`, strconv.Quote(r.Action)},
		{`"outcome":`, strconv.Quote(r.Outcome)},
	}
	for _, c := range checks {
		if !hasField(r.Body, c.key, c.want) {
			return "stored column " + c.key[1:len(c.key)-2] + " does not match the record body"
		}
	}
	return ""
}

// hasField reports whether key is followed by want somewhere in body. The
// "outcome" key occurs twice (the object and its outcome string); any
// occurrence followed by want suffices, and a forged column can only match if
// the body itself says so.
func hasField(body []byte, key, want string) bool {
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(key))
		if j < 0 {
			return false
		}
		i += j + len(key)
		if bytes.HasPrefix(body[i:], []byte(want)) {
			rest := body[i+len(want):]
			if len(rest) > 0 && (rest[0] == ',' || rest[0] == '}') {
				return true
			}
		}
	}
}
