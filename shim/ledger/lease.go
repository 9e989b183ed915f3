package ledger

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

// Budget leases. A process serves the reservations of its attempts from
// slices of the budgeted running totals it leased from the store: taking a
// lease adds its amount to the total (shim_spend_totals), so every other
// process sees it as reserved, and records it in shim_spend_leases; an
// attempt then carves its maximum cost from the lease in memory, with no
// write before the call. Its settlement (written by the spend journal, see
// journal.go) takes the carved amount out of the lease and adds
// the actual cost to the total.
// For every total, at every moment:
//
//	total = settled + reserved per attempt + what the open leases hold
//
// and a total only grows past what it held by a conditional write that
// keeps it within its budget, so the sum of the settled spend and of every
// process's leases never passes a budget.
const (
	// leaseAttempts sizes a lease: this many attempts of the largest amount
	// carved from the total since its last lease, at least, and as much as
	// the attempts asked of it over leaseHorizon at the rate they asked
	// since its last write, up to leaseMaxAttempts of the largest: at any
	// rate its top-up, begun when it is half used, then lands before it
	// runs out (a top-up is a few round trips to the database, which may
	// be milliseconds away), and an attempt seldom waits for a lease write.
	leaseAttempts    = 16
	leaseHorizon     = time.Second
	leaseMaxAttempts = 1024
	// refillAt: once a lease holds less than this part of what it was last
	// granted, it is topped up in the background, so that an attempt
	// rarely waits for a lease write (see refill).
	refillAt = 2 // half
	// leaseIdle: a lease nothing was carved from for this long is given
	// back to the store.
	leaseIdle = time.Minute
	// leaseMaxAge: nothing more is carved from a lease whose row was not
	// written for this long until it is topped up (written), so the stale
	// sweep — which releases leases not written for hours — never takes a
	// lease still in use.
	leaseMaxAge = 10 * time.Minute
	// tightFor: once a budget had too little left to lease, its attempts
	// reserve in the store for this long before leasing is tried again.
	tightFor = time.Second
)

// Lease states.
const (
	leaseOpen     = "open"
	leaseReleased = "released"
)

// bookOf is db's lease book, made on first use: one per open store and
// process, shared by all its Ledgers.
func bookOf(db *store.DB) *leaseBook {
	db = db.Main()
	p := processOf(db)
	p.leaseOnce.Do(func() {
		var id [6]byte
		rand.Read(id[:])
		p.leases = &leaseBook{db: db, holder: "lse_" + hex.EncodeToString(id[:]), leases: map[leaseKey]*lease{}}
	})
	return p.leases
}

// stop ends the idle expiry timer and waits for the refills under way; it
// counts as one quiet holder until a matching quiet--. On a closing store,
// leases not returned stay with it until the stale sweep releases them.
func (b *leaseBook) stop() {
	b.mu.Lock()
	b.quiet++
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	b.refills.Wait()
}

// leaseBook is one process's leases on one store.
type leaseBook struct {
	db     *store.DB
	holder string
	seq    atomic.Int64
	// leasing serialises this process's writes that take or top up leases:
	// one lease row per total, and a waiting attempt finds the lease the
	// one before it took.
	leasing sync.Mutex
	// refills are the background top-ups in flight; writes counts the
	// lease writes an attempt waited for (the tests read it).
	refills sync.WaitGroup
	writes  atomic.Int64
	// beaten: Beat has written this holder's row.
	beaten atomic.Bool
	mu     sync.Mutex // guards what follows
	leases map[leaseKey]*lease
	day    string // the UTC day of the last reservation
	timer  *time.Timer
	// quiet: no refill starts (ReturnLeases is giving everything back, or
	// the store is closing).
	quiet int
}

type leaseKey struct{ scope, period string }

// in reports whether k is one of the totals ps.
func (k leaseKey) in(ps [4]spendTotal) bool {
	for _, p := range ps {
		if p.scope == k.scope && p.period == k.period {
			return true
		}
	}
	return false
}

// compare orders totals as every transaction locks them: by scope, the day
// before the month.
func (k leaseKey) compare(o leaseKey) int {
	return cmp.Or(cmp.Compare(k.scope, o.scope), cmp.Compare(len(o.period), len(k.period)), cmp.Compare(k.period, o.period))
}

// lease is one total's slice in memory.
type lease struct {
	id   string // its row; "" before the first lease
	free int64  // not carved yet
	// maxSeen is the largest amount carved since the last lease; asked
	// the sum of what attempts asked of it since then.
	maxSeen, asked int64
	// size is what the last lease or top-up granted; limit the budget of
	// the total when last carved.
	size, limit int64
	refilling   bool      // a background top-up is in flight
	used        time.Time // last carved from
	written     time.Time // its row last written by this process
	tightUntil  time.Time
}

// errTight: a budget has too little left to lease.
var errTight = errors.New("store: too little left to lease")

// carve takes t's amount from the leases of every bounded total of ps, or
// from none of them: it reports which totals need a new lease instead (and
// carves nothing then, unless partial: the totals whose leases hold enough
// keep their part, in t.Leases), and whether one of those is tight.
func (b *leaseBook) carve(t *upstream.Ticket, ps [4]spendTotal, now time.Time, partial bool) (need [4]bool, short, tight bool) {
	amount := int64(t.Amount)
	var took [4]*lease
	for i, p := range ps {
		if p.limit == unbounded {
			continue
		}
		k := leaseKey{p.scope, p.period}
		l := b.leases[k]
		if l == nil {
			l = &lease{}
			b.leases[k] = l
		}
		l.maxSeen = max(l.maxSeen, amount)
		if !partial { // an attempt's first ask (partial is its second)
			l.asked += amount
		}
		l.limit = p.limit
		if l.id != "" && l.free >= amount && now.Sub(l.written) < leaseMaxAge {
			l.free -= amount
			l.used = now
			took[i] = l
			t.Leases[i] = l.id
			continue
		}
		need[i], short = true, true
		tight = tight || now.Before(l.tightUntil)
	}
	if short && !partial {
		for i, l := range took {
			if l != nil {
				l.free += amount
				t.Leases[i] = ""
			}
		}
	}
	return need, short, tight
}

// reserve serves t from this process's leases, taking or topping up the
// leases it needs in one write. It reports false (and holds nothing) when a
// budget has too little left to lease: the attempt reserves in the store.
func (b *leaseBook) reserve(ctx context.Context, t *upstream.Ticket, ps [4]spendTotal, now time.Time) (bool, error) {
	b.mu.Lock()
	if b.day != ps[0].period {
		// A new day (or month): the leases of the one before go back.
		old := b.day
		b.day = ps[0].period
		if old != "" {
			b.mu.Unlock()
			b.expire(ctx, now)
			b.mu.Lock()
		}
	}
	_, short, _ := b.carve(t, ps, now, false)
	if !short {
		b.refillLow(ps, now)
	}
	b.mu.Unlock()
	if !short {
		return true, nil
	}
	b.leasing.Lock()
	defer b.leasing.Unlock()
	b.mu.Lock()
	need, short, tight := b.carve(t, ps, now, true)
	var asks []leaseAsk
	for i, p := range ps {
		if need[i] {
			k := leaseKey{p.scope, p.period}
			l := b.leases[k]
			asks = append(asks, leaseAsk{i: i, k: k, id: l.id, want: l.want(now), limit: p.limit})
		}
	}
	if tight {
		b.uncarve(t, ps)
	}
	b.mu.Unlock()
	if !short {
		return true, nil
	}
	if tight {
		return false, nil
	}
	amount := int64(t.Amount)
	b.writes.Add(1)
	grants, tightAt, err := b.take(ctx, b.db, asks, func(int) int64 { return amount }, now)
	b.mu.Lock()
	defer b.mu.Unlock()
	if errors.Is(err, errTight) {
		if l := b.leases[asks[tightAt].k]; l != nil {
			l.tightUntil = now.Add(tightFor)
		}
		// What was carved for the other totals goes back.
		b.uncarve(t, ps)
		return false, nil
	}
	if err != nil {
		b.uncarve(t, ps)
		return false, err
	}
	for j, a := range asks {
		l := b.leases[a.k]
		if l == nil {
			l = &lease{}
			b.leases[a.k] = l
		}
		if l.id != grants[j].id {
			// A new row: what memory held for a released one is gone.
			l.id, l.free = grants[j].id, 0
		}
		l.free += grants[j].amount - amount
		l.size = grants[j].amount
		l.written, l.used, l.maxSeen, l.asked = now, now, amount, 0
		t.Leases[a.i] = l.id
	}
	if b.timer == nil {
		b.timer = time.AfterFunc(leaseIdle, b.tick)
	}
	return true, nil
}

// uncarve gives t's amount back to the leases it was carved from. b.mu is
// held.
func (b *leaseBook) uncarve(t *upstream.Ticket, ps [4]spendTotal) {
	for i, p := range ps {
		if t.Leases[i] == "" {
			continue
		}
		if l := b.leases[leaseKey{p.scope, p.period}]; l != nil && l.id == t.Leases[i] {
			l.free += int64(t.Amount)
		}
		t.Leases[i] = ""
	}
}

// leaseAsk is one total a lease write takes or tops up a lease of: want
// is what it asks for, limit the total's budget; i is the total's place
// in a ticket, id the lease row to top up ("": none yet).
type leaseAsk struct {
	i           int
	k           leaseKey
	id          string
	want, limit int64
}

// leaseGrant is what one leaseAsk got: its lease row and the amount.
type leaseGrant struct {
	id     string
	amount int64
}

// take writes the leases asks ask for in one transaction on db (the
// store, or for a background top-up its Background): each total
// grows by the grant, never more than half of what remains of its budget,
// and the lease row (topped up, or a new one when there is none or the
// stale sweep released it) records it. A grant below least(j) for the
// j-th ask fails the whole write with errTight and reports j.
func (b *leaseBook) take(ctx context.Context, db *store.DB, asks []leaseAsk, least func(j int) int64, now time.Time) ([]leaseGrant, int, error) {
	grants := make([]leaseGrant, len(asks))
	tightAt := -1
	err := db.InSeparateTx(ctx, func(tx *store.Tx) error {
		tightAt = -1
		for j, a := range asks {
			// Never more than half of what remains: as much is always
			// left for the other processes. Most writes find that half
			// larger than what they want, and take it in one conditional
			// update; the others read what remains first.
			g, whole := a.want, false
			if a.want >= least(j) && a.want <= a.limit/2 {
				res, err := tx.Exec(ctx, `UPDATE shim_spend_totals SET amount = amount + ? WHERE scope = ? AND period = ? AND amount <= ?`,
					a.want, a.k.scope, a.k.period, a.limit-2*a.want)
				if err != nil {
					return fmt.Errorf("store: lease: %w", err)
				}
				n, _ := res.RowsAffected()
				whole = n == 1
			}
			if !whole {
				if _, err := tx.Exec(ctx, `INSERT INTO shim_spend_totals (scope, period, amount) VALUES (?, ?, 0)
					ON CONFLICT (scope, period) DO NOTHING`, a.k.scope, a.k.period); err != nil {
					return fmt.Errorf("store: lease: %w", err)
				}
				var cur int64
				if err := tx.QueryRow(ctx, `SELECT amount FROM shim_spend_totals WHERE scope = ? AND period = ?`+tx.Dialect().ForUpdate(),
					a.k.scope, a.k.period).Scan(&cur); err != nil {
					return fmt.Errorf("store: lease: %w", err)
				}
				g = min(a.want, (a.limit-cur)/2)
				if g < least(j) {
					tightAt = j
					return errTight
				}
				if err := addToTotal(ctx, tx, a.k.scope, a.k.period, g); err != nil {
					return fmt.Errorf("store: lease: %w", err)
				}
			}
			id := a.id
			topped := false
			if id != "" {
				res, err := tx.Exec(ctx, `UPDATE shim_spend_leases SET amount = amount + ?, updated_at = ? WHERE id = ? AND state = ?`,
					g, store.Micros(now), id, leaseOpen)
				if err != nil {
					return fmt.Errorf("store: lease: %w", err)
				}
				n, _ := res.RowsAffected()
				topped = n == 1
			}
			if !topped {
				// The first lease of this total, or the last one was
				// released by the stale sweep: a new row.
				id = b.holder + "_" + strconv.FormatInt(b.seq.Add(1), 10)
				if _, err := tx.Exec(ctx, `INSERT INTO shim_spend_leases (id, scope, period, amount, state, created_at, updated_at)
					VALUES (?, ?, ?, ?, ?, ?, ?)`, id, a.k.scope, a.k.period, g, leaseOpen, store.Micros(now), store.Micros(now)); err != nil {
					return fmt.Errorf("store: lease: %w", err)
				}
			}
			grants[j] = leaseGrant{id: id, amount: g}
		}
		return nil
	})
	return grants, tightAt, err
}

// refillLow starts a background top-up of the leases of ps that hold less
// than 1/refillAt of their last grant, so the attempts after this one find
// enough in them and do not wait for a lease write. A lease already being
// topped up, one whose budget was found tight a moment ago, and any while
// the leases are being returned, are left alone. b.mu is held.
func (b *leaseBook) refillLow(ps [4]spendTotal, now time.Time) {
	if b.quiet > 0 {
		return
	}
	var low []leaseKey
	for _, p := range ps {
		if p.limit == unbounded {
			continue
		}
		k := leaseKey{p.scope, p.period}
		l := b.leases[k]
		if l == nil || l.id == "" || l.refilling || l.free >= l.size/refillAt || now.Before(l.tightUntil) {
			continue
		}
		l.refilling = true
		low = append(low, k)
	}
	if len(low) == 0 {
		return
	}
	b.refills.Add(1)
	go b.refill(low)
}

// refill tops up the leases of the totals ks in one write, in the
// background: each by leaseAttempts times the largest amount carved from it
// since its last lease, within half of what remains of its budget. A total
// with less than one such attempt left to lease is tight: nothing is
// written, and its attempts reserve in the store for tightFor. A failure
// leaves the leases as they were (an attempt that finds too little leases
// itself, as without refills).
func (b *leaseBook) refill(ks []leaseKey) {
	defer b.refills.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// One lease writer at a time: a waiting attempt then finds the top-up.
	b.leasing.Lock()
	defer b.leasing.Unlock()
	now := b.db.Now()
	b.mu.Lock()
	var asks []leaseAsk
	var ls []*lease
	var least []int64
	for _, k := range ks {
		l := b.leases[k]
		if l == nil || !l.refilling {
			continue
		}
		l.refilling = false
		if l.id == "" || l.free >= l.size/refillAt {
			continue // topped up meanwhile by an attempt that could not wait
		}
		asks = append(asks, leaseAsk{k: k, id: l.id, want: l.want(now), limit: l.limit})
		ls = append(ls, l)
		least = append(least, max(l.maxSeen, 1))
	}
	b.mu.Unlock()
	if len(asks) == 0 {
		return
	}
	grants, tightAt, err := b.take(ctx, b.db.Background(), asks, func(j int) int64 { return least[j] }, now)
	b.mu.Lock()
	defer b.mu.Unlock()
	if errors.Is(err, errTight) {
		ls[tightAt].tightUntil = now.Add(tightFor)
		return
	}
	if err != nil {
		return
	}
	for j, a := range asks {
		l := ls[j]
		if b.leases[a.k] != l {
			// Given back and forgotten meanwhile is not possible (that
			// takes b.leasing); keep what was granted where it can be
			// given back.
			b.leases[a.k] = l
		}
		if l.id != grants[j].id {
			// The sweep released the row: what memory held for it is gone.
			l.id, l.free = grants[j].id, 0
		}
		l.free += grants[j].amount
		l.size = grants[j].amount
		l.written, l.maxSeen, l.asked = now, 0, 0
	}
}

// want is what a lease or top-up of l asks for at now (see leaseAttempts).
func (l *lease) want(now time.Time) int64 {
	one := max(l.maxSeen, 1)
	w := leaseAttempts * one
	if since := now.Sub(l.written); since > 0 && l.asked > 0 && !l.written.IsZero() {
		w = max(w, int64(float64(l.asked)*float64(leaseHorizon)/float64(since)))
	}
	return min(w, leaseMaxAttempts*one)
}

// tick gives back idle leases and those of past periods, and runs again
// while leases remain.
func (b *leaseBook) tick() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.expire(ctx, b.db.Now())
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.timer == nil {
		return // stopped by Return
	}
	if len(b.leases) > 0 {
		b.timer.Reset(leaseIdle)
	} else {
		b.timer = nil
	}
}

// expire gives back the leases of periods other than now's and those idle
// for leaseIdle. A failure leaves them to the next try (or the sweep).
func (b *leaseBook) expire(ctx context.Context, now time.Time) {
	day, month := now.UTC().Format("2006-01-02"), now.UTC().Format("2006-01")
	_, _ = b.giveBack(ctx, func(k leaseKey, l *lease) bool {
		return (k.period != day && k.period != month) || now.Sub(l.used) >= leaseIdle
	}, true)
}

// giveBack returns to the store what the picked leases hold unused, in one
// write, and reports how much; drop forgets them. Their rows stay open
// for the attempts already carved from them, which settle against them.
func (b *leaseBook) giveBack(ctx context.Context, pick func(leaseKey, *lease) bool, drop bool) (int64, error) {
	type back struct {
		k    leaseKey
		l    *lease
		id   string
		free int64
	}
	var items []back
	// No lease write (an attempt's, a refill) runs meanwhile.
	b.leasing.Lock()
	defer b.leasing.Unlock()
	b.mu.Lock()
	for k, l := range b.leases {
		if !pick(k, l) {
			continue
		}
		if l.id != "" && l.free > 0 {
			items = append(items, back{k, l, l.id, l.free})
			l.free = 0
		}
		if drop {
			delete(b.leases, k)
		}
	}
	b.mu.Unlock()
	if len(items) == 0 {
		return 0, nil
	}
	slices.SortFunc(items, func(x, y back) int { return x.k.compare(y.k) })
	now := b.db.Now()
	err := b.db.InSeparateTx(ctx, func(tx *store.Tx) error {
		for _, it := range items {
			// The total first, then the lease, as every transaction
			// locks them.
			if err := addToTotal(ctx, tx, it.k.scope, it.k.period, -it.free); err != nil {
				return fmt.Errorf("store: return lease: %w", err)
			}
			res, err := tx.Exec(ctx, `UPDATE shim_spend_leases SET amount = amount - ?, updated_at = ? WHERE id = ? AND state = ?`,
				it.free, store.Micros(now), it.id, leaseOpen)
			if err != nil {
				return fmt.Errorf("store: return lease: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				// Released by the sweep, which took it out already.
				if err := addToTotal(ctx, tx, it.k.scope, it.k.period, it.free); err != nil {
					return fmt.Errorf("store: return lease: %w", err)
				}
			}
		}
		return nil
	})
	if err != nil {
		b.mu.Lock()
		for _, it := range items {
			l := b.leases[it.k]
			if l == nil && drop {
				l = it.l
				b.leases[it.k] = l
			}
			if l == it.l && l.id == it.id {
				l.free += it.free
			}
		}
		b.mu.Unlock()
		return 0, err
	}
	var sum int64
	for _, it := range items {
		sum += it.free
	}
	return sum, nil
}

// ReturnLeases gives back everything this process leased and has not
// used, and stops the idle expiry; the shim calls it on shutdown. It
// reports the amount returned, in microdollars. Attempts still in flight
// settle against their leases as usual. A later reservation leases anew.
func (s *Ledger) ReturnLeases(ctx context.Context) (int64, error) {
	if s.book == nil {
		return 0, nil
	}
	b := s.book
	b.stop()
	defer func() {
		b.mu.Lock()
		b.quiet--
		b.mu.Unlock()
	}()
	// The settlements still in the journal first: what they leave of the
	// leases is what goes back.
	if err := s.flushJournal(ctx); err != nil {
		return 0, err
	}
	return b.giveBack(ctx, func(leaseKey, *lease) bool { return true }, true)
}

// ExpireLeases gives back, now, the leases idle for a minute or of a past
// day or month (a timer does it every minute).
func (s *Ledger) ExpireLeases(ctx context.Context) {
	if s.book != nil {
		s.book.expire(ctx, s.db.Now())
	}
}

// Beat says this process is alive and holds leases: its row in
// shim_ledger_holders is written with the store's time. If the row was
// gone though this process had written it (another process's sweep took it
// for dead and released its leases), the leases in memory are dropped, so
// later attempts lease anew rather than carve from released slices.
func (s *Ledger) Beat(ctx context.Context) error {
	if s.book == nil {
		return nil
	}
	b := s.book
	now := store.Micros(s.db.Now())
	res, err := s.db.Exec(ctx, `UPDATE shim_ledger_holders SET seen_at = ? WHERE holder = ?`, now, b.holder)
	if err != nil {
		return fmt.Errorf("store: ledger beat: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		b.beaten.Store(true)
		return nil
	}
	if b.beaten.Load() {
		b.mu.Lock()
		b.leases = map[leaseKey]*lease{}
		b.mu.Unlock()
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO shim_ledger_holders (holder, seen_at) VALUES (?, ?)
		ON CONFLICT (holder) DO UPDATE SET seen_at = excluded.seen_at`, b.holder, now); err != nil {
		return fmt.Errorf("store: ledger beat: %w", err)
	}
	b.beaten.Store(true)
	return nil
}

// ReleaseDead releases the open leases of every holder last seen before
// seenBefore (its process died: kill -9, a lost machine), writes the
// settlements left in receipts whose turn began before seenBefore (a live
// process's journal writes them within milliseconds; writing one twice is
// refused), then releases the reservations those holders made in the
// store and left open (their calls died with them), and forgets the
// holders. What the leases held leaves
// the totals, so the other processes can spend it. It reports how many
// leases it released and settlements it wrote. A live process beats far
// more often than the sweep's threshold; see Beat for one that was taken
// for dead.
func (s *Ledger) ReleaseDead(ctx context.Context, seenBefore time.Time) (int, error) {
	dead, err := store.AppendRows([]string(nil), store.QueryRows(ctx, s.db, "holder", store.ScanValue[string],
		`SELECT holder FROM shim_ledger_holders WHERE seen_at < ?`, store.Micros(seenBefore)))
	if err != nil {
		return 0, fmt.Errorf("store: dead lease holders: %w", err)
	}
	n := 0
	for _, h := range dead {
		m, err := s.releaseLeases(ctx, `substr(id, 1, ?) = ?`, []any{len(h) + 1, h + "_"}, func(int64) bool { return true })
		n += m
		if err != nil {
			return n, err
		}
	}
	// The settlements first: a stored reservation its receipt settled is
	// settled, not released.
	k, err := s.recoverJournal(ctx, seenBefore)
	n += k
	if err != nil {
		return n, err
	}
	for _, h := range dead {
		m, err := s.releaseReserved(ctx, `holder = ?`, h)
		n += m
		if err != nil {
			return n, err
		}
		if _, err := s.db.Exec(ctx, `DELETE FROM shim_ledger_holders WHERE holder = ? AND seen_at < ?`, h, store.Micros(seenBefore)); err != nil {
			return n, fmt.Errorf("store: dead lease holders: %w", err)
		}
	}
	return n, nil
}

// releaseStaleLeases releases the leases not written since cutoff: their
// process died holding them. What they held leaves the totals.
func (s *Ledger) releaseStaleLeases(ctx context.Context, cutoff time.Time) (int, error) {
	c := store.Micros(cutoff)
	return s.releaseLeases(ctx, `updated_at < ?`, []any{c}, func(updated int64) bool { return updated < c })
}

// releaseLeases releases the open leases where (a condition on
// shim_spend_leases with args) holds, each in a transaction of its own
// that first checks again that it is open and still (by its updated_at)
// to be released.
func (s *Ledger) releaseLeases(ctx context.Context, where string, args []any, still func(updated int64) bool) (int, error) {
	rows, err := s.db.Query(ctx, `SELECT id FROM shim_spend_leases WHERE state = ? AND `+where, append([]any{leaseOpen}, args...)...)
	if err != nil {
		return 0, fmt.Errorf("store: stale leases: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("store: stale leases: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("store: stale leases: %w", err)
	}
	n := 0
	for _, id := range ids {
		released := false
		err := s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
			released = false
			var scope, period, state string
			var amount, updated int64
			if err := tx.QueryRow(ctx, `SELECT scope, period, amount, state, updated_at FROM shim_spend_leases WHERE id = ?`+tx.Dialect().ForUpdate(), id).
				Scan(&scope, &period, &amount, &state, &updated); err != nil {
				return fmt.Errorf("store: stale leases: %w", err)
			}
			if state != leaseOpen || !still(updated) {
				return nil // written meanwhile
			}
			if _, err := tx.Exec(ctx, `UPDATE shim_spend_leases SET state = ?, updated_at = ? WHERE id = ?`, leaseReleased, store.Micros(s.db.Now()), id); err != nil {
				return fmt.Errorf("store: stale leases: %w", err)
			}
			if err := addToTotal(ctx, tx, scope, period, -amount); err != nil {
				return fmt.Errorf("store: stale leases: %w", err)
			}
			released = true
			return nil
		})
		if err != nil {
			return n, err
		}
		if released {
			n++
		}
	}
	return n, nil
}
