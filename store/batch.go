package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// batcher is the store's group commit (on Postgres, see runPostgres: a
// batch runs first without savepoints).
// SQLite has one writer at a time and most of a small transaction's cost is
// its commit (one pwrite per dirty page into the WAL), so transactions that
// arrive while another is running are run together: each in a SAVEPOINT of
// one shared transaction, committed once. A transaction that fails rolls
// back to its savepoint and leaves the others alone; a failed commit fails
// every transaction of the batch. Nobody is answered before the commit that
// holds their change, so an acknowledged write is durable exactly as with
// one transaction per call.
//
// On SQLite the batcher pins the writer connection on its first
// transaction, and one caller at a time (lead) runs a batch on it. It begins and ends
// transactions itself (BEGIN IMMEDIATE, COMMIT, ROLLBACK, savepoints) with
// statements prepared once on that connection, as are the transactions' own
// (stmtCache): database/sql's BeginTx parsed its BEGIN anew each time, and a
// statement prepared on the pool had to be re-bound to each transaction.
type batcher struct {
	// wholeFails counts Postgres first passes that failed (the tests read it).
	wholeFails atomic.Int64
	// headsMoved counts optimistic Postgres first passes that found a
	// chain head moved and ran again locked (known.go; the tests read it).
	headsMoved atomic.Int64
	known      knownHeads // Postgres: the chain heads this process last committed
	pipe       *pipe      // Postgres, when asked for: the pipelined group commit (pipe.go)
	db         *DB
	conn       *sql.Conn     // the writer connection, pinned on the first batch
	reqs       chan *txReq   // the pipe's loop: transactions to run
	stop       chan struct{} // the pipe's loop: closed by close
	// wg counts the pipe's loop, or the leader (lead) while there is one.
	wg sync.WaitGroup

	// Without a pipe, the callers run the group commit (lead).
	mu      sync.Mutex
	queue   []*txReq // waiting for the leader's batch to end
	leading bool     // a caller is running a batch
	closed  bool
}

type txReq struct {
	ctx      context.Context
	tenant   string // the audit chain it appends to, locked first ("": none named)
	fn       func(*Tx) error
	done     chan error
	answered bool // the batcher has sent on done (its goroutine's field)
}

// maxBatch bounds how many transactions share one commit.
const maxBatch = 128

// newBatcher starts db's group commit; with pipeDSN (Postgres) a
// pipelined one on a connection to it (pipe.go).
func newBatcher(db *DB, pipeDSN string) *batcher {
	b := &batcher{db: db}
	if pipeDSN == "" {
		return b
	}
	b.reqs, b.stop = make(chan *txReq, maxBatch), make(chan struct{})
	b.pipe = newPipe(b, pipeDSN)
	b.wg.Add(1)
	go b.loop()
	return b
}

func (b *batcher) close() {
	if b.pipe != nil {
		close(b.stop)
		b.wg.Wait()
		return
	}
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.wg.Wait() // the transactions queued before are run and answered
	b.release()
}

// release closes the writer's statements and gives its connection back.
func (b *batcher) release() {
	b.db.stmts.close()
	if b.conn != nil {
		b.conn.Close()
	}
}

// do runs fn in the next batch and waits for its commit.
func (b *batcher) do(ctx context.Context, tenant string, fn func(*Tx) error) error {
	req := &txReq{ctx: ctx, tenant: tenant, fn: fn, done: make(chan error, 1)}
	if b.pipe == nil {
		return b.lead(req)
	}
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

// errLead is what a queued transaction's caller is told when the leader
// before it hands it the group commit (lead).
var errLead = errors.New("store: lead the next batch")

// lead is the group commit run by its callers, as a leader and followers
// (the "leader/follower" group commit of database logs): a caller that
// finds no batch running runs its transaction at once, on its own
// goroutine; callers that come while it runs queue, and when its batch has
// committed the leader hands the queue to the first of them, which runs
// them all as the next batch. So a transaction alone costs no goroutine
// handoff (two wake-ups a transaction, each a thread woken when the
// process is otherwise idle), and under load every transaction that
// arrives during a commit shares the next one, as with a goroutine of the
// store's own. Each caller runs at most one batch.
func (b *batcher) lead(req *txReq) error {
	if err := req.ctx.Err(); err != nil {
		return err // the caller is gone before its transaction ran: nothing written
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return fmt.Errorf("store: closed")
	}
	b.queue = append(b.queue, req)
	if b.leading {
		b.mu.Unlock()
		// Once queued, the request is answered after its batch's commit
		// even if ctx ends meanwhile: the caller must learn whether its
		// change landed.
		if err := <-req.done; err != errLead {
			return err
		}
	} else {
		b.leading = true
		b.wg.Add(1)
		b.mu.Unlock()
	}
	// One yield lets the goroutines that are about to ask (their requests
	// ran while this one waited) queue before the batch is taken, so they
	// share this commit rather than each paying one. Alone, it costs
	// nothing to wait for.
	runtime.Gosched()
	// The leader: req is the queue's first (handOn hands the queue to its
	// first), so it is in this batch.
	b.mu.Lock()
	n := min(len(b.queue), maxBatch)
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	b.mu.Unlock()
	b.runLed(batch)
	if c := b.db.ckpt; c != nil && b.conn != nil && c.restart.Swap(false) {
		// See restartFrames. Between two batches, off this caller's
		// answer: the next leader waits for it. A failure leaves the log
		// to grow until the next request.
		go func() {
			b.conn.ExecContext(context.Background(), "PRAGMA wal_checkpoint(RESTART)")
			b.handOn()
		}()
	} else {
		b.handOn()
	}
	return <-req.done
}

// runLed runs a leader's batch. A panic outside the transactions' own
// functions (which safe turns into errors) answers the batch and hands the
// group commit on before it goes on up the caller's goroutine, where an
// HTTP server would recover it: held, the group commit would stop every
// writer of the process.
func (b *batcher) runLed(batch []*txReq) {
	defer func() {
		if p := recover(); p != nil {
			answer(batch, fmt.Errorf("store: group commit panicked: %v", p))
			b.handOn()
			panic(p)
		}
	}()
	b.run(batch)
}

// handOn ends a leader's turn: the first queued caller leads the next
// batch, or, with none queued, the next caller to come.
func (b *batcher) handOn() {
	b.mu.Lock()
	if len(b.queue) == 0 {
		b.leading = false
		b.queue = nil
		b.mu.Unlock()
		b.wg.Done()
		return
	}
	next := b.queue[0]
	b.mu.Unlock()
	next.done <- errLead
}

// loop is the pipelined group commit's goroutine (pipe.go).
func (b *batcher) loop() {
	defer b.wg.Done()
	defer func() {
		b.pipe.close()
		b.release()
	}()
	settled := b.pipe.note // a batch in flight ended
	for {
		var first *txReq
		select {
		case first = <-b.reqs:
		case <-settled:
			// One that failed runs again now, not at the next request.
			b.pipe.settle()
			continue
		case <-b.stop:
			return
		}
		batch := []*txReq{first}
		// One yield lets the goroutines that are about to ask (their
		// requests ran while this one waited) queue before the drain, so
		// they share this commit rather than each paying one. Measured
		// under the bench's 16 connections: 3.26 transactions a commit
		// instead of 2.05; alone, it costs nothing to wait for.
		runtime.Gosched()
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-b.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		b.pipe.run(batch)
	}
}

func (b *batcher) run(batch []*txReq) {
	if b.db.dialect == Postgres {
		b.runPostgres(batch)
		return
	}
	ctx := context.Background()
	if b.conn == nil {
		conn, err := b.db.w.Conn(ctx)
		if err != nil {
			answer(batch, fmt.Errorf("store: writer connection: %w", err))
			return
		}
		b.conn = conn
	}
	heads := auditHeads{}
	t := &Tx{q: b.conn, conn: b.conn, dialect: b.db.dialect, db: b.db, heads: &heads, shared: true}
	if _, err := t.Exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		// A transaction a failed COMMIT and ROLLBACK left open would
		// refuse every BEGIN after it: end it and begin once more.
		t.Exec(ctx, "ROLLBACK")
		if _, err := t.Exec(ctx, "BEGIN IMMEDIATE"); err != nil {
			answer(batch, fmt.Errorf("store: begin: %w", err))
			return
		}
	}
	rollback := func(err error) {
		if _, rerr := t.Exec(ctx, "ROLLBACK"); rerr != nil {
			err = errors.Join(err, fmt.Errorf("store: rollback: %w", rerr))
		}
		answer(batch, err)
	}
	if len(batch) == 1 {
		// Alone: no savepoint; its failure rolls the transaction back.
		if err := safe(batch[0].fn)(t); err != nil {
			rollback(err)
			return
		}
	} else if err := b.runEach(ctx, t, batch); err != nil {
		rollback(err)
		return
	}
	if err := heads.write(ctx, t); err != nil {
		rollback(err)
		return
	}
	if _, err := t.Exec(ctx, "COMMIT"); err != nil {
		rollback(fmt.Errorf("store: commit: %w", err))
		return
	}
	answer(batch, nil)
}

// runPostgres is the group commit on Postgres, where every commit waits for
// a WAL flush and each tenant's audit head row is locked until it ends: the
// transactions of a batch share one transaction, one head update per
// tenant and one flush.
//
// Every statement is a round trip to the server, and a savepoint around
// each transaction costs two more. So a batch first runs without them
// (firstPass), pipelined: if every transaction succeeds, that is its
// commit. If one fails, that pass is rolled back and the batch runs again
// with a savepoint each (runSaved), where a failure stays with its own
// transaction; a transaction alone runs again as InTx does, retried on a
// serialization failure or deadlock — unless it failed by returning an
// error of its own with no statement failed, which is its answer. Running a transaction's function
// again is what a Postgres transaction must allow anyway: InTx retries it
// on a serialization failure or deadlock.
//
// A transaction alone takes the pipelined pass too: a shim turn at one
// connection is then one round trip (BEGIN, its chain head's check, its
// writes and the COMMIT) when the process knows its chain's head (known.go),
// two otherwise (BEGIN with the head's lock; the writes with the COMMIT),
// instead of one per statement.
func (b *batcher) runPostgres(batch []*txReq) {
	if b.firstPass(batch) {
		return
	}
	b.wholeFails.Add(1)
	if len(batch) == 1 {
		r := batch[0]
		r.done <- b.db.inTxRetried(context.WithoutCancel(r.ctx), headFirst(r.tenant, r.fn))
		return
	}
	b.runSaved(batch)
}

// passEnd is how a first pass ended.
type passEnd int

const (
	passFailed    passEnd = iota // rolled back, nobody answered: run the batch in savepoints
	passEnded                    // committed, or answered
	passHeadMoved                // optimistic, and a head was not the known one: rolled back, nobody answered
)

// firstPass runs batch's first pass: optimistic, against the heads this
// process knows, when it knows every head the batch names; locked (as
// it runs when one is not known) otherwise, and when the optimistic pass
// found a head moved. It reports false when the batch must run again in
// savepoints, having answered nobody.
func (b *batcher) firstPass(batch []*txReq) bool {
	if known := b.known.cover(batch); known != nil {
		switch b.runWhole(batch, known) {
		case passEnded:
			return true
		case passFailed:
			b.known.forget(batch, known)
			return false
		}
		b.known.forget(batch, known)
		b.headsMoved.Add(1)
	}
	if b.runWhole(batch, nil) == passEnded {
		return true
	}
	b.known.forget(batch, nil)
	return false
}

// runWhole runs batch's transactions in one Postgres transaction with no
// savepoint and commits it. With known it checks that the heads the batch
// names are those (checkHeads) instead of locking and reading them
// (lockHeads). It reports passFailed, having rolled back and answered
// nobody, when a transaction failed (or its context had ended): the batch
// must run again in savepoints; passHeadMoved when a check failed. A
// failed commit is answered, and so is one whose outcome is unknown (the
// connection broke once the COMMIT may have been sent: ErrCommitUnknown),
// which must not run again. A commit keeps the heads it wrote as known; a
// failed one, or one not known to have committed, forgets them.
func (b *batcher) runWhole(batch []*txReq, known auditHeads) passEnd {
	for _, r := range batch {
		if r.ctx.Err() != nil {
			return passFailed
		}
	}
	ctx := context.Background()
	conn, err := b.db.w.Conn(ctx)
	if err != nil {
		return passFailed
	}
	defer conn.Close()
	// The pass drives its transaction itself (later.go): BEGIN is its
	// first kept statement and COMMIT goes with its last.
	heads := auditHeads{}
	t := &Tx{q: conn, dialect: Postgres, db: b.db, heads: &heads, shared: true, whole: true, raw: conn,
		later: []laterStmt{{query: "BEGIN"}}}
	if known != nil {
		checkHeads(t, known)
	} else if err := lockHeads(ctx, t, batch); err != nil || t.failed != nil {
		t.rollbackPass(ctx)
		return passFailed
	}
	for _, r := range batch {
		err := safe(r.fn)(t)
		if err == nil && t.failed == nil {
			continue
		}
		t.rollbackPass(ctx)
		if len(batch) == 1 && err != nil && t.failed == nil && !t.stmtFailed && !IsRetryable(err) {
			// Alone, and refused by fn itself, not by a failed
			// statement: that is the answer a transaction of its own
			// gives, and running fn again would only repeat it.
			r.done <- err
			return passEnded
		}
		return t.passFailure()
	}
	if err := heads.write(ctx, t); err != nil {
		t.rollbackPass(ctx)
		return t.passFailure()
	}
	if err := t.commitKept(ctx); err != nil {
		t.rollbackPass(ctx)
		var ce commitError
		if !errors.As(err, &ce) {
			return t.passFailure()
		}
		// Whether it committed is not known: neither are the heads.
		b.known.forget(batch, heads)
		answer(batch, fmt.Errorf("store: commit: %w", ce.err))
		return passEnded
	}
	b.known.remember(heads)
	answer(batch, nil)
	return passEnded
}

// passFailure is how a first pass that failed ended: passHeadMoved when a
// head check failed, else passFailed.
func (t *Tx) passFailure() passEnd {
	if t.headMoved {
		return passHeadMoved
	}
	return passFailed
}

// runSaved runs batch's transactions in one Postgres transaction, each in
// a savepoint (runEach), and commits it.
func (b *batcher) runSaved(batch []*txReq) {
	ctx := context.Background()
	sqlTx, err := b.db.w.BeginTx(ctx, nil)
	if err != nil {
		answer(batch, fmt.Errorf("store: begin: %w", err))
		return
	}
	heads := auditHeads{}
	t := &Tx{q: sqlTx, dialect: Postgres, db: b.db, heads: &heads, shared: true}
	if err := lockHeads(ctx, t, batch); err != nil {
		sqlTx.Rollback()
		answer(batch, err)
		return
	}
	if err := b.runEach(ctx, t, batch); err != nil {
		sqlTx.Rollback()
		answer(batch, err)
		return
	}
	if err := heads.write(ctx, t); err != nil {
		sqlTx.Rollback()
		answer(batch, err)
		return
	}
	if err := sqlTx.Commit(); err != nil {
		b.known.forget(batch, heads)
		answer(batch, fmt.Errorf("store: commit: %w", err))
		return
	}
	b.known.remember(heads)
	answer(batch, nil)
}

// lockHeads locks, in t, the audit chain heads the transactions of batch
// name, in the tenants' order, before any of them runs; t caches them as
// their appends will. Every Postgres transaction that names its chain
// takes that head before any other row (headFirst, when it runs alone),
// so two processes' group commits never wait on each other's heads in a
// circle, nor a head held by one on a row the other locked first. (Such a
// circle costs both Postgres's deadlock_timeout, a second, and fails a
// batch's transactions once their retries inside it run out.) A
// transaction that appends to a chain it did not name locks that head at
// the append.
func lockHeads(ctx context.Context, t *Tx, batch []*txReq) error {
	for _, tenant := range namedTenants(batch) {
		head, err := readAuditHead(ctx, t, tenant)
		if err != nil {
			return err
		}
		(*t.heads)[tenant] = head
	}
	return nil
}

// headFirst is fn for a transaction of its own that names the chain it
// appends to: it locks that chain's head before fn runs, and writes the
// heads fn moved once, before the commit.
func headFirst(tenant string, fn func(*Tx) error) func(*Tx) error {
	if tenant == "" {
		return fn
	}
	return func(t *Tx) error {
		heads := auditHeads{}
		t.heads = &heads
		ctx := context.Background()
		head, err := readAuditHead(ctx, t, tenant)
		if err != nil {
			return err
		}
		heads[tenant] = head
		if err := fn(t); err != nil {
			return err
		}
		return heads.write(ctx, t)
	}
}

// answer tells every transaction of batch not yet answered (see runEach)
// how its batch ended: nil when it committed.
func answer(batch []*txReq, err error) {
	for _, r := range batch {
		if !r.answered {
			r.done <- err
		}
	}
}

// runEach runs each transaction of a batch in a savepoint of t. A failed
// one is rolled back to its savepoint and answered at once (answered); an
// error returned fails the whole batch.
func (b *batcher) runEach(ctx context.Context, t *Tx, batch []*txReq) error {
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			r.answered = true
			continue
		}
		if _, err := t.Exec(ctx, "SAVEPOINT caduceus_tx"); err != nil {
			return fmt.Errorf("store: savepoint: %w", err)
		}
		before := t.heads.clone()
		// Statements run without the caller's cancellation (Tx.shared):
		// interrupting a write inside a shared transaction would roll back
		// the others too. On Postgres a serialization failure or deadlock
		// is retried in the savepoint, up to three times, as InTx does.
		var err error
		for attempt := 0; ; attempt++ {
			err = safe(r.fn)(&Tx{q: t.q, conn: t.conn, dialect: t.dialect, db: t.db, heads: t.heads, shared: true})
			if err == nil {
				break
			}
			*t.heads = before.clone() // its appends are rolled back with it
			if _, rerr := t.Exec(ctx, "ROLLBACK TO caduceus_tx"); rerr != nil {
				return fmt.Errorf("store: rollback to savepoint: %w", rerr)
			}
			if !IsRetryable(err) || attempt == 3 {
				break
			}
		}
		if _, rerr := t.Exec(ctx, "RELEASE caduceus_tx"); rerr != nil {
			// On Postgres a statement that failed inside a function that
			// went on as if it had not (it swallowed the error) leaves
			// the savepoint aborted: that transaction alone is rolled
			// back and refused.
			*t.heads = before.clone()
			if _, err := t.Exec(ctx, "ROLLBACK TO caduceus_tx"); err != nil {
				return fmt.Errorf("store: rollback to savepoint: %w", err)
			}
			if _, err := t.Exec(ctx, "RELEASE caduceus_tx"); err != nil {
				return fmt.Errorf("store: release savepoint: %w", err)
			}
			if err == nil {
				err = fmt.Errorf("store: release savepoint: %w", rerr)
			}
		}
		if err != nil {
			r.done <- err
			r.answered = true
		}
	}
	return nil
}

// safe turns a panic in fn into an error: fn runs in a batch of others'
// transactions, whose leader a panic would take down with every writer
// waiting behind it.
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
