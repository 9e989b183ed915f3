// Package shimstore is the shim gate's store written once, on the store's
// port (store/port): shim.Store (provisions and context entries as JSON
// documents with a CAS version, the once-per-conversation marks, receipts)
// and memory.Store (entities, rule outcomes, sync marks), in the tables of
// shim/shimsql's migrations. The same code runs on SQLite and Postgres
// (store.DB.Port, under `caduceus serve`, where shim/shimsql adds the
// group-committed turn) and on D1 (the Worker, edge).
package shimstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/store/port"
)

// Store is the shim's store (shim.Store) on the port: provisions and
// context entries as JSON documents under (tenant, key) with a version
// column for compare-and-set, the once-per-conversation ledger, and
// receipts.
type Store struct {
	db  port.DB
	now func() time.Time
}

// New returns the shim store on db; now stamps updated_at (nil:
// time.Now).
func New(db port.DB, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, now: now}
}

var _ shim.Store = (*Store)(nil)

// docTable is one of the two versioned document tables.
type docTable struct{ shim.DocTable }

var (
	provisions = docTable{shim.ProvisionTable}
	contexts   = docTable{shim.ContextTable}
)

func (t docTable) get(ctx context.Context, db port.DB, tenant contract.TenantSlot, key string, into any) (int64, error) {
	r, found, err := port.One(ctx, db, t.GetSQL(), string(tenant), key)
	if err != nil {
		return 0, fmt.Errorf("shimstore: get %s: %w", t.What, err)
	}
	if !found {
		return 0, contract.NotFoundf(shim.CodeNotFound, "shim: no %s %q", t.What, key)
	}
	if err := json.Unmarshal([]byte(r.Str(0)), into); err != nil {
		return 0, fmt.Errorf("shimstore: decode %s: %w", t.What, err)
	}
	return r.Int(1), nil
}

func (t docTable) list(ctx context.Context, db port.DB, tenant contract.TenantSlot, each func(doc []byte, version int64) error) error {
	rows, err := db.Query(ctx, t.ListSQL(), string(tenant))
	if err != nil {
		return fmt.Errorf("shimstore: list %s: %w", t.What, err)
	}
	for _, r := range rows {
		if err := each([]byte(r.Str(0)), r.Int(1)); err != nil {
			return fmt.Errorf("shimstore: decode %s: %w", t.What, err)
		}
	}
	return nil
}

// create inserts version 1; the (tenant, key) primary key refuses a second.
func (t docTable) create(ctx context.Context, s *Store, tenant contract.TenantSlot, key string, doc any) error {
	b, err := Encode(doc)
	if err != nil {
		return err
	}
	n, err := s.db.Exec(ctx, t.InsertSQL()+` ON CONFLICT DO NOTHING`, string(tenant), key, string(b), port.Micros(s.now()))
	if err != nil {
		return fmt.Errorf("shimstore: create %s: %w", t.What, err)
	}
	if n == 0 {
		return contract.Conflictf(shim.CodeExists, "shim: %s %q exists", t.What, key)
	}
	return nil
}

// cas runs a conditional UPDATE or DELETE on (tenant, key, version); when it
// changed nothing, one more read tells not_found from a version conflict.
func (t docTable) cas(ctx context.Context, s *Store, op string, tenant contract.TenantSlot, key string, ifVersion int64, query string, args ...any) error {
	n, err := s.db.Exec(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("shimstore: %s %s: %w", op, t.What, err)
	}
	if n != 0 {
		return nil
	}
	var ignored json.RawMessage
	v, err := t.get(ctx, s.db, tenant, key, &ignored)
	if err != nil {
		return err
	}
	return contract.Conflictf(shim.CodeRevisionMismatch, "shim: %s %q is at version %d, not %d", t.What, key, v, ifVersion)
}

func (t docTable) update(ctx context.Context, s *Store, tenant contract.TenantSlot, key string, doc any, ifVersion int64) error {
	b, err := Encode(doc)
	if err != nil {
		return err
	}
	return t.cas(ctx, s, "update", tenant, key, ifVersion,
		t.UpdateSQL(), string(b), port.Micros(s.now()), string(tenant), key, ifVersion)
}

func (t docTable) delete(ctx context.Context, s *Store, tenant contract.TenantSlot, key string, ifVersion int64) error {
	return t.cas(ctx, s, "delete", tenant, key, ifVersion,
		t.DeleteSQL(), string(tenant), key, ifVersion)
}

// Encode is a document's stored JSON: a receipt writes its canonical JSON
// itself, as the server's store keeps it.
func Encode(v any) ([]byte, error) {
	if w, ok := v.(audit.CanonicalWriter); ok {
		var b bytes.Buffer
		b.Grow(audit.PayloadSize)
		w.WriteCanonicalJSON(&b)
		return b.Bytes(), nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("shimstore: encode: %w", err)
	}
	return b, nil
}

// docs are the documents of one table as values of T, with T's key and
// version fields.
type docs[T any] struct {
	docTable
	key     func(*T) string
	version func(*T) *int64
}

var (
	provisionDocs = docs[shim.Provision]{provisions,
		func(p *shim.Provision) string { return p.ID }, func(p *shim.Provision) *int64 { return &p.Version }}
	contextDocs = docs[shim.ContextEntry]{contexts,
		func(e *shim.ContextEntry) string { return e.Ref }, func(e *shim.ContextEntry) *int64 { return &e.Version }}
)

func (d docs[T]) listAll(ctx context.Context, s *Store, tenant contract.TenantSlot) ([]T, error) {
	out := []T{}
	err := d.list(ctx, s.db, tenant, func(doc []byte, v int64) error {
		var x T
		err := json.Unmarshal(doc, &x)
		*d.version(&x) = v
		out = append(out, x)
		return err
	})
	return out, err
}

func (d docs[T]) getOne(ctx context.Context, s *Store, tenant contract.TenantSlot, key string) (T, error) {
	var x T
	v, err := d.get(ctx, s.db, tenant, key, &x)
	*d.version(&x) = v
	return x, err
}

func (d docs[T]) createOne(ctx context.Context, s *Store, tenant contract.TenantSlot, x T) (T, error) {
	*d.version(&x) = 1
	if err := d.create(ctx, s, tenant, d.key(&x), x); err != nil {
		var zero T
		return zero, err
	}
	return x, nil
}

func (d docs[T]) updateOne(ctx context.Context, s *Store, tenant contract.TenantSlot, x T, ifVersion int64) (T, error) {
	*d.version(&x) = ifVersion + 1
	if err := d.update(ctx, s, tenant, d.key(&x), x, ifVersion); err != nil {
		var zero T
		return zero, err
	}
	return x, nil
}

// ListProvisions implements shim.Store.
func (s *Store) ListProvisions(ctx context.Context, tenant contract.TenantSlot) ([]shim.Provision, error) {
	return provisionDocs.listAll(ctx, s, tenant)
}

// ListProvisionPair implements shim.ProvisionPairLister: one statement.
func (s *Store) ListProvisionPair(ctx context.Context, a, b contract.TenantSlot) ([]shim.Provision, []shim.Provision, error) {
	rows, err := s.db.Query(ctx, `SELECT tenant, doc, version FROM `+provisions.Name+` WHERE tenant IN (?, ?) ORDER BY tenant, `+provisions.Key, string(a), string(b))
	if err != nil {
		return nil, nil, fmt.Errorf("shimstore: list %s: %w", provisions.What, err)
	}
	ofA, ofB := []shim.Provision{}, []shim.Provision{}
	for _, r := range rows {
		var p shim.Provision
		if err := json.Unmarshal([]byte(r.Str(1)), &p); err != nil {
			return nil, nil, fmt.Errorf("shimstore: decode %s: %w", provisions.What, err)
		}
		p.Version = r.Int(2)
		switch contract.TenantSlot(r.Str(0)) {
		case a:
			ofA = append(ofA, p)
		case b:
			ofB = append(ofB, p)
		}
	}
	return ofA, ofB, nil
}

var _ shim.ProvisionPairLister = (*Store)(nil)

// GetProvision implements shim.Store.
func (s *Store) GetProvision(ctx context.Context, tenant contract.TenantSlot, id string) (shim.Provision, error) {
	return provisionDocs.getOne(ctx, s, tenant, id)
}

// CreateProvision implements shim.Store.
func (s *Store) CreateProvision(ctx context.Context, tenant contract.TenantSlot, p shim.Provision) (shim.Provision, error) {
	return provisionDocs.createOne(ctx, s, tenant, p)
}

// UpdateProvision implements shim.Store.
func (s *Store) UpdateProvision(ctx context.Context, tenant contract.TenantSlot, p shim.Provision, ifVersion int64) (shim.Provision, error) {
	return provisionDocs.updateOne(ctx, s, tenant, p, ifVersion)
}

// DeleteProvision implements shim.Store.
func (s *Store) DeleteProvision(ctx context.Context, tenant contract.TenantSlot, id string, ifVersion int64) error {
	return provisions.delete(ctx, s, tenant, id, ifVersion)
}

// ListContext implements shim.Store.
func (s *Store) ListContext(ctx context.Context, tenant contract.TenantSlot) ([]shim.ContextEntry, error) {
	return contextDocs.listAll(ctx, s, tenant)
}

// GetContext implements shim.Store.
func (s *Store) GetContext(ctx context.Context, tenant contract.TenantSlot, ref string) (shim.ContextEntry, error) {
	return contextDocs.getOne(ctx, s, tenant, ref)
}

// CreateContext implements shim.Store.
func (s *Store) CreateContext(ctx context.Context, tenant contract.TenantSlot, e shim.ContextEntry) (shim.ContextEntry, error) {
	return contextDocs.createOne(ctx, s, tenant, e)
}

// UpdateContext implements shim.Store.
func (s *Store) UpdateContext(ctx context.Context, tenant contract.TenantSlot, e shim.ContextEntry, ifVersion int64) (shim.ContextEntry, error) {
	return contextDocs.updateOne(ctx, s, tenant, e, ifVersion)
}

// DeleteContext implements shim.Store.
func (s *Store) DeleteContext(ctx context.Context, tenant contract.TenantSlot, ref string, ifVersion int64) error {
	return contexts.delete(ctx, s, tenant, ref, ifVersion)
}

// MarkShimmed implements shim.Store: an insert that does nothing when the
// (tenant, conversation, provision) mark is there.
func (s *Store) MarkShimmed(ctx context.Context, tenant contract.TenantSlot, conversation, provision string, version int64, at time.Time) (bool, error) {
	n, err := s.db.Exec(ctx, shim.MarkShimmedSQL, string(tenant), conversation, provision, version, port.Micros(at))
	if err != nil {
		return false, fmt.Errorf("shimstore: mark shimmed: %w", err)
	}
	return n == 1, nil
}

// Shimmed implements shim.Store.
func (s *Store) Shimmed(ctx context.Context, tenant contract.TenantSlot, conversation, provision string) (bool, error) {
	_, found, err := port.One(ctx, s.db, `SELECT 1 FROM shim_ledger WHERE tenant = ? AND conversation = ? AND provision = ?`,
		string(tenant), conversation, provision)
	if err != nil {
		return false, fmt.Errorf("shimstore: shimmed: %w", err)
	}
	return found, nil
}

// AddReceipt implements shim.Store.
func (s *Store) AddReceipt(ctx context.Context, tenant contract.TenantSlot, r shim.Receipt) error {
	st, err := InsertReceipt(tenant, r)
	if err != nil {
		return err
	}
	n, err := s.db.Exec(ctx, st.SQL+` ON CONFLICT DO NOTHING`, st.Args...)
	if err != nil {
		return fmt.Errorf("shimstore: add receipt: %w", err)
	}
	if n == 0 {
		return ErrReceiptExists(r.ID)
	}
	return nil
}

// ErrReceiptExists is the conflict of a receipt id already stored.
func ErrReceiptExists(id string) error {
	return contract.Conflictf(shim.CodeExists, "shim: receipt %q exists", id)
}

// InsertReceipt is the statement inserting a receipt as its canonical JSON
// (with no ledger); one already there under its id makes it fail with a
// unique-constraint error (port.ErrUnique).
func InsertReceipt(tenant contract.TenantSlot, r shim.Receipt) (port.Statement, error) {
	doc, err := Encode(r)
	if err != nil {
		return port.Statement{}, err
	}
	var resp any
	if r.ResponseID != "" {
		resp = r.ResponseID
	}
	return port.Statement{SQL: `INSERT INTO shim_receipts (tenant, id, at, decision, doc, response_id) VALUES (?, ?, ?, ?, ?, ?)`, Args: []any{string(tenant), r.ID, r.At, string(r.Decision), string(doc), resp}}, nil
}

// ReceiptOfResponse implements shim.Store.
func (s *Store) ReceiptOfResponse(ctx context.Context, tenant contract.TenantSlot, responseID string) (shim.Receipt, error) {
	r, found, err := port.One(ctx, s.db, shim.ReceiptOfResponseSQL, string(tenant), responseID)
	if err != nil {
		return shim.Receipt{}, fmt.Errorf("shimstore: receipt of response: %w", err)
	}
	if !found {
		return shim.Receipt{}, contract.NotFoundf(shim.CodeNotFound, "shim: no response %q", responseID)
	}
	var rc shim.Receipt
	if err := json.Unmarshal([]byte(r.Str(0)), &rc); err != nil {
		return shim.Receipt{}, fmt.Errorf("shimstore: decode receipt: %w", err)
	}
	return rc, nil
}

// ListReceipts implements shim.Store.
func (s *Store) ListReceipts(ctx context.Context, tenant contract.TenantSlot, limit int, before string) ([]shim.Receipt, error) {
	q, args := shim.ReceiptsQuery(tenant, limit, before)
	rows, err := s.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("shimstore: list receipts: %w", err)
	}
	out := make([]shim.Receipt, len(rows))
	for i, r := range rows {
		if err := json.Unmarshal([]byte(r.Str(0)), &out[i]); err != nil {
			return nil, fmt.Errorf("shimstore: decode receipt: %w", err)
		}
	}
	return out, nil
}
