package ledger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/store"
)

// HoldRefresh bounds how late this process learns of a hold another process
// placed on SQLite: the holds are read from the table at most this long
// ago. A hold this process places is seen by it at once.
//
// Reading the table on every attempt cost a read transaction per forwarded
// request, most of what the gateway added to one; a hold is a provider's
// "retry after" of seconds to minutes, so a quarter of a second late in
// another process means at most a few more requests meet the provider's
// limit, which holds them again.
const HoldRefresh = 250 * time.Millisecond

// On Postgres a hold that is placed or moved later is announced on
// holdsChannel; every process listens (one connection each) and reads the
// holds again on its next attempt, so another process's hold applies
// within a notification's round trip. A change of a route's health
// (health.go) is announced on the same channel, and the same listener
// drops both copies. While the listener is up the copy is
// read again only every HoldRefreshListening (a notification lost with its
// connection is covered by the re-read when listening starts again).
const (
	holdsChannel         = "caduceus_holds"
	HoldRefreshListening = 5 * time.Second
)

// holdBook is a DB's copy of shim_holds: the holds still running when it was
// read, and when that was (by the DB's clock).
type holdBook struct {
	mu    sync.Mutex
	until map[string]time.Time
	read  time.Time
	// listening: the Postgres listener is up; its notifications drop the
	// copy (until = nil).
	listening bool
	watch     sync.Once
	stop      context.CancelFunc
	done      chan struct{}
	// heard, when a test made it, is closed once the listener next
	// starts listening or hears a notification (both copies dropped).
	heard chan struct{}
}

// Hold implements upstream.Holds: one upsert that only ever moves the end
// of a hold later, then this process's copy; on Postgres a change is
// announced to the other processes.
func (s *Ledger) Hold(ctx context.Context, identity string, until time.Time) error {
	res, err := s.db.Exec(ctx, `INSERT INTO shim_holds (identity, until_at) VALUES (?, ?)
		ON CONFLICT (identity) DO UPDATE SET until_at = excluded.until_at WHERE shim_holds.until_at < excluded.until_at`,
		identity, store.Micros(until))
	if err != nil {
		return fmt.Errorf("store: hold: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 && s.db.Dialect() == store.Postgres {
		if _, err := s.db.Exec(ctx, `SELECT pg_notify(?, ?)`, holdsChannel, identity); err != nil {
			return fmt.Errorf("store: hold: notify: %w", err)
		}
	}
	b := &processOf(s.db).holds
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until != nil && until.After(b.until[identity]) {
		b.until[identity] = until
	}
	return nil
}

// listen keeps the Postgres listener of db's holds up until close; also
// tells the routes' health (also) of every notification, and whether it
// listens.
func (b *holdBook) listen(db *store.DB, also func(listening bool)) {
	ctx, cancel := context.WithCancel(context.Background())
	b.stop, b.done = cancel, make(chan struct{})
	go func() {
		defer close(b.done)
		for {
			err := db.Listen(ctx, holdsChannel, func() {
				b.mu.Lock()
				b.until, b.listening = nil, true
				b.mu.Unlock()
				also(true)
				b.mu.Lock()
				if b.heard != nil {
					close(b.heard)
					b.heard = nil
				}
				b.mu.Unlock()
			})
			b.mu.Lock()
			b.listening = false
			b.mu.Unlock()
			also(false)
			if errors.Is(err, store.ErrNoListen) || ctx.Err() != nil {
				return
			}
			select { // down: HoldRefresh bounds meanwhile; try again
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
}

// close stops the listener, if one was started.
func (b *holdBook) close() {
	if b.stop != nil {
		b.stop()
		<-b.done
	}
}

// HeldUntil implements upstream.Holds from this process's copy of the
// holds, read again when it is HoldRefresh old.
func (s *Ledger) HeldUntil(ctx context.Context, identity string) (time.Time, error) {
	now := s.db.Now()
	p := processOf(s.db)
	b := &p.holds
	if s.db.Dialect() == store.Postgres {
		b.watch.Do(func() { b.listen(s.db, p.health.heard) })
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	refresh := HoldRefresh
	if b.listening {
		refresh = HoldRefreshListening
	}
	if b.until == nil || now.Sub(b.read) >= refresh || now.Before(b.read) {
		until, err := s.readHolds(ctx, now)
		if err != nil {
			return time.Time{}, err
		}
		b.until, b.read = until, now
	}
	t := b.until[identity]
	if !t.After(now) {
		return time.Time{}, nil
	}
	return t, nil
}

// readHolds reads the holds that run past now.
func (s *Ledger) readHolds(ctx context.Context, now time.Time) (map[string]time.Time, error) {
	type hold struct {
		identity string
		until    int64
	}
	rows := store.QueryRows(ctx, s.db, "hold", func(r store.Scanner) (h hold, err error) {
		err = r.Scan(&h.identity, &h.until)
		return h, err
	}, `SELECT identity, until_at FROM shim_holds WHERE until_at > ?`, store.Micros(now))
	until := map[string]time.Time{}
	err := store.EachRow(rows, func(h hold) error {
		until[h.identity] = store.FromMicros(h.until)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return until, nil
}
