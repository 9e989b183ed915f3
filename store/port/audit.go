package port

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// Audit is the audit trail (audit.Log, audit.Source) on the port, in the
// store's tables (audit_records, audit_heads): each tenant's hash chain,
// whose (tenant, seq) primary key is the compare-and-set that keeps it
// from forking without an interactive transaction. An append reads the
// chain's head, seals the record onto it and writes the record at seq+1
// with the new head in one batch; when another writer took that seq first,
// the batch fails whole on the key and the append seals again onto the new
// head. (The server's appends run inside its transactions instead, which
// lock the head: store.AppendAudit; both write the same rows.)
//
// An Audit remembers where each chain ended after its own last append
// (heads), or where a read of it saw it end (SawHead), and seals the next
// record there without reading the head, the
// record's prev_hash taken in the same statement from the head row, which
// must still hold that seq and hash: when the chain moved, whether forward
// (another writer appended) or back (the database was restored), the
// statement fails (prev_hash is NOT NULL), and so the batch; any failure of
// such a batch forgets the remembered end and the append goes on as
// without it, reading the head. So a record is only ever stored sealed
// onto the head the database holds, and an error is only ever returned from
// a batch sealed onto the head as read.
type Audit struct {
	db    DB
	heads chainEnds
}

// NewAudit returns the audit trail on db.
func NewAudit(db DB) *Audit { return &Audit{db: db} }

// SawHead tells the trail that tenant's head row held seq and hash when
// it was read (Keys.HeadsTo): its next append for tenant seals there,
// unless it knows of a later end, without reading the head; the append is
// as safe as any on a remembered end (the head row must still say so).
func (a *Audit) SawHead(tenant contract.TenantSlot, seq int64, hash string) {
	if seq > 0 {
		a.heads.put(tenant, chainEnd{seq, hash})
	}
}

// chainEnds are where this Audit's last appends left each tenant's chain.
type chainEnds struct {
	mu sync.Mutex
	m  map[contract.TenantSlot]chainEnd
}

type chainEnd struct {
	seq  int64
	hash string
}

// maxChainEnds bounds the tenants remembered; past it all are forgotten.
const maxChainEnds = 4096

func (c *chainEnds) get(tenant contract.TenantSlot) (chainEnd, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[tenant]
	return e, ok
}

// put remembers e unless a later end of the chain is remembered.
func (c *chainEnds) put(tenant contract.TenantSlot, e chainEnd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.m[tenant]; ok && old.seq >= e.seq {
		return
	}
	if c.m == nil || len(c.m) >= maxChainEnds {
		c.m = map[contract.TenantSlot]chainEnd{}
	}
	c.m[tenant] = e
}

// drop forgets e, unless another append has remembered a newer end since.
func (c *chainEnds) drop(tenant contract.TenantSlot, e chainEnd) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m[tenant] == e {
		delete(c.m, tenant)
	}
}

var (
	_ audit.Log        = (*Audit)(nil)
	_ audit.Source     = (*Audit)(nil)
	_ audit.HeadFinder = (*Audit)(nil)
)

// MaxAppendTries bounds the seals of one append under contention.
const MaxAppendTries = 50

// quickTries are the seals an append makes again at once after losing its
// seq. On a database that runs batches side by side (Postgres, SideBySide)
// it then waits a random while, up to twice as long each time (backOff),
// so that many writers on one chain, which collide there on every try,
// spread out. Where batches run one at a time (SQLite's one writer, D1) an
// append rarely needs more tries, and never waits: in a Worker a request
// that waits on a timer alone is canceled as hung (docs/edge.md).
const quickTries = 3

// SideBySide is implemented by a DB that runs batches side by side
// (store.DB on Postgres).
type SideBySide interface{ BatchesSideBySide() bool }

func sideBySide(db DB) bool {
	s, ok := db.(SideBySide)
	return ok && s.BatchesSideBySide()
}

// backOff waits up to 2^n × 500 µs (at most 64 ms), at random, or until ctx
// ends.
func backOff(ctx context.Context, n int) {
	d := time.Duration(500<<min(n, 7)) * time.Microsecond
	t := time.NewTimer(rand.N(d) + 1)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Append implements audit.Log.
func (a *Audit) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	s, err := audit.Prepare(e, contract.NewID(contract.PrefixEvent))
	if err != nil {
		return audit.Record{}, err
	}
	return a.AppendWith(context.WithoutCancel(ctx), s, nil)
}

// AppendWith seals s onto its tenant's chain and writes it in one batch
// with the statements with makes for the sealed record (nil: none), for
// what must be stored with the record or not at all (a turn's receipt).
// A batch whose record lost its seq to another writer is sealed and run
// again; any other failure is returned as it came (with's unique
// violations too).
func (a *Audit) AppendWith(ctx context.Context, s audit.Sealable, with func(audit.Record) []Statement) (audit.Record, error) {
	tenant := s.Tenant()
	if end, ok := a.heads.get(tenant); ok {
		// Onto where this Audit's last append left the chain, if the head
		// row still says so; on any failure, forgotten, and on as without.
		if rec, err := s.Seal(end.seq+1, end.hash); err == nil {
			stmts := RecordStatements(rec)
			stmts[0] = guardedRecord(stmts[0], rec)
			if with != nil {
				stmts = append(stmts, with(rec)...)
			}
			if err := a.db.Batch(ctx, stmts); err == nil {
				a.heads.put(tenant, chainEnd{rec.Seq, rec.Hash})
				return rec, nil
			}
		}
		a.heads.drop(tenant, end)
	}
	for try := range MaxAppendTries {
		seq, prev, err := a.end(ctx, tenant)
		if err != nil {
			return audit.Record{}, fmt.Errorf("store: audit head: %w", err)
		}
		rec, err := s.Seal(seq+1, prev)
		if err != nil {
			return audit.Record{}, err
		}
		stmts := RecordStatements(rec)
		if with != nil {
			stmts = append(stmts, with(rec)...)
		}
		err = a.db.Batch(ctx, stmts)
		if err == nil {
			a.heads.put(tenant, chainEnd{rec.Seq, rec.Hash})
			return rec, nil
		}
		if !chainMoved(err) {
			return audit.Record{}, err
		}
		if try >= quickTries && sideBySide(a.db) {
			backOff(ctx, try-quickTries)
		}
	}
	return audit.Record{}, fmt.Errorf("store: audit append: the chain of %s moved %d times under this append", tenant, MaxAppendTries)
}

// RecordStatements writes a sealed record and moves its chain's head to
// it; a record already at its (tenant, seq) fails the first with a unique
// violation (the chain moved).
func RecordStatements(rec audit.Record) []Statement {
	var conv, session any // NULL unless the record names a conversation
	if p := rec.Provenance; p != nil && p.ConversationID != "" {
		conv, session = p.ConversationID, p.SessionID
	}
	return []Statement{
		{SQL: `INSERT INTO audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash, conversation_id, session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			Args: []any{string(rec.Tenant), rec.Seq, rec.ID, rec.Outcome.At, rec.Outcome.Action, rec.Outcome.Resource, string(rec.Outcome.Outcome),
				string(rec.Body), rec.PrevHash, rec.Hash, conv, session}},
		{SQL: `INSERT INTO audit_heads (tenant, seq, hash) VALUES (?, ?, ?) ON CONFLICT (tenant) DO UPDATE SET seq = excluded.seq, hash = excluded.hash`,
			Args: []any{string(rec.Tenant), rec.Seq, rec.Hash}},
	}
}

// guardedRecord is RecordStatements's insert of rec with its prev_hash
// read from the chain's head row in the same statement: NULL, which the
// column refuses, unless the row still holds rec's previous seq and hash.
func guardedRecord(insert Statement, rec audit.Record) Statement {
	args := slices.Clone(insert.Args)
	args = slices.Replace(args, 8, 9, any(string(rec.Tenant)), any(rec.Seq-1), any(rec.PrevHash))
	return Statement{SQL: `INSERT INTO audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash, conversation_id, session_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT hash FROM audit_heads WHERE tenant = ? AND seq = ? AND hash = ?), ?, ?, ?)`,
		Args: args}
}

// chainMoved reports whether err is the unique violation of a record
// written at a seq another writer took first: SQLite's (and D1's) message
// names the table's columns, Postgres's its primary key.
func chainMoved(err error) bool {
	if !Unique(err) {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "audit_records.tenant") || strings.Contains(m, "audit_records_pkey")
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
		return nil, fmt.Errorf("store: audit tail: %w", err)
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

// Tenants implements audit.Source: every tenant with records or a head,
// so neither a removed head nor a chain whose records are all gone hides.
func (a *Audit) Tenants(ctx context.Context) ([]contract.TenantSlot, error) {
	rows, err := a.db.Query(ctx, `SELECT tenant FROM audit_records UNION SELECT tenant FROM audit_heads ORDER BY tenant`)
	if err != nil {
		return nil, fmt.Errorf("store: audit tenants: %w", err)
	}
	out := make([]contract.TenantSlot, len(rows))
	for i, r := range rows {
		out[i] = contract.TenantSlot(r.Str(0))
	}
	return out, nil
}

// Head implements audit.Source: where the tenant's head row says its
// chain ends (audit.Genesis when it has none).
func (a *Audit) Head(ctx context.Context, tenant contract.TenantSlot) (int64, string, error) {
	seq, hash, _, err := a.FindHead(ctx, tenant)
	return seq, hash, err
}

// FindHead implements audit.HeadFinder: found is false when the tenant has
// no head row.
func (a *Audit) FindHead(ctx context.Context, tenant contract.TenantSlot) (int64, string, bool, error) {
	r, found, err := One(ctx, a.db, `SELECT seq, hash FROM audit_heads WHERE tenant = ?`, string(tenant))
	if err != nil {
		return 0, "", false, fmt.Errorf("store: audit head: %w", err)
	}
	if !found {
		return 0, audit.Genesis, false, nil
	}
	return r.Int(0), r.Str(1), true, nil
}

// end is where an append seals onto: the head row, or, when it is missing
// (the tenant's first record, or a head removed), the chain's last record,
// so the chain goes on where it ends (the removal itself is what
// verification catches).
func (a *Audit) end(ctx context.Context, tenant contract.TenantSlot) (int64, string, error) {
	seq, hash, found, err := a.FindHead(ctx, tenant)
	if err != nil || found {
		return seq, hash, err
	}
	r, found, err := One(ctx, a.db, `SELECT seq, hash FROM audit_records WHERE tenant = ? ORDER BY seq DESC LIMIT 1`, string(tenant))
	if err != nil || !found {
		return 0, audit.Genesis, err
	}
	return r.Int(0), r.Str(1), nil
}

// Scan implements audit.Source: the chain in seq order.
func (a *Audit) Scan(ctx context.Context, tenant contract.TenantSlot, fn func(audit.Row) error) error {
	rows, err := a.db.Query(ctx, `SELECT seq, id, at, action, resource, outcome, body, prev_hash, hash FROM audit_records WHERE tenant = ? ORDER BY seq`, string(tenant))
	if err != nil {
		return fmt.Errorf("store: audit scan: %w", err)
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
