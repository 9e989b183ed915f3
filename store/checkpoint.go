package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// CheckpointEvery is how often a SQLite store copies its write-ahead log
// into the database file, on a reader connection, off the writer.
//
// The writer's own checkpoints (wal_autocheckpoint, every 1,000 pages) ran
// inside a commit, and their fsync stalled every transaction waiting on the
// group commit; the writer now has none (wal_autocheckpoint(0)). A PASSIVE
// checkpoint never waits for the writer or a reader, so the log is copied
// while commits go on; SQLite starts the log over once all of it is in the
// database file. Durability is unchanged: a commit is in the log before
// anyone is answered, as before.
//
// Each checkpoint syncs the log and the database file, and copies every
// page changed since the last one: the pages each turn touches again (the
// chain heads, the indexes' last leaves, the header page) are copied once
// per checkpoint however many commits changed them, and each sync is
// costly. Every 500 ms, rather than every 100 ms, takes CPU off every
// governed request (the figures are in the commit that made it 500); the
// log then holds at most half a second of commits before it is copied,
// and restartFrames still bounds its length.
const CheckpointEvery = 500 * time.Millisecond

// checkpointer runs the background checkpoints of one SQLite store.
type checkpointer struct {
	stop    chan struct{}
	wg      sync.WaitGroup
	restart atomic.Bool // the log is long: the batcher starts it over
}

func (db *DB) startCheckpoints() {
	c := &checkpointer{stop: make(chan struct{})}
	db.ckpt = c
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		t := time.NewTicker(CheckpointEvery)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				db.checkpoint(context.Background())
			}
		}
	}()
}

// restartFrames is the log's length (in pages, 16 MiB of 4 KiB pages) past
// which SQLite is made to start the log over. Under a steady stream of
// commits a PASSIVE checkpoint never finds the log all copied when a
// transaction begins, so the log would only grow. Past restartFrames the
// batcher itself, between two batches (when it holds no transaction and so
// cannot be in its own way), runs a RESTART checkpoint: it copies the little
// the PASSIVE ones left, waits for readers to leave the log, and lets the
// next transaction write the log from its start. That holds up the writer
// once per restartFrames pages, where its own checkpoints held up a commit
// every 1,000.
const restartFrames = 4096

// checkpoint copies the log into the database file without waiting for
// anyone, and asks the batcher to start the log over once it is
// restartFrames long.
func (db *DB) checkpoint(ctx context.Context) {
	var busy, log, done int64
	if err := db.r.QueryRowContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)").Scan(&busy, &log, &done); err != nil {
		return
	}
	if log >= restartFrames {
		db.ckpt.restart.Store(true)
	}
}

func (c *checkpointer) close() {
	close(c.stop)
	c.wg.Wait()
}
