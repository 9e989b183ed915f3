package store

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/store/port"
)

// Keys is the API key table: auth.Store, written once on the store's port
// (port.Keys), and auth.Watcher.
type Keys struct {
	*port.Keys
	db *DB
}

// Keys returns the store's key table. On Postgres each change notifies
// every listening process at its commit (WatchKeys).
func (db *DB) Keys() *Keys {
	var notify func(string) port.Statement
	if db.dialect == Postgres {
		notify = func(what string) port.Statement {
			return port.Statement{SQL: `SELECT pg_notify(?, ?)`, Args: []any{keysChannel, what}}
		}
	}
	return &Keys{Keys: port.NewKeys(db.Port(), func() time.Time { return db.Now() }, notify), db: db}
}

var (
	_ auth.Store   = (*Keys)(nil)
	_ auth.Watcher = (*Keys)(nil)
)

// keysChannel is the Postgres NOTIFY channel of key changes.
const keysChannel = "caduceus_keys"

// KeyPollInterval is how often WatchKeys reads the change counter on SQLite
// (and on Postgres as the fallback while its LISTEN connection is down):
// half the 100 ms a revocation made elsewhere may take to be refused. Every
// read wakes the process's threads: at 10 ms an idle serve spent 2.6% of a
// core on it, and under load its threads woke for it beside the requests.
const KeyPollInterval = 50 * time.Millisecond

// WatchKeys implements auth.Watcher. On Postgres a connection of its own
// LISTENs on caduceus_keys and calls changed on every notification (and on
// every reconnect, in case one was missed while it was down). On SQLite it
// reads the key change counter every KeyPollInterval: one indexed row on a
// reader connection, which WAL lets run beside the writer.
func (k *Keys) WatchKeys(ctx context.Context, changed func()) error {
	if k.db.dialect == Postgres {
		return k.listen(ctx, changed)
	}
	return k.poll(ctx, changed, KeyPollInterval)
}

func (k *Keys) changeCount(ctx context.Context) (int64, error) {
	var n int64
	// Without ctx's cancellation: SQLite's driver watches a cancellable
	// context with a goroutine of its own for every statement, which costs
	// more than this one-row read; the watcher's ctx is checked between reads.
	err := k.db.QueryRow(context.WithoutCancel(ctx), `SELECT n FROM key_changes WHERE id = 1`).Scan(&n)
	return n, err
}

func (k *Keys) poll(ctx context.Context, changed func(), every time.Duration) error {
	last, err := k.changeCount(ctx)
	if err != nil {
		last = -1
	}
	// Whatever was cached before the baseline was read may predate a
	// change the baseline already counts.
	changed()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		n, err := k.changeCount(ctx)
		if err != nil {
			continue // the store is unreachable; the cache TTL still bounds
		}
		if n != last {
			last = n
			changed()
		}
	}
}

func (k *Keys) listen(ctx context.Context, changed func()) error {
	for {
		err := k.db.Listen(ctx, keysChannel, changed)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		// Down: fall back to polling the counter until the next attempt.
		_ = err
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		k.poll(pctx, changed, KeyPollInterval)
		cancel()
	}
}
