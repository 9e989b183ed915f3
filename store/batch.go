package store

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
)

// batcher is SQLite's group commit. SQLite has one writer at a time and most
// of a small transaction's cost is its commit (one pwrite per dirty page into
// the WAL), so transactions that arrive while another is running are run
// together: each in a SAVEPOINT of one shared transaction, committed once.
// A transaction that fails rolls back to its savepoint and leaves the others
// alone; a failed commit fails every transaction of the batch. Nobody is
// answered before the commit that holds their change, so an acknowledged
// write is durable exactly as with one transaction per call.
//
// The batcher is the only user of the writer connection for transactions,
// which also makes it the natural place to prepare cached statements.
type batcher struct {
	db   *DB
	reqs chan *txReq
	stop chan struct{}
	wg   sync.WaitGroup
}

type txReq struct {
	ctx  context.Context
	fn   func(*Tx) error
	done chan error
}

// maxBatch bounds how many transactions share one commit.
const maxBatch = 128

func newBatcher(db *DB) *batcher {
	b := &batcher{db: db, reqs: make(chan *txReq, maxBatch), stop: make(chan struct{})}
	b.wg.Add(1)
	go b.loop()
	return b
}

func (b *batcher) close() {
	close(b.stop)
	b.wg.Wait()
}

// do runs fn in the next batch and waits for its commit.
func (b *batcher) do(ctx context.Context, fn func(*Tx) error) error {
	req := &txReq{ctx: ctx, fn: fn, done: make(chan error, 1)}
	select {
	case b.reqs <- req:
	case <-b.stop:
		return fmt.Errorf("store: closed")
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued, the request is answered after the batch's commit even if
	// ctx ends meanwhile: the caller must learn whether its change landed.
	return <-req.done
}

func (b *batcher) loop() {
	defer b.wg.Done()
	for {
		var first *txReq
		select {
		case first = <-b.reqs:
		case <-b.stop:
			return
		}
		batch := []*txReq{first}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		b.run(batch)
		b.db.stmts.prepareNow(context.Background(), b.db.w)
	}
}

func (b *batcher) run(batch []*txReq) {
	if len(batch) == 1 {
		r := batch[0]
		r.done <- b.db.inTx(context.WithoutCancel(r.ctx), r.fn)
		return
	}
	ctx := context.Background()
	fail := func(err error) {
		for _, r := range batch {
			r.done <- err
		}
	}
	sqlTx, err := b.db.w.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("store: begin: %w", err))
		return
	}
	heads := auditHeads{}
	t := &Tx{tx: sqlTx, dialect: b.db.dialect, db: b.db, heads: &heads}
	errs := make([]error, len(batch))
	for i, r := range batch {
		if err := r.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if _, err := sqlTx.ExecContext(ctx, "SAVEPOINT caduceus_tx"); err != nil {
			sqlTx.Rollback()
			fail(fmt.Errorf("store: savepoint: %w", err))
			return
		}
		// Statements run without the caller's cancellation: interrupting a
		// write inside a shared transaction would roll back the others too.
		before := heads.clone()
		errs[i] = safe(r.fn)(&Tx{tx: t.tx, dialect: t.dialect, db: t.db, heads: t.heads})
		if errs[i] != nil {
			heads = before // its appends are rolled back with it
			if _, err := sqlTx.ExecContext(ctx, "ROLLBACK TO caduceus_tx"); err != nil {
				sqlTx.Rollback()
				fail(fmt.Errorf("store: rollback to savepoint: %w", err))
				return
			}
		}
		if _, err := sqlTx.ExecContext(ctx, "RELEASE caduceus_tx"); err != nil {
			sqlTx.Rollback()
			fail(fmt.Errorf("store: release savepoint: %w", err))
			return
		}
	}
	if err := heads.write(ctx, t); err != nil {
		sqlTx.Rollback()
		fail(err)
		return
	}
	if err := sqlTx.Commit(); err != nil {
		fail(fmt.Errorf("store: commit: %w", err))
		return
	}
	for i, r := range batch {
		r.done <- errs[i]
	}
}

// safe turns a panic in fn into an error: fn runs on the batcher's
// goroutine, where a panic would take every writer down with it.
func safe(fn func(*Tx) error) func(*Tx) error {
	return func(t *Tx) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("store: transaction panicked: %v\n%s", p, debug.Stack())
			}
		}()
		return fn(t)
	}
}
