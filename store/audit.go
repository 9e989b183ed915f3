package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// AuditLog is the audit trail in SQL: it implements audit.Log (appends) and
// audit.Source (what audit.Verify reads).
type AuditLog struct{ db *DB }

// Audit returns the store's audit log.
func (db *DB) Audit() *AuditLog { return &AuditLog{db: db} }

// DB is the store the log writes to.
func (l *AuditLog) DB() *DB { return l.db }

var (
	_ audit.Log        = (*AuditLog)(nil)
	_ audit.Source     = (*AuditLog)(nil)
	_ audit.HeadFinder = (*AuditLog)(nil)
)

// Append seals e onto its tenant's chain in a transaction of its own. The
// context's cancellation is ignored (context.WithoutCancel): a client that
// hangs up cannot erase the record of what it did.
func (l *AuditLog) Append(ctx context.Context, e audit.Entry) (audit.Record, error) {
	ctx = context.WithoutCancel(ctx)
	var rec audit.Record
	err := l.db.InTxFor(ctx, e.Outcome.Identity.TenantSlot, func(tx *Tx) error {
		var err error
		rec, err = AppendAudit(ctx, tx, e)
		return err
	})
	return rec, err
}

// AppendAudit seals e onto its tenant's chain inside tx, so a domain change
// and its audit record commit (or roll back) together.
func AppendAudit(ctx context.Context, tx *Tx, e audit.Entry) (audit.Record, error) {
	s, err := audit.Prepare(e, contract.NewID(contract.PrefixEvent))
	if err != nil {
		return audit.Record{}, err
	}
	return AppendPrepared(ctx, tx, s)
}

// AppendPrepared is AppendAudit for an entry prepared (checked, payload
// canonicalized) before the transaction, which then only links it.
func AppendPrepared(ctx context.Context, tx *Tx, s audit.Sealable) (audit.Record, error) {
	tenant := string(s.Tenant())
	head, ok := tx.heads.get(tenant)
	if !ok {
		var err error
		if head, err = readAuditHead(ctx, tx, tenant); err != nil {
			return audit.Record{}, err
		}
	}
	rec, err := s.Seal(head.seq+1, head.hash)
	if err != nil {
		return audit.Record{}, err
	}
	var conv, session any // NULL unless the record names a conversation
	if p := rec.Provenance; p != nil && p.ConversationID != "" {
		conv, session = p.ConversationID, p.SessionID
	}
	if err := tx.ExecLater(ctx, `INSERT INTO audit_records (tenant, seq, id, at, action, resource, outcome, body, prev_hash, hash, conversation_id, session_id)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		tenant, rec.Seq, rec.ID, rec.Outcome.At, rec.Outcome.Action, rec.Outcome.Resource, string(rec.Outcome.Outcome),
		string(rec.Body), rec.PrevHash, rec.Hash, conv, session); err != nil {
		return audit.Record{}, fmt.Errorf("store: audit append: %w", err)
	}
	head.seq, head.hash = rec.Seq, rec.Hash
	if tx.heads != nil {
		(*tx.heads)[tenant] = head // written once, before the commit
		return rec, nil
	}
	if err := writeAuditHead(ctx, tx, tenant, head); err != nil {
		return audit.Record{}, err
	}
	return rec, nil
}

// auditHead is where a tenant's chain ends; row says whether its
// audit_heads row exists.
type auditHead struct {
	seq  int64
	hash string
	row  bool
}

// auditHeads are the chains a group commit's transaction appended to, with
// their new heads. The head rows are written once, when the transaction is
// about to commit, instead of once per record: the appends of a batch read
// and write a tenant's head row once. The cached heads stay exact because
// nothing else can append meanwhile: on SQLite the transaction holds the
// write lock from BEGIN; on Postgres a tenant's head row is locked
// (lockAuditHead) until the commit, before the batch's transactions run
// when one of them names that tenant (lockHeads, or checkHeads when the
// process knows the head: the check locks the row and fails the pass
// unless it holds that head), else at its first append. Transactions
// outside a group commit have none (nil) and write the head on each
// append.
type auditHeads map[string]auditHead

func (h *auditHeads) get(tenant string) (auditHead, bool) {
	if h == nil {
		return auditHead{}, false
	}
	head, ok := (*h)[tenant]
	return head, ok
}

func (h auditHeads) clone() auditHeads { return maps.Clone(h) }

// write stores every cached head in tx; nil writes nothing.
func (h *auditHeads) write(ctx context.Context, tx *Tx) error {
	if h == nil {
		return nil
	}
	for tenant, head := range *h {
		if err := writeAuditHead(ctx, tx, tenant, head); err != nil {
			return err
		}
	}
	return nil
}

func writeAuditHead(ctx context.Context, tx *Tx, tenant string, head auditHead) error {
	q := `UPDATE audit_heads SET seq = ?, hash = ? WHERE tenant = ?`
	if !head.row {
		q = `INSERT INTO audit_heads (seq, hash, tenant) VALUES (?, ?, ?)`
	}
	if err := tx.ExecLater(ctx, q, head.seq, head.hash, tenant); err != nil {
		return fmt.Errorf("store: audit head: %w", err)
	}
	return nil
}

// readAuditHead reads (and on Postgres locks) the head of tenant's chain.
// A missing head, the tenant's first record or a head row that was
// removed, is rebuilt from the chain's last record, so the chain goes on
// where it ends instead of failing on seq 1 (the removal itself is what a
// checkpoint catches).
func readAuditHead(ctx context.Context, tx *Tx, tenant string) (auditHead, error) {
	seq, prev, row, err := lockAuditHead(ctx, tx, tenant)
	if err != nil {
		return auditHead{}, err
	}
	if seq == 0 {
		var lastSeq int64
		var lastHash string
		err := tx.QueryRow(ctx, `SELECT seq, hash FROM audit_records WHERE tenant = ? ORDER BY seq DESC LIMIT 1`, tenant).Scan(&lastSeq, &lastHash)
		switch {
		case err == nil:
			seq, prev = lastSeq, lastHash
		case !errors.Is(err, sql.ErrNoRows):
			return auditHead{}, fmt.Errorf("store: audit head: %w", err)
		}
	}
	return auditHead{seq: seq, hash: prev, row: row}, nil
}

// lockAuditHead reads the head of tenant's chain so that no other append
// to it can run until tx ends; headRow says whether the head row exists
// (if not, seq is 0 and the caller inserts it).
//
// On Postgres the head row is created if missing and row-locked by a no-op
// DO UPDATE, so appends to one chain never fork. SQLite's transaction holds
// the database write lock from BEGIN (IMMEDIATE), so a plain read is
// already exclusive, and costs a fraction of the upsert.
func lockAuditHead(ctx context.Context, tx *Tx, tenant string) (seq int64, prev string, headRow bool, err error) {
	if tx.Dialect() == SQLite {
		err = tx.QueryRow(ctx, `SELECT seq, hash FROM audit_heads WHERE tenant = ?`, tenant).Scan(&seq, &prev)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return 0, audit.Genesis, false, nil
		case err != nil:
			return 0, "", false, fmt.Errorf("store: audit head: %w", err)
		}
		return seq, prev, true, nil
	}
	if err := tx.ScanRow(ctx, []any{&seq, &prev}, `INSERT INTO audit_heads (tenant, seq, hash) VALUES (?, 0, ?)
		ON CONFLICT (tenant) DO UPDATE SET tenant = excluded.tenant RETURNING seq, hash`,
		tenant, audit.Genesis); err != nil {
		return 0, "", false, fmt.Errorf("store: audit head: %w", err)
	}
	return seq, prev, true, nil
}

// Tenants implements audit.Source: every tenant that has records or a head.
func (l *AuditLog) Tenants(ctx context.Context) ([]contract.TenantSlot, error) {
	// From the records themselves, so a removed head cannot hide a chain;
	// and from the heads, so a chain whose every record is gone is found.
	return AppendRows(nil, QueryRows(ctx, l.db, "audit tenants", ScanValue[contract.TenantSlot],
		`SELECT DISTINCT tenant FROM audit_records UNION SELECT tenant FROM audit_heads ORDER BY 1`))
}

// Head implements audit.Source.
func (l *AuditLog) Head(ctx context.Context, t contract.TenantSlot) (int64, string, error) {
	seq, hash, _, err := l.FindHead(ctx, t)
	return seq, hash, err
}

// FindHead implements audit.HeadFinder: found is false when the tenant has
// no head row.
func (l *AuditLog) FindHead(ctx context.Context, t contract.TenantSlot) (int64, string, bool, error) {
	return findAuditHead(ctx, l.db, t)
}

func findAuditHead(ctx context.Context, q Querier, t contract.TenantSlot) (int64, string, bool, error) {
	var seq int64
	var hash string
	err := q.QueryRow(ctx, `SELECT seq, hash FROM audit_heads WHERE tenant = ?`, string(t)).Scan(&seq, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, audit.Genesis, false, nil
	}
	if err != nil {
		return 0, "", false, fmt.Errorf("store: audit head: %w", err)
	}
	return seq, hash, true, nil
}

// Scan implements audit.Source: the tenant's rows in chain order.
func (l *AuditLog) Scan(ctx context.Context, t contract.TenantSlot, fn func(audit.Row) error) error {
	return scanAudit(ctx, l.db, t, fn)
}

func scanAudit(ctx context.Context, q Querier, t contract.TenantSlot, fn func(audit.Row) error) error {
	return EachRow(QueryRows(ctx, q, "audit scan", scanAuditRow,
		`SELECT `+rowColumns+` FROM audit_records WHERE tenant = ? ORDER BY seq`, string(t)), fn)
}

var _ audit.Snapshotter = (*AuditLog)(nil)

// Snapshot implements audit.Snapshotter: fn reads the chains as of one
// moment, in a read-only transaction on a reader connection (on SQLite a
// WAL snapshot; on Postgres REPEATABLE READ), so appends that commit
// meanwhile are not half seen. It holds no lock a writer waits for.
func (l *AuditLog) Snapshot(ctx context.Context, fn func(audit.Source) error) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if l.db.dialect == Postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := l.db.r.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("store: audit snapshot: %w", err)
	}
	defer tx.Rollback()
	return fn(snapshotLog{readTx{tx, l.db.dialect}})
}

// snapshotLog is the audit.Source of one read transaction.
type snapshotLog struct{ q readTx }

func (s snapshotLog) Tenants(ctx context.Context) ([]contract.TenantSlot, error) {
	return AppendRows(nil, QueryRows(ctx, s.q, "audit tenants", ScanValue[contract.TenantSlot],
		`SELECT DISTINCT tenant FROM audit_records UNION SELECT tenant FROM audit_heads ORDER BY 1`))
}

func (s snapshotLog) Head(ctx context.Context, t contract.TenantSlot) (int64, string, error) {
	seq, hash, _, err := findAuditHead(ctx, s.q, t)
	return seq, hash, err
}

func (s snapshotLog) FindHead(ctx context.Context, t contract.TenantSlot) (int64, string, bool, error) {
	return findAuditHead(ctx, s.q, t)
}

func (s snapshotLog) Scan(ctx context.Context, t contract.TenantSlot, fn func(audit.Row) error) error {
	return scanAudit(ctx, s.q, t, fn)
}

// readTx is a Querier over a read-only *sql.Tx.
type readTx struct {
	tx *sql.Tx
	d  Dialect
}

func (r readTx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return nil, errors.New("store: a read-only transaction takes no writes")
}

func (r readTx) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return r.tx.QueryContext(ctx, r.d.Rebind(query), args...)
}

func (r readTx) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return r.tx.QueryRowContext(ctx, r.d.Rebind(query), args...)
}

func (r readTx) Dialect() Dialect { return r.d }

// AuditFilter is audit.Filter: which records Tail returns.
type AuditFilter = audit.Filter

// Tail returns the newest records matching f, newest first. Records are
// decoded from their hashed bodies, never from the index columns.
func (l *AuditLog) Tail(ctx context.Context, f AuditFilter) ([]audit.Record, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	q := Statement{SQL: `SELECT body, prev_hash, hash FROM audit_records WHERE 1 = 1`}
	q.AndEq("tenant", string(f.Tenant))
	q.AndEq("action", f.Action)
	q.AndEq("resource", f.Resource)
	q.Add(` ORDER BY id DESC LIMIT ?`, f.Limit)
	return AppendRows(nil, QueryRows(ctx, l.db, "audit tail", scanRecord, q.SQL, q.Args...))
}

// scanRecord scans a row of body, prev_hash and hash into the record the
// body holds.
func scanRecord(row Scanner) (audit.Record, error) {
	var body, prev, hash string
	if err := row.Scan(&body, &prev, &hash); err != nil {
		return audit.Record{}, err
	}
	rec, err := audit.Decode([]byte(body))
	rec.PrevHash, rec.Hash = prev, hash
	return rec, err
}

// Record returns the audit record with id, decoded from its hashed body;
// found is false when there is none.
func (l *AuditLog) Record(ctx context.Context, id string) (rec audit.Record, found bool, err error) {
	rec, err = scanRecord(l.db.QueryRow(ctx, `SELECT body, prev_hash, hash FROM audit_records WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return audit.Record{}, false, nil
	}
	if err != nil {
		return audit.Record{}, false, fmt.Errorf("store: audit record: %w", err)
	}
	return rec, true, nil
}
