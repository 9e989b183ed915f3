package shimstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/store/port"
)

// Turns records each proxied turn (shim.TurnRecorder) in one batch on the
// port: the audit record sealed onto its tenant's chain with its new head
// (port.Audit.AppendWith), the receipt naming it, and the turn's memory
// writes. Either all of them are stored or none. A batch whose record lost
// its seq to another writer rolls back whole and is sealed again onto the
// chain's new end; one whose memory writes fail is stored again without
// them (shim.ErrMemoryNotRecorded). The Worker records its turns so;
// `caduceus serve` records them in its group commit (shim/shimsql), in the
// same rows.
type Turns struct{ trail *port.Audit }

// NewTurns returns the turn recorder on db.
func NewTurns(db port.DB) *Turns { return &Turns{trail: port.NewAudit(db)} }

// NewTurnsOn returns the turn recorder that appends to trail, the audit
// trail its other records go to, so that both seal onto the chain's end as
// trail last left it (port.Audit).
func NewTurnsOn(trail *port.Audit) *Turns { return &Turns{trail: trail} }

var _ shim.TurnRecorder = (*Turns)(nil)

// RecordTurn implements shim.TurnRecorder. The caller's cancellation is
// ignored: a client that hangs up cannot erase the record of its turn.
func (t *Turns) RecordTurn(ctx context.Context, e audit.Entry, rc *shim.Receipt, writes []shim.MemoryWrite) error {
	ctx = context.WithoutCancel(ctx)
	s, err := audit.Prepare(e, contract.NewID(contract.PrefixEvent))
	if err != nil {
		return err
	}
	rc.AuditID = s.ID
	receipt, err := InsertReceipt(e.Outcome.Identity.TenantSlot, *rc)
	if err != nil {
		return err
	}
	var memory []port.Statement
	for _, w := range writes {
		memory = append(memory, MemoryWrite(w)...)
	}
	with := func(audit.Record) []port.Statement { return append([]port.Statement{receipt}, memory...) }
	_, err = t.trail.AppendWith(ctx, s, with)
	if err != nil && len(memory) > 0 && !receiptExists(err) {
		memErr := err // the record and receipt go in without them
		memory = nil
		if _, err = t.trail.AppendWith(ctx, s, with); err == nil {
			return fmt.Errorf("%w: %v", shim.ErrMemoryNotRecorded, memErr)
		}
	}
	switch {
	case err == nil:
		return nil
	case receiptExists(err):
		return ErrReceiptExists(rc.ID)
	}
	return fmt.Errorf("shimstore: record turn: %w", err)
}

// receiptExists reports whether err is the unique violation of a receipt
// id already stored: SQLite's (and D1's) message names the table's
// columns, Postgres's its primary key.
func receiptExists(err error) bool {
	if !port.Unique(err) {
		return false
	}
	m := err.Error()
	return strings.Contains(m, "shim_receipts.") || strings.Contains(m, "shim_receipts_pkey")
}
