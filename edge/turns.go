package edge

import (
	"context"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimstore"
)

// Turns records each proxied turn (shim.TurnRecorder) in one batch, D1's
// one transaction: the audit record sealed onto its tenant's chain, the
// receipt naming it, and the turn's memory writes. Either all of them are
// stored or none, as the server's store commits them together. A batch
// whose record lost its seq to another isolate's append rolls back whole
// and is sealed again onto the chain's new end; one whose memory writes
// fail is stored again without them (shim.ErrMemoryNotRecorded).
type Turns struct {
	db    DB
	trail *Audit
}

// NewTurns returns the turn recorder on db.
func NewTurns(db DB) *Turns { return &Turns{db: db, trail: NewAudit(db)} }

var _ shim.TurnRecorder = (*Turns)(nil)

// RecordTurn implements shim.TurnRecorder.
func (t *Turns) RecordTurn(ctx context.Context, e audit.Entry, rc *shim.Receipt, writes []shim.MemoryWrite) error {
	ctx = context.WithoutCancel(ctx)
	s, err := audit.Prepare(e, contract.NewID(contract.PrefixEvent))
	if err != nil {
		return err
	}
	rc.AuditID = s.ID
	tenant := e.Outcome.Identity.TenantSlot
	receipt, err := shimstore.InsertReceipt(tenant, *rc)
	if err != nil {
		return err
	}
	var memory []Statement
	for _, w := range writes {
		memory = append(memory, shimstore.MemoryWrite(w)...)
	}
	var memErr error
	for range maxAppendTries {
		rec, err := t.trail.sealNext(ctx, s, tenant)
		if err != nil {
			return err
		}
		err = t.db.Batch(ctx, append([]Statement{insertRecord(rec), receipt}, memory...))
		switch {
		case err == nil:
			if memErr != nil {
				return fmt.Errorf("%w: %v", shim.ErrMemoryNotRecorded, memErr)
			}
			return nil
		case chainMoved(err):
			continue
		case strings.Contains(err.Error(), "UNIQUE constraint failed: shim_receipts."):
			return shimstore.ErrReceiptExists(rc.ID)
		case len(memory) > 0:
			memErr, memory = err, nil // the record and receipt go in without them
		default:
			return fmt.Errorf("edge: record turn: %w", err)
		}
	}
	return errChainMoved(tenant)
}
