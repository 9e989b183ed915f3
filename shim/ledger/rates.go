package ledger

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

var _ upstream.Rates = (*Ledger)(nil)

// Rate windows (shim_rates: a row per scope and UTC minute) are leased as
// budgets are: a process takes a slice of a window's requests in one
// write and admits from it in memory, and the tokens its answers used
// are added to the row in one write a flush later. The row's requests
// count what every process took, so the processes together never admit
// past the window's rpm.
//
// A slice is an eighth of what is left of the window (at most
// rateSliceMax, at least one), so near the limit every request takes one
// and nothing is stranded; with tpm, a window within an eighth of its
// tokens also leases one at a time, each write reading the tokens the
// other processes added. Every RateFlush, a process writes its tokens and
// gives back what it took and did not admit, unless it admitted from that
// slice since the last flush; a window whose minute is over (before the
// last) gives back all of it and is forgotten. So a request refused here while another
// process holds a slice it does not use is refused for at most two
// flushes (near the limit a slice is one request, soon used), and another
// process sees this one's tokens within a flush. A
// process killed holds its untaken slice (at most an eighth of the
// window) and loses its unwritten tokens (a flush's worth) until the
// minute ends.
//
// A window found full (its row's requests at the rpm, or its tokens at
// the tpm) is refused from memory until this process's next flush (at
// most RateFlush).

// RateFlush is how long a process keeps tokens and unused slices before
// writing them back.
var RateFlush = 100 * time.Millisecond

// rateSliceMax bounds a slice of a window's requests.
const rateSliceMax = 256

// rateKey names one window.
type rateKey struct {
	scope  string
	minute int64
}

// compare orders windows as every write of several rows locks them: by
// scope, then minute. Two transactions that lock the same rows in one
// order never deadlock on them (on Postgres a deadlock costs both a
// second, deadlock_timeout, before one is aborted and run again).
func (k rateKey) compare(o rateKey) int {
	return cmp.Or(cmp.Compare(k.scope, o.scope), cmp.Compare(k.minute, o.minute))
}

// rateSlot is this process's part of one window.
type rateSlot struct {
	left      int64         // requests taken and not admitted yet
	requests  int64         // the row's requests at the last write
	tokens    int64         // the row's tokens at the last write
	pending   int64         // tokens used here and not written yet
	fullUntil time.Time     // refused without a write until then
	busy      bool          // admitted from since the last flush
	filling   chan struct{} // non-nil: a write for this window is under way
}

// known is the window's tokens as far as this process knows.
func (sl *rateSlot) known() int64 { return sl.tokens + sl.pending }

// full says whether w has no room as the slot stands (taking no slice).
func (sl *rateSlot) full(w upstream.RateWindow, now time.Time) bool {
	if w.TPM > 0 && sl.known() >= w.TPM {
		return true
	}
	return sl.left == 0 && now.Before(sl.fullUntil)
}

// rateBook is a process's part of the rate windows.
type rateBook struct {
	db     *store.DB
	mu     sync.Mutex
	slots  map[rateKey]*rateSlot
	timer  *time.Timer // the next flush; nil: none due
	closed bool
	// flushed, when a test made it, is closed once the timer's next
	// flush has ended.
	flushed chan struct{}
}

// ratesOf is db's rate book.
func ratesOf(db *store.DB) *rateBook {
	p := processOf(db)
	p.ratesOnce.Do(func() { p.rates.db = db })
	return &p.rates
}

// slot is k's slot, made empty when missing; the caller holds b.mu.
func (b *rateBook) slot(k rateKey) *rateSlot {
	if b.slots == nil {
		b.slots = map[rateKey]*rateSlot{}
	}
	sl := b.slots[k]
	if sl == nil {
		sl = &rateSlot{}
		b.slots[k] = sl
	}
	return sl
}

// Admit implements upstream.Rates: a request is admitted from this
// process's slices of its windows; a window with no slice left takes
// another in one write (all such windows of the request in one
// transaction), and the first window (in ws's order) that has no room
// refuses, counting the request nowhere.
func (s *Ledger) Admit(ctx context.Context, ws []upstream.RateWindow) ([]upstream.RateWindow, *upstream.RateWindow, error) {
	b := ratesOf(s.db)
	out := make([]upstream.RateWindow, len(ws))
	copy(out, ws)
	slots := make([]*rateSlot, len(ws))
	for {
		now := s.db.Now()
		b.mu.Lock()
		var wait chan struct{}
		var fill []int
		for i, w := range out {
			sl := b.slot(rateKey{w.Scope, w.Minute})
			slots[i] = sl
			if sl.full(w, now) {
				if wait != nil || len(fill) > 0 {
					break // an earlier window may refuse first: read it
				}
				r := w
				r.Requests, r.Tokens = sl.requests-sl.left, sl.known()
				b.mu.Unlock()
				return nil, &r, upstream.ErrRateLimited
			}
			switch {
			case sl.filling != nil:
				wait = sl.filling
			case sl.left == 0:
				fill = append(fill, i)
			}
		}
		if wait == nil && len(fill) == 0 {
			for i, sl := range slots {
				sl.left--
				sl.busy = true
				out[i].Requests, out[i].Tokens = sl.requests-sl.left, sl.known()
			}
			b.schedule()
			b.mu.Unlock()
			return out, nil, nil
		}
		if wait != nil {
			b.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		pending := make([]int64, len(fill))
		for j, i := range fill {
			pending[j] = slots[i].pending
			slots[i].pending = 0
			slots[i].filling = done
		}
		b.mu.Unlock()
		err := s.takeSlices(ctx, out, slots, fill, pending, now)
		b.mu.Lock()
		for j, i := range fill {
			slots[i].filling = nil
			if err != nil {
				slots[i].pending += pending[j]
			}
		}
		close(done)
		b.schedule()
		b.mu.Unlock()
		if err != nil {
			return nil, nil, err
		}
	}
}

// takeSlices writes, in one transaction, each window in fill's pending
// tokens and takes a slice of its requests, locking the rows in
// rateKey.compare's order; the slots take what the rows say (b.mu is
// taken to set them).
func (s *Ledger) takeSlices(ctx context.Context, ws []upstream.RateWindow, slots []*rateSlot, fill []int, pending []int64, now time.Time) error {
	type read struct{ requests, tokens, took int64 }
	got := make([]read, len(fill))
	key := func(j int) rateKey { return rateKey{ws[fill[j]].Scope, ws[fill[j]].Minute} }
	order := make([]int, len(fill))
	for j := range order {
		order[j] = j
	}
	slices.SortFunc(order, func(x, y int) int { return key(x).compare(key(y)) })
	err := s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		for _, j := range order {
			w := ws[fill[j]]
			var r read
			if err := tx.QueryRow(ctx, `INSERT INTO shim_rates (scope, minute, requests, tokens) VALUES (?, ?, 0, ?)
				ON CONFLICT (scope, minute) DO UPDATE SET tokens = shim_rates.tokens + excluded.tokens RETURNING requests, tokens`,
				w.Scope, w.Minute, pending[j]).Scan(&r.requests, &r.tokens); err != nil {
				return fmt.Errorf("store: rate window: %w", err)
			}
			r.took = sliceOf(w, r.requests, r.tokens)
			if r.took > 0 {
				if _, err := tx.Exec(ctx, `UPDATE shim_rates SET requests = requests + ? WHERE scope = ? AND minute = ?`, r.took, w.Scope, w.Minute); err != nil {
					return fmt.Errorf("store: rate window: %w", err)
				}
				r.requests += r.took
			}
			got[j] = r
		}
		return nil
	})
	if err != nil {
		return err
	}
	b := ratesOf(s.db)
	b.mu.Lock()
	defer b.mu.Unlock()
	for j, i := range fill {
		sl, r := slots[i], got[j]
		sl.requests, sl.tokens = r.requests, r.tokens
		sl.left += r.took
		if r.took == 0 {
			sl.fullUntil = now.Add(RateFlush)
		}
	}
	return nil
}

// sliceOf is how many requests to take of w, whose row stands at requests
// and tokens: none when it has no room, one within an eighth of its tpm,
// else an eighth of what is left of its rpm (at least one, at most
// rateSliceMax).
func sliceOf(w upstream.RateWindow, requests, tokens int64) int64 {
	if (w.RPM > 0 && requests >= w.RPM) || (w.TPM > 0 && tokens >= w.TPM) {
		return 0
	}
	if w.TPM > 0 && w.TPM-tokens < max(1, w.TPM/8) {
		return 1
	}
	if w.RPM == 0 {
		return rateSliceMax
	}
	return min(rateSliceMax, max(1, (w.RPM-requests)/8))
}

// Used implements upstream.Rates: the tokens count here at once and are
// written with the next flush.
func (s *Ledger) Used(ctx context.Context, ws []upstream.RateWindow, tokens int64) error {
	if tokens <= 0 || len(ws) == 0 {
		return nil
	}
	b := ratesOf(s.db)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, w := range ws {
		b.slot(rateKey{w.Scope, w.Minute}).pending += tokens
	}
	b.schedule()
	return nil
}

// schedule starts the flush timer when something is to be written and none
// is due; the caller holds b.mu.
func (b *rateBook) schedule() {
	if b.timer != nil || b.closed {
		return
	}
	b.timer = time.AfterFunc(RateFlush, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := b.flush(ctx, true); err != nil {
			slog.Error("ledger: rate windows not written", "err", err)
		}
		b.mu.Lock()
		if b.flushed != nil {
			close(b.flushed)
			b.flushed = nil
		}
		b.mu.Unlock()
	})
}

// flush writes every slot's tokens and gives back its unused slice, in
// one transaction; it forgets that a window was full (the next request
// reads the row again) and forgets the windows of past minutes. timed
// says the flush timer called it: then a slice admitted from since the
// last flush is kept (the process is using it), so a busy process does
// not give back and take again every flush.
func (b *rateBook) flush(ctx context.Context, timed bool) error {
	minute := b.db.Now().Unix() / 60
	type back struct {
		k             rateKey
		left, pending int64
	}
	var backs []back
	b.mu.Lock()
	if timed {
		b.timer = nil
	}
	again := false
	for k, sl := range b.slots {
		if sl.filling != nil {
			continue
		}
		// A window of a minute before the last is forgotten below, so
		// all of its slice goes back now, in use or not.
		past := k.minute < minute-1
		left := sl.left
		if sl.busy && timed && left > 0 && !past {
			left, again = 0, true // in use: kept, looked at again next flush
		}
		sl.busy = false
		if left > 0 || sl.pending > 0 {
			backs = append(backs, back{k, left, sl.pending})
			sl.requests -= left
			sl.tokens += sl.pending
			sl.left -= left
			sl.pending = 0
		}
		sl.fullUntil = time.Time{}
		if past {
			delete(b.slots, k)
		}
	}
	if again {
		b.schedule()
	}
	b.mu.Unlock()
	if len(backs) == 0 {
		return nil
	}
	slices.SortFunc(backs, func(x, y back) int { return x.k.compare(y.k) })
	err := b.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		for _, r := range backs {
			if _, err := tx.Exec(ctx, `UPDATE shim_rates SET requests = requests - ?, tokens = tokens + ? WHERE scope = ? AND minute = ?`,
				r.left, r.pending, r.k.scope, r.k.minute); err != nil {
				return fmt.Errorf("store: rate windows: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		// Nothing was written: the tokens wait for the next flush (the
		// slices are lost to the rest of their minute).
		b.mu.Lock()
		for _, r := range backs {
			if sl := b.slots[r.k]; sl != nil {
				sl.pending += r.pending
				sl.tokens -= r.pending
			}
		}
		b.schedule()
		b.mu.Unlock()
	}
	return err
}

// close writes what the process keeps of the windows: the store is
// closing.
func (b *rateBook) close(ctx context.Context) {
	b.mu.Lock()
	b.closed = true
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	db := b.db
	b.mu.Unlock()
	if db == nil {
		return
	}
	if err := b.flush(ctx, false); err != nil {
		slog.Error("ledger: rate windows not written at close", "err", err)
	}
}

// sweepRates deletes the windows of minutes before cutoff.
func (s *Ledger) sweepRates(ctx context.Context, cutoff time.Time) error {
	_, err := s.db.Exec(ctx, `DELETE FROM shim_rates WHERE minute < ?`, cutoff.Unix()/60)
	return err
}
