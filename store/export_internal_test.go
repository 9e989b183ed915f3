package store

import (
	"context"
	"time"
)

// WholePassFailures is how many Postgres group-commit first passes (with
// ExecLater's statements kept) failed and ran again.
func (db *DB) WholePassFailures() int64 {
	if db.batch == nil {
		return 0
	}
	return db.batch.wholeFails.Load()
}

// FirstPass runs fns as one Postgres group commit's first pass (firstPass),
// in this order, and reports whether the pass ended the batch (false: it
// rolled back, and the batch would run again in savepoints) and each
// transaction's answer when it did.
func (db *DB) FirstPass(fns ...func(*Tx) error) (ended bool, answers []error) {
	batch := make([]*txReq, len(fns))
	for i, fn := range fns {
		batch[i] = &txReq{ctx: context.Background(), fn: fn, done: make(chan error, 1)}
	}
	if !db.batch.firstPass(batch) {
		return false, nil
	}
	for _, r := range batch {
		answers = append(answers, <-r.done)
	}
	return true, answers
}

// HeadsMoved is how many optimistic Postgres first passes found a chain
// head other than the one this process knew, and ran again locked.
func (db *DB) HeadsMoved() int64 {
	if db.batch == nil {
		return 0
	}
	return db.batch.headsMoved.Load()
}

// ForgetHeads drops the chain heads the group commit knows (as a restart
// would): its next batch of each tenant takes the locked pass.
func (db *DB) ForgetHeads() {
	if db.batch != nil {
		db.batch.known.clear()
	}
}

// NamedTx is a transaction of a group commit with the audit chain it names
// (InTxFor; "": none).
type NamedTx struct {
	Tenant string
	Fn     func(*Tx) error
}

// PassFor runs txs, in this order, as one Postgres group commit: its first
// pass (firstPass: optimistic when the heads it names are known, see
// known.go) or, saved, its pass in savepoints (runSaved). It reports
// whether the pass ended the batch and each transaction's answer when it
// did.
func (db *DB) PassFor(saved bool, txs ...NamedTx) (ended bool, answers []error) {
	batch := make([]*txReq, len(txs))
	for i, x := range txs {
		batch[i] = &txReq{ctx: context.Background(), tenant: x.Tenant, fn: x.Fn, done: make(chan error, 1)}
	}
	if saved {
		db.batch.runSaved(batch)
	} else if !db.batch.firstPass(batch) {
		return false, nil
	}
	for _, r := range batch {
		answers = append(answers, <-r.done)
	}
	return true, answers
}

// KnowsHead reports whether the group commit knows tenant's chain head
// (known.go).
func (db *DB) KnowsHead(tenant string) bool {
	if db.batch == nil {
		return false
	}
	k := &db.batch.known
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.heads[tenant]
	return ok
}

// PipeStats are the pipelined group commit's counters (zero without it).
type PipeStats struct {
	Written, Overlapped, Committed, Redone, Prepared int64
	// Turns is how many transactions the batches written held; of the
	// batches written ahead (Overlapped), AheadFull held aheadMin turns
	// and AheadLate had waited aheadWait.
	Turns, AheadFull, AheadLate int64
}

// PipeStats reads the pipelined group commit's counters.
func (db *DB) PipeStats() PipeStats {
	if db.batch == nil || db.batch.pipe == nil {
		return PipeStats{}
	}
	p := db.batch.pipe
	return PipeStats{p.written.Load(), p.overlapped.Load(), p.committed.Load(), p.redone.Load(), p.prepared.Load(),
		p.turns.Load(), p.aheadFull.Load(), p.aheadLate.Load()}
}

// PipeAhead sets when a batch is written ahead (aheadMin, aheadWait) and
// makes the pipe send on the channel it returns the turns a held batch
// holds each time one more joins it (before any request: they are the
// batcher's fields).
func (db *DB) PipeAhead(min int, wait time.Duration) <-chan int {
	ch := make(chan int, 1024)
	p := db.batch.pipe
	p.aheadMin, p.aheadWait, p.held = min, wait, ch
	return ch
}

// PipeWrites makes the pipe send on the channel it returns each batch
// once written (before any request: it is the batcher's field).
func (db *DB) PipeWrites() <-chan struct{} {
	ch := make(chan struct{}, 64)
	db.batch.pipe.wrote = ch
	return ch
}

// QueuedTx is how many transactions wait for the group commit's leader
// (lead); 0 with a pipelined group commit, which queues on a channel.
func (db *DB) QueuedTx() int {
	b := db.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}

// CommitClosing reports whether Close has closed the group commit to new
// transactions.
func (db *DB) CommitClosing() bool {
	b := db.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}
