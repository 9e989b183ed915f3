package ledger

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/store"
)

// TurnCloses is what a turn's commit does with the reservations its
// gateway attempts left open (gateway.Config.DeferClose): the closes the
// spend journal takes after the commit, carried by the receipt's row until
// then (Journal), and those the commit makes itself (Commit).
type TurnCloses struct {
	deferred []ledgerEntry
	inCommit []gateway.Attempt
	now      time.Time
}

// CloseTurn divides the closes attempts leave to a turn's commit at now.
func CloseTurn(attempts []gateway.Attempt, now time.Time) TurnCloses {
	d, c := splitCloses(attempts, now)
	return TurnCloses{deferred: d, inCommit: c, now: now}
}

// Journal is the receipt row's ledger column: the deferred closes as JSON,
// nil when there are none.
func (c TurnCloses) Journal() []byte {
	if len(c.deferred) == 0 {
		return nil
	}
	return encodeLedger(c.deferred)
}

// Commit makes the closes that join the turn's transaction tx.
func (c TurnCloses) Commit(ctx context.Context, tx *store.Tx) error {
	if len(c.inCommit) == 0 {
		return nil
	}
	return closeAttempts(ctx, tx, c.now, c.inCommit)
}

// Committed hands the deferred closes of the committed receipt to db's
// spend journal, which writes their spend rows, totals and leases within
// journalDelay.
func (c TurnCloses) Committed(db *store.DB, tenant contract.TenantSlot, receipt string) {
	if len(c.deferred) > 0 {
		journalOf(db).add(tenant, receipt, c.deferred)
	}
}
