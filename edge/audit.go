package edge

import (
	"context"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// Audit is the audit trail (audit.Log) on a DB: each tenant's hash chain
// in audit_records, whose (tenant, seq) primary key is the compare-and-set
// that keeps the chain from forking. An append reads the chain's end,
// seals the record onto it and inserts it at seq+1; when another isolate
// took that seq first, the insert changes nothing and the append reads the
// new end and seals again.
type Audit struct{ db DB }

// NewAudit returns the audit trail on db.
func NewAudit(db DB) *Audit { return &Audit{db: db} }

var _ audit.Log = (*Audit)(nil)

// maxAppendTries bounds the retries of one append under contention.
const maxAppendTries = 50

// Append implements audit.Log.
func (a *Audit) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	s, err := audit.Prepare(e, contract.NewID(contract.PrefixEvent))
	if err != nil {
		return audit.Record{}, err
	}
	tenant := e.Outcome.Identity.TenantSlot
	for range maxAppendTries {
		rec, err := a.sealNext(ctx, s, tenant)
		if err != nil {
			return audit.Record{}, err
		}
		st := insertRecord(rec)
		n, err := a.db.Exec(ctx, st.SQL+` ON CONFLICT (tenant, seq) DO NOTHING`, st.Args...)
		if err != nil {
			return audit.Record{}, fmt.Errorf("edge: audit append: %w", err)
		}
		if n == 1 {
			return rec, nil
		}
	}
	return audit.Record{}, errChainMoved(tenant)
}

func errChainMoved(tenant contract.TenantSlot) error {
	return fmt.Errorf("edge: audit append: the chain of %s moved %d times under this append", tenant, maxAppendTries)
}

// sealNext seals s onto the end of tenant's chain as it is now.
func (a *Audit) sealNext(ctx context.Context, s audit.Sealable, tenant contract.TenantSlot) (audit.Record, error) {
	seq, prev, err := a.Head(ctx, tenant)
	if err != nil {
		return audit.Record{}, fmt.Errorf("edge: audit head: %w", err)
	}
	return s.Seal(seq+1, prev)
}

// insertRecord inserts a sealed record; a record already at its (tenant,
// seq) makes it fail with a unique-constraint error (chainMoved).
func insertRecord(rec audit.Record) Statement {
	return Statement{SQL: `INSERT INTO audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		Args: []any{string(rec.Tenant), rec.Seq, rec.ID, rec.Outcome.At, rec.Outcome.Action, rec.Outcome.Resource, string(rec.Outcome.Outcome),
			string(rec.Body), rec.PrevHash, rec.Hash}}
}

// chainMoved reports whether err is the unique-constraint failure of a
// record inserted at a seq another append took first (SQLite's message,
// which D1 passes on).
func chainMoved(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed: audit_records.tenant")
}

// Tail returns the newest records matching f, newest first, decoded from
// their hashed bodies (the server's GET /v1/audit).
func (a *Audit) Tail(ctx context.Context, f audit.Filter) ([]audit.Record, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	q, args := `SELECT body, prev_hash, hash FROM audit_records WHERE 1 = 1`, []any{}
	for _, c := range []struct{ col, v string }{{"tenant", string(f.Tenant)}, {"action", f.Action}, {"resource", f.Resource}} {
		if c.v != "" {
			q, args = q+` AND `+c.col+` = ?`, append(args, c.v)
		}
	}
	rows, err := a.db.Query(ctx, q+` ORDER BY id DESC LIMIT ?`, append(args, int64(f.Limit))...)
	if err != nil {
		return nil, fmt.Errorf("edge: audit tail: %w", err)
	}
	out := make([]audit.Record, len(rows))
	for i, r := range rows {
		rec, err := audit.Decode([]byte(r.Str(0)))
		if err != nil {
			return nil, err
		}
		rec.PrevHash, rec.Hash = r.Str(1), r.Str(2)
		out[i] = rec
	}
	return out, nil
}

// Tenants, Head and Scan make the trail an audit.Source, so audit.Verify
// checks the edge's chains as it checks the server's.
func (a *Audit) Tenants(ctx context.Context) ([]contract.TenantSlot, error) {
	rows, err := a.db.Query(ctx, `SELECT DISTINCT tenant FROM audit_records ORDER BY tenant`)
	if err != nil {
		return nil, fmt.Errorf("edge: audit tenants: %w", err)
	}
	out := make([]contract.TenantSlot, len(rows))
	for i, r := range rows {
		out[i] = contract.TenantSlot(r.Str(0))
	}
	return out, nil
}

// Head implements audit.Source: the chain's last seq and hash.
func (a *Audit) Head(ctx context.Context, tenant contract.TenantSlot) (int64, string, error) {
	r, found, err := one(ctx, a.db, `SELECT seq, hash FROM audit_records WHERE tenant = ? ORDER BY seq DESC LIMIT 1`, string(tenant))
	if err != nil || !found {
		return 0, audit.Genesis, err
	}
	return r.Int(0), r.Str(1), nil
}

// Scan implements audit.Source: the chain in seq order.
func (a *Audit) Scan(ctx context.Context, tenant contract.TenantSlot, fn func(audit.Row) error) error {
	rows, err := a.db.Query(ctx, `SELECT seq, id, at, action, resource, outcome, body, prev_hash, hash FROM audit_records WHERE tenant = ? ORDER BY seq`, string(tenant))
	if err != nil {
		return fmt.Errorf("edge: audit scan: %w", err)
	}
	for _, r := range rows {
		if err := fn(audit.Row{Tenant: tenant, Seq: r.Int(0), ID: r.Str(1), At: r.Str(2), Action: r.Str(3), Resource: r.Str(4),
			Outcome: r.Str(5), Body: []byte(r.Str(6)), PrevHash: r.Str(7), Hash: r.Str(8)}); err != nil {
			return err
		}
	}
	return nil
}

// Ping reports whether the database answers (the server's readiness).
func (a *Audit) Ping(ctx context.Context) error {
	_, err := a.db.Query(ctx, `SELECT 1`)
	return err
}
