// Package shimsql is the shim gate's SQL: shim.Store (provisions, context
// entries, the once-per-conversation marks, receipts), shim.TurnRecorder and
// the memory tables of shim/memory, over the store core, on SQLite and
// Postgres. The spend ledger is shim/ledger's.
package shimsql

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/store"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
)

//go:embed migrations/*.sql
var migrations embed.FS

func init() { store.RegisterMigrations("shimsql", migrations, "migrations") }

// Store is the shim gate's tables (migration 300_shim); it implements
// shim.Store. Every statement filters on the tenant.
type Store struct{ db *store.DB }

// New returns the adapter over db.
func New(db *store.DB) *Store { return &Store{db: db} }

var _ shim.Store = (*Store)(nil)

// shimTable is one CAS-versioned document table.
type shimTable struct{ shim.DocTable }

var (
	provisionTable = shimTable{shim.ProvisionTable}
	contextTable   = shimTable{shim.ContextTable}
)

func (t shimTable) get(ctx context.Context, db *store.DB, tenant contract.TenantSlot, key string) ([]byte, int64, error) {
	var doc string
	var v int64
	err := db.QueryRow(ctx, t.GetSQL(), string(tenant), key).Scan(&doc, &v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, 0, contract.NotFoundf(shim.CodeNotFound, "shim: no %s %q", t.What, key)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: get %s: %w", t.Name, err)
	}
	return []byte(doc), v, nil
}

func (t shimTable) create(ctx context.Context, db *store.DB, tenant contract.TenantSlot, key string, doc []byte) error {
	_, err := db.Exec(ctx, t.InsertSQL(), string(tenant), key, string(doc), store.Micros(db.Now()))
	if store.IsUniqueViolation(err) {
		return contract.Conflictf(shim.CodeExists, "shim: %s %q exists", t.What, key)
	}
	if err != nil {
		return fmt.Errorf("store: create %s: %w", t.Name, err)
	}
	return nil
}

func (t shimTable) update(ctx context.Context, db *store.DB, tenant contract.TenantSlot, key string, doc []byte, ifVersion int64) error {
	return t.casExec(ctx, db, "update", tenant, key, ifVersion,
		t.UpdateSQL(), string(doc), store.Micros(db.Now()), string(tenant), key, ifVersion)
}

func (t shimTable) delete(ctx context.Context, db *store.DB, tenant contract.TenantSlot, key string, ifVersion int64) error {
	return t.casExec(ctx, db, "delete", tenant, key, ifVersion,
		t.DeleteSQL(), string(tenant), key, ifVersion)
}

// casExec runs op, a statement on the document key conditional on its
// version being ifVersion. When it changes no row, it tells a not_found
// from a version conflict.
func (t shimTable) casExec(ctx context.Context, db *store.DB, op string, tenant contract.TenantSlot, key string, ifVersion int64, query string, args ...any) error {
	n, err := store.RowsAffected(db.Exec(ctx, query, args...))
	if err != nil {
		return fmt.Errorf("store: %s %s: %w", op, t.Name, err)
	}
	if n != 0 {
		return nil
	}
	_, v, err := t.get(ctx, db, tenant, key)
	if err != nil {
		return err
	}
	return contract.Conflictf(shim.CodeRevisionMismatch, "shim: %s %q is at version %d, not %d", t.What, key, v, ifVersion)
}

func decodeDoc[T any](doc []byte, what string) (T, error) {
	var v T
	if err := json.Unmarshal(doc, &v); err != nil {
		return v, fmt.Errorf("store: decode %s: %w", what, err)
	}
	return v, nil
}

func encodeDoc(v any) ([]byte, error) {
	if w, ok := v.(audit.CanonicalWriter); ok { // a receipt, once a request
		var b bytes.Buffer
		w.WriteCanonicalJSON(&b)
		return b.Bytes(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("store: encode: %w", err)
	}
	return b, nil
}

// shimDocs is a shimTable of one Go type: the JSON document and its
// version column around the table's CAS statements.
type shimDocs[T any] struct {
	shimTable
	key     func(*T) string
	version func(*T) *int64
}

var (
	provisionDocs = shimDocs[shim.Provision]{provisionTable,
		func(p *shim.Provision) string { return p.ID }, func(p *shim.Provision) *int64 { return &p.Version }}
	contextDocs = shimDocs[shim.ContextEntry]{contextTable,
		func(e *shim.ContextEntry) string { return e.Ref }, func(e *shim.ContextEntry) *int64 { return &e.Version }}
)

func (d shimDocs[T]) listDocs(ctx context.Context, db *store.DB, tenant contract.TenantSlot) ([]T, error) {
	return store.AppendRows([]T{}, store.QueryRows(ctx, db, "list "+d.Name, d.scanDoc, d.ListSQL(), string(tenant)))
}

// scanDoc scans a row of a document and its version into a T.
func (d shimDocs[T]) scanDoc(row store.Scanner) (T, error) {
	var x T
	var doc string
	var v int64
	if err := row.Scan(&doc, &v); err != nil {
		return x, err
	}
	err := json.Unmarshal([]byte(doc), &x)
	*d.version(&x) = v
	return x, err
}

func (d shimDocs[T]) getDoc(ctx context.Context, db *store.DB, tenant contract.TenantSlot, key string) (T, error) {
	doc, v, err := d.get(ctx, db, tenant, key)
	if err != nil {
		var zero T
		return zero, err
	}
	x, err := decodeDoc[T](doc, d.What)
	*d.version(&x) = v
	return x, err
}

func (d shimDocs[T]) createDoc(ctx context.Context, db *store.DB, tenant contract.TenantSlot, x T) (T, error) {
	*d.version(&x) = 1
	doc, err := encodeDoc(x)
	if err == nil {
		err = d.create(ctx, db, tenant, d.key(&x), doc)
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return x, nil
}

func (d shimDocs[T]) updateDoc(ctx context.Context, db *store.DB, tenant contract.TenantSlot, x T, ifVersion int64) (T, error) {
	*d.version(&x) = ifVersion + 1
	doc, err := encodeDoc(x)
	if err == nil {
		err = d.update(ctx, db, tenant, d.key(&x), doc, ifVersion)
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return x, nil
}

// ListProvisions implements shim.Store.
func (s *Store) ListProvisions(ctx context.Context, tenant contract.TenantSlot) ([]shim.Provision, error) {
	return provisionDocs.listDocs(ctx, s.db, tenant)
}

// GetProvision implements shim.Store.
func (s *Store) GetProvision(ctx context.Context, tenant contract.TenantSlot, id string) (shim.Provision, error) {
	return provisionDocs.getDoc(ctx, s.db, tenant, id)
}

// CreateProvision implements shim.Store.
func (s *Store) CreateProvision(ctx context.Context, tenant contract.TenantSlot, p shim.Provision) (shim.Provision, error) {
	return provisionDocs.createDoc(ctx, s.db, tenant, p)
}

// UpdateProvision implements shim.Store.
func (s *Store) UpdateProvision(ctx context.Context, tenant contract.TenantSlot, p shim.Provision, ifVersion int64) (shim.Provision, error) {
	return provisionDocs.updateDoc(ctx, s.db, tenant, p, ifVersion)
}

// DeleteProvision implements shim.Store.
func (s *Store) DeleteProvision(ctx context.Context, tenant contract.TenantSlot, id string, ifVersion int64) error {
	return provisionTable.delete(ctx, s.db, tenant, id, ifVersion)
}

// ListContext implements shim.Store.
func (s *Store) ListContext(ctx context.Context, tenant contract.TenantSlot) ([]shim.ContextEntry, error) {
	return contextDocs.listDocs(ctx, s.db, tenant)
}

// GetContext implements shim.Store.
func (s *Store) GetContext(ctx context.Context, tenant contract.TenantSlot, ref string) (shim.ContextEntry, error) {
	return contextDocs.getDoc(ctx, s.db, tenant, ref)
}

// CreateContext implements shim.Store.
func (s *Store) CreateContext(ctx context.Context, tenant contract.TenantSlot, e shim.ContextEntry) (shim.ContextEntry, error) {
	return contextDocs.createDoc(ctx, s.db, tenant, e)
}

// UpdateContext implements shim.Store.
func (s *Store) UpdateContext(ctx context.Context, tenant contract.TenantSlot, e shim.ContextEntry, ifVersion int64) (shim.ContextEntry, error) {
	return contextDocs.updateDoc(ctx, s.db, tenant, e, ifVersion)
}

// DeleteContext implements shim.Store.
func (s *Store) DeleteContext(ctx context.Context, tenant contract.TenantSlot, ref string, ifVersion int64) error {
	return contextTable.delete(ctx, s.db, tenant, ref, ifVersion)
}

// MarkShimmed implements shim.Store with one insert-if-absent.
func (s *Store) MarkShimmed(ctx context.Context, tenant contract.TenantSlot, conversation, provision string, version int64, at time.Time) (bool, error) {
	n, err := store.RowsAffected(s.db.Exec(ctx, shim.MarkShimmedSQL, string(tenant), conversation, provision, version, store.Micros(at)))
	if err != nil {
		return false, fmt.Errorf("store: mark shimmed: %w", err)
	}
	return n == 1, nil
}

// Shimmed implements shim.Store.
func (s *Store) Shimmed(ctx context.Context, tenant contract.TenantSlot, conversation, provision string) (bool, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM shim_ledger WHERE tenant = ? AND conversation = ? AND provision = ?`,
		string(tenant), conversation, provision).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: shimmed: %w", err)
	}
	return n > 0, nil
}

var _ shim.TurnRecorder = (*Store)(nil)

// RecordTurn implements shim.TurnRecorder: the audit record, the receipt,
// the settlement or release of the gateway reservations it lists as still
// to close, and the memory writes in one transaction (the group commit on
// SQLite). The caller's cancellation is ignored, as for Append.
func (s *Store) RecordTurn(ctx context.Context, e audit.Entry, rc *shim.Receipt, memory []shim.MemoryWrite) error {
	ctx = context.WithoutCancel(ctx)
	tenant := e.Outcome.Identity.TenantSlot
	// What does not depend on the chain's head is done here, before the
	// transaction (on SQLite, the group commit's one writer): the entry's
	// check and canonical payload, and the receipt's document, which names
	// the record's id.
	sealable, err := audit.Prepare(e, contract.NewID(contract.PrefixEvent))
	if err != nil {
		return err
	}
	rc.AuditID = sealable.ID
	doc, err := encodeDoc(*rc)
	if err != nil {
		return err
	}
	// The gateway's settlements: the receipt carries those the spend
	// journal writes after the commit; the others join the commit.
	var closes ledger.TurnCloses
	if rc.Spend != nil {
		closes = ledger.CloseTurn(rc.Spend.Attempts, s.db.Now())
	}
	journal := closes.Journal()
	var memErr error
	err = s.db.InTxFor(ctx, tenant, func(tx *store.Tx) error {
		memErr = nil
		if _, err := store.AppendPrepared(ctx, tx, sealable); err != nil {
			return err
		}
		if err := insertReceiptLedger(ctx, tx, tenant, rc, doc, journal); err != nil {
			return err
		}
		if err := closes.Commit(ctx, tx); err != nil {
			return err
		}
		if len(memory) == 0 {
			return nil
		}
		if !tx.Savepoints() {
			// A Postgres group commit's first pass: a failed memory write
			// fails the pass, and the batch runs again with savepoints.
			for _, w := range memory {
				if err := recordMemory(ctx, tx, w); err != nil {
					return err
				}
			}
			return nil
		}
		// A failed memory write rolls back to here and leaves the receipt
		// and its audit record to commit.
		if _, err := tx.Exec(ctx, "SAVEPOINT caduceus_memory"); err != nil {
			return err
		}
		for _, w := range memory {
			if memErr = recordMemory(ctx, tx, w); memErr != nil {
				if _, err := tx.Exec(ctx, "ROLLBACK TO caduceus_memory"); err != nil {
					return err
				}
				break
			}
		}
		_, err = tx.Exec(ctx, "RELEASE caduceus_memory")
		return err
	})
	if err != nil {
		return err
	}
	closes.Committed(s.db, tenant, rc.ID)
	if memErr != nil {
		return fmt.Errorf("%w: %v", shim.ErrMemoryNotRecorded, memErr)
	}
	return nil
}

// AddReceipt implements shim.Store.
func (s *Store) AddReceipt(ctx context.Context, tenant contract.TenantSlot, r shim.Receipt) error {
	return addReceipt(ctx, s.db, tenant, r)
}

func addReceipt(ctx context.Context, q store.Querier, tenant contract.TenantSlot, r shim.Receipt) error {
	doc, err := encodeDoc(r)
	if err != nil {
		return err
	}
	return insertReceiptLedger(ctx, q, tenant, &r, doc, nil)
}

// insertReceiptLedger inserts a receipt carrying the deferred closes ledger
// (JSON; nil: none).
func insertReceiptLedger(ctx context.Context, q store.Querier, tenant contract.TenantSlot, rc *shim.Receipt, doc, ledger []byte) error {
	var l, resp sql.NullString
	if ledger != nil {
		l = sql.NullString{String: string(ledger), Valid: true}
	}
	if rc.ResponseID != "" {
		resp = sql.NullString{String: rc.ResponseID, Valid: true}
	}
	err := store.ExecLater(ctx, q, `INSERT INTO shim_receipts (tenant, id, at, decision, doc, ledger, response_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		string(tenant), rc.ID, rc.At, string(rc.Decision), string(doc), l, resp)
	if store.IsUniqueViolation(err) {
		return contract.Conflictf(shim.CodeExists, "shim: receipt %q exists", rc.ID)
	}
	if err != nil {
		return fmt.Errorf("store: add receipt: %w", err)
	}
	return nil
}

// ReceiptOfResponse implements shim.Store.
func (s *Store) ReceiptOfResponse(ctx context.Context, tenant contract.TenantSlot, responseID string) (shim.Receipt, error) {
	r, err := store.ScanJSON[shim.Receipt](s.db.QueryRow(ctx, shim.ReceiptOfResponseSQL, string(tenant), responseID))
	if errors.Is(err, sql.ErrNoRows) {
		return shim.Receipt{}, contract.NotFoundf(shim.CodeNotFound, "shim: no response %q", responseID)
	}
	if err != nil {
		return shim.Receipt{}, fmt.Errorf("store: receipt of response: %w", err)
	}
	return r, nil
}

// ListReceipts implements shim.Store.
func (s *Store) ListReceipts(ctx context.Context, tenant contract.TenantSlot, limit int, before string) ([]shim.Receipt, error) {
	q, args := shim.ReceiptsQuery(tenant, limit, before)
	return store.AppendRows([]shim.Receipt{}, store.QueryRows(ctx, s.db, "list receipts", store.ScanJSON[shim.Receipt], q, args...))
}
