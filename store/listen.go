package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// ErrNoListen is Listen's answer on SQLite, which has no notifications:
// callers poll there.
var ErrNoListen = errors.New("store: LISTEN needs Postgres")

// Listen opens a Postgres connection of its own, LISTENs on channel, calls
// heard once when it listens (a notification may have been sent while it
// was not) and after every notification, until ctx ends or the connection
// fails; it returns why. Callers that must keep hearing call it again (and
// poll meanwhile). A notification is sent with
// Exec(ctx, `SELECT pg_notify(?, ?)`, channel, payload); inside a
// transaction it is delivered at commit, or never.
func (db *DB) Listen(ctx context.Context, channel string, heard func()) error {
	if db.dialect != Postgres {
		return ErrNoListen
	}
	conn, err := pgx.Connect(ctx, db.dsn)
	if err != nil {
		return fmt.Errorf("store: listen %s: %w", channel, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("store: listen %s: %w", channel, err)
	}
	heard()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("store: listen %s: %w", channel, err)
		}
		heard()
	}
}
