// Package shimsql is the shim gate's SQL: shim.Store (provisions, context
// entries, the once-per-conversation marks, receipts), shim.TurnRecorder and
// the memory tables of shim/memory, over the store core, on SQLite and
// Postgres. The spend ledger is shim/ledger's.
package shimsql

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/caduceus-dev/caduceus/shim/ledger"
	"github.com/caduceus-dev/caduceus/shim/shimstore"
	"github.com/caduceus-dev/caduceus/store"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
)

//go:embed migrations/*.sql
var migrations embed.FS

func init() { store.RegisterMigrations("shimsql", migrations, "migrations") }

// Store is the shim gate's tables (migration 300_shim): shim.Store,
// written once on the store's port (shim/shimstore), and RecordTurn, the
// turn in the group commit.
type Store struct {
	*shimstore.Store
	db *store.DB
}

// New returns the shim store over db.
func New(db *store.DB) *Store {
	return &Store{Store: shimstore.New(db.Port(), func() time.Time { return db.Now() }), db: db}
}

var _ shim.Store = (*Store)(nil)

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
	doc, err := shimstore.Encode(*rc)
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
		return shimstore.ErrReceiptExists(rc.ID)
	}
	if err != nil {
		return fmt.Errorf("store: add receipt: %w", err)
	}
	return nil
}
