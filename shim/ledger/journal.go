package ledger

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/store"
)

// Deferred settlements. A turn's receipt records every attempt's
// reservation and settlement, in the transaction that answers the turn.
// Writing the attempt's spend row, its totals and its leases there too
// cost three more statements in that commit, on the request's path. So
// the receipt's commit carries them in the receipt row instead (its ledger
// column), and the process writes them shortly after, many at once, in a
// transaction of its own that also clears the receipt's ledger column: the
// spend journal. What a process that dies leaves in receipts, the stale
// sweep writes (recoverJournal). Each attempt's spend row is written once,
// whoever writes it: its id is the row's key, and the write that finds the
// row there already does nothing.
//
// Until its spend row is written, an attempt carved from a lease still
// counts in the totals at its reservation (the lease holds it); a
// reservation the totals would refuse writes the journal first (see
// Ledger.freeHeld), so this never refuses early. An attempt whose cost passes its reservation while
// a lease holds it is not deferred: its totals move in the receipt's
// commit, as before, so that no budget is ever passed by a cost the
// totals do not show yet.
const (
	// journalBatch: this many attempts waiting start a write at once, on
	// Postgres, where the write runs beside the requests' transactions
	// (store.DB.Background). On SQLite one writer runs every transaction
	// in turn, and a turn whose commit comes while the journal writes
	// waits for it: at one connection a write of 32 (330-650 µs) set
	// the governed p99. There a write starts at journalBatchSQLite: it
	// ends before the next turn's commit comes, or shares that commit
	// under load (InSeparateTx joins the group commit there). Measured
	// against 32, at one connection, quiet, in the bench's process: the
	// governed p99 over the pass-through's 0.37-0.41 ms against
	// 0.67-0.71, CPU per request level; at sixteen, CPU level.
	journalBatch       = 32
	journalBatchSQLite = 4
	// journalDelay: the longest an attempt waits for its write while the
	// store answers (a failed write is tried again after journalRetry).
	journalDelay = 20 * time.Millisecond
	journalRetry = time.Second
	// journalStale: a receipt whose settlements are still not written
	// this long after its turn began was left by a process that died (or
	// cannot write); the stale sweep writes them.
	journalStale = time.Minute
	// journalChunk: receipts or spend rows per statement of a journal
	// write (12 parameters a row: far below either database's limit).
	journalChunk = 100
)

// ledgerEntry is one attempt's close as a receipt carries it.
type ledgerEntry struct {
	ID     string    `json:"id"`
	KeyID  string    `json:"key"`
	Model  string    `json:"model"`
	Day    string    `json:"day"`
	Month  string    `json:"month"`
	Amount int64     `json:"amount"`
	Leases [4]string `json:"leases"`
	State  string    `json:"state"`
	Final  int64     `json:"final"`
	At     int64     `json:"at"` // when it closed, microseconds
	// Estimated: Final is the gateway's estimate, not usage.
	Estimated bool `json:"estimated,omitempty"`
}

// encodeLedger is the JSON of entries, as encoding/json writes it (the
// field names of ledgerEntry's tags, in its order) but for <, > and &,
// left unescaped, written by hand: it is on every forwarded request's path
// (the figure against json.Marshal is in the package doc).
func encodeLedger(entries []ledgerEntry) []byte {
	var b bytes.Buffer
	b.Grow(256 * len(entries))
	b.WriteByte('[')
	for i, e := range entries {
		if i > 0 {
			b.WriteByte(',')
		}
		str := func(key, v string) {
			b.WriteString(key)
			contract.WriteJSONString(&b, v)
		}
		num := func(key string, v int64) {
			b.WriteString(key)
			b.Write(strconv.AppendInt(b.AvailableBuffer(), v, 10))
		}
		str(`{"id":`, e.ID)
		str(`,"key":`, e.KeyID)
		str(`,"model":`, e.Model)
		str(`,"day":`, e.Day)
		str(`,"month":`, e.Month)
		num(`,"amount":`, e.Amount)
		b.WriteString(`,"leases":[`)
		for j, l := range e.Leases {
			if j > 0 {
				b.WriteByte(',')
			}
			contract.WriteJSONString(&b, l)
		}
		b.WriteByte(']')
		str(`,"state":`, e.State)
		num(`,"final":`, e.Final)
		num(`,"at":`, e.At)
		if e.Estimated {
			b.WriteString(`,"estimated":true`)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes()
}

// ticket is the attempt's ticket in tenant.
func (e ledgerEntry) ticket(tenant contract.TenantSlot) upstream.Ticket {
	return upstream.Ticket{Reservation: upstream.Reservation{ID: e.ID, Tenant: tenant, KeyID: e.KeyID, Identity: e.Model,
		Amount: upstream.Microdollars(e.Amount)}, Day: e.Day, Month: e.Month, Leases: e.Leases, Estimated: e.Estimated}
}

// splitCloses divides the closes a gateway left to a turn's commit into
// those the journal takes (their spend rows written later) and those the
// commit makes itself: a reservation stored one by one, and a cost past
// the reservation of an attempt a lease holds.
func splitCloses(attempts []gateway.Attempt, now time.Time) (deferred []ledgerEntry, inCommit []gateway.Attempt) {
	for _, a := range attempts {
		var state string
		var final int64
		switch a.Closing {
		case gateway.CloseSettle:
			state, final = spendSettled, a.Settled
		case gateway.CloseRelease:
			state = spendReleased
		default:
			continue
		}
		t := a.Ticket
		leased := t.Leases != [4]string{}
		if t.Stored || t.ID == "" || t.Day == "" || t.Month == "" || final < 0 || (leased && final > int64(t.Amount)) {
			inCommit = append(inCommit, a)
			continue
		}
		deferred = append(deferred, ledgerEntry{ID: t.ID, KeyID: t.KeyID, Model: t.Identity, Day: t.Day, Month: t.Month,
			Amount: int64(t.Amount), Leases: t.Leases, State: state, Final: final, At: store.Micros(now), Estimated: t.Estimated && state == spendSettled})
	}
	return deferred, inCommit
}

// journaled is one receipt's deferred closes.
type journaled struct {
	tenant  contract.TenantSlot
	receipt string
	entries []ledgerEntry
}

// spendJournal is one store's deferred closes not written yet.
type spendJournal struct {
	db *store.DB
	// batch and delay: a write starts once batch closes wait, or delay
	// after the first (journalBatch or journalBatchSQLite, journalDelay;
	// tests hold them).
	batch   int
	delay   time.Duration
	writing sync.Mutex // one write at a time, in the order taken
	mu      sync.Mutex // guards what follows
	pending []journaled
	n       int // entries pending
	timer   *time.Timer
	kicked  bool // a write for a full batch is starting
	closed  bool // the store is closing: no more retries
	bg      sync.WaitGroup
}

// journalOf is db's spend journal, made on first use.
func journalOf(db *store.DB) *spendJournal {
	db = db.Main()
	p := processOf(db)
	p.journalOnce.Do(func() {
		batch := journalBatch
		if db.Dialect() != store.Postgres {
			batch = journalBatchSQLite
		}
		p.journal = &spendJournal{db: db, batch: batch, delay: journalDelay}
	})
	return p.journal
}

// add takes a committed receipt's deferred closes: written with the next
// batch, within journalDelay.
func (j *spendJournal) add(tenant contract.TenantSlot, receipt string, entries []ledgerEntry) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pending = append(j.pending, journaled{tenant: tenant, receipt: receipt, entries: entries})
	j.n += len(entries)
	if j.closed {
		return // the receipt keeps them, for the stale sweep
	}
	if j.n >= j.batch && !j.kicked {
		j.kicked = true
		j.bg.Add(1)
		go func() {
			defer j.bg.Done()
			j.writeLater()
		}()
		return
	}
	if j.timer == nil {
		j.timer = time.AfterFunc(j.delay, j.writeLater)
	}
}

// writeLater writes what is pending, from a timer or a full batch; a
// failure keeps it pending and tries again after journalRetry.
func (j *spendJournal) writeLater() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := j.write(ctx); err != nil {
		j.mu.Lock()
		if j.timer == nil && j.n > 0 && !j.closed {
			j.timer = time.AfterFunc(journalRetry, j.writeLater)
		}
		j.mu.Unlock()
	}
}

// write writes every close pending, in one transaction, and clears their
// receipts' ledger columns. On failure they stay pending.
func (j *spendJournal) write(ctx context.Context) error {
	j.writing.Lock()
	defer j.writing.Unlock()
	j.mu.Lock()
	batch, n := j.pending, j.n
	j.pending, j.n, j.kicked = nil, 0, false
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	j.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	// No request waits for it (Ledger.freeHeld does, rarely: a budget
	// nearly used): on Postgres it runs beside the requests' connections.
	err := j.db.Background().InSeparateTx(ctx, func(tx *store.Tx) error { return writeJournal(ctx, tx, slices.Clone(batch)) })
	if err != nil {
		j.mu.Lock()
		j.pending = append(batch, j.pending...)
		j.n += n
		j.mu.Unlock()
		return fmt.Errorf("store: spend journal: %w", err)
	}
	return nil
}

// close writes what is pending and stops the timers: the store is closing.
// What it cannot write stays in the receipts, for the stale sweep.
func (j *spendJournal) close(ctx context.Context) {
	j.mu.Lock()
	j.closed = true
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	j.mu.Unlock()
	j.bg.Wait()
	_ = j.write(ctx)
}

// writeJournal writes the deferred closes of batch inside tx, each once
// (an attempt whose spend row is there already was written by the stale
// sweep, or by this process before), and clears the receipts' ledger
// columns. It takes its locks in the order every ledger transaction takes
// them — the receipts first (as the stale sweep does), then the totals
// sorted as leaseKey.compare orders them, then the leases — and moves each
// total and each lease once, by the sum of what its attempts moved.
func writeJournal(ctx context.Context, tx *store.Tx, batch []journaled) error {
	slices.SortFunc(batch, func(a, b journaled) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.receipt, b.receipt))
	})
	if err := clearLedgerColumns(ctx, tx, batch); err != nil {
		return fmt.Errorf("store: spend journal: %w", err)
	}
	var rows []spendRow
	for _, r := range batch {
		for _, e := range r.entries {
			t := e.ticket(r.tenant)
			if t.ID == "" || t.Day == "" || t.Month == "" {
				return contract.Invalidf("bad_reservation", "a ticket needs an id and its periods")
			}
			rows = append(rows, spendRow{t, e})
		}
	}
	written, err := insertSpendRows(ctx, tx, rows)
	if err != nil {
		return fmt.Errorf("store: spend journal: %w", err)
	}
	var m ledgerMoves
	moved := map[string]bool{}
	for _, x := range rows {
		if written[x.t.ID] && !moved[x.t.ID] {
			moved[x.t.ID] = true
			m.add(x.t, x.e.Final)
		}
	}
	return m.write(ctx, tx)
}

// spendRow is a journaled close as its shim_spend row.
type spendRow struct {
	t upstream.Ticket
	e ledgerEntry
}

// clearLedgerColumns clears the ledger column of batch's receipts. On
// Postgres it is one statement whatever the batch's size, its receipts
// given as arrays, so the server plans it once; elsewhere a statement per
// journalChunk receipts (SQLite has no arrays).
func clearLedgerColumns(ctx context.Context, tx *store.Tx, batch []journaled) error {
	if tx.Dialect() == store.Postgres {
		tenants, ids := make([]string, len(batch)), make([]string, len(batch))
		for i, r := range batch {
			tenants[i], ids[i] = string(r.tenant), r.receipt
		}
		_, err := tx.Exec(ctx, `UPDATE shim_receipts SET ledger = NULL FROM unnest(?::text[], ?::text[]) AS u (tenant, id)
WHERE shim_receipts.tenant = u.tenant AND shim_receipts.id = u.id`, tenants, ids)
		return err
	}
	for part := range slices.Chunk(batch, journalChunk) {
		var q strings.Builder
		args := make([]any, 0, 2*len(part))
		q.WriteString(`UPDATE shim_receipts SET ledger = NULL WHERE `)
		for i, r := range part {
			if i > 0 {
				q.WriteString(" OR ")
			}
			q.WriteString(`(tenant = ? AND id = ?)`)
			args = append(args, string(r.tenant), r.receipt)
		}
		if _, err := tx.Exec(ctx, q.String(), args...); err != nil {
			return err
		}
	}
	return nil
}

// insertSpendRows inserts rows, each unless its id is there already (the
// stale sweep, or this process, wrote it before), and reports the ids it
// wrote. On Postgres it is one statement over arrays, planned once;
// elsewhere a statement per journalChunk rows.
func insertSpendRows(ctx context.Context, tx *store.Tx, rows []spendRow) (map[string]bool, error) {
	written := make(map[string]bool, len(rows))
	collect := func(q string, args ...any) error {
		return store.EachRow(store.QueryRows(ctx, tx, "spend journal", store.ScanValue[string], q, args...), func(id string) error {
			written[id] = true
			return nil
		})
	}
	if tx.Dialect() == store.Postgres {
		n := len(rows)
		ids, tenants, keys, models, days, months, states := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		reserved, ats, estimated := make([]int64, n), make([]int64, n), make([]int64, n)
		settled := make([]*int64, n)
		for i, x := range rows {
			ids[i], tenants[i], keys[i], models[i], days[i], months[i], states[i] = x.t.ID, string(x.t.Tenant), x.t.KeyID, x.t.Identity, x.t.Day, x.t.Month, x.e.State
			reserved[i], ats[i], estimated[i] = x.e.Amount, x.e.At, int64(flag(x.e.Estimated))
			if x.e.State == spendSettled {
				settled[i] = &x.e.Final
			}
		}
		return written, collect(`INSERT INTO shim_spend (id, tenant, key_id, model, day, month, reserved, settled, state, created_at, updated_at, estimated)
SELECT id, tenant, key_id, model, day, month, reserved, settled, state, at, at, estimated
FROM unnest(?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::text[], ?::bigint[], ?::bigint[], ?::text[], ?::bigint[], ?::int[])
  AS u (id, tenant, key_id, model, day, month, reserved, settled, state, at, estimated)
ON CONFLICT (id) DO NOTHING RETURNING id`, ids, tenants, keys, models, days, months, reserved, settled, states, ats, estimated)
	}
	for part := range slices.Chunk(rows, journalChunk) {
		var q strings.Builder
		args := make([]any, 0, 12*len(part))
		q.WriteString(`INSERT INTO shim_spend (id, tenant, key_id, model, day, month, reserved, settled, state, created_at, updated_at, estimated) VALUES `)
		for i, x := range part {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
			settled := sql.NullInt64{Int64: x.e.Final, Valid: x.e.State == spendSettled}
			args = append(args, x.t.ID, string(x.t.Tenant), x.t.KeyID, x.t.Identity, x.t.Day, x.t.Month, x.e.Amount, settled, x.e.State, x.e.At, x.e.At, flag(x.e.Estimated))
		}
		q.WriteString(` ON CONFLICT (id) DO NOTHING RETURNING id`)
		if err := collect(q.String(), args...); err != nil {
			return nil, err
		}
	}
	return written, nil
}

// ledgerMoves is what closing attempts without a stored reservation does
// to the totals and the leases: each total moves by the attempts' costs,
// less, for a total an attempt's lease held, its reservation, which leaves
// that lease.
type ledgerMoves struct {
	totals  map[leaseKey]int64 // how much each total moves
	leased  map[string]int64   // how much leaves each lease
	leaseOf map[string]leaseKey
	ofLease map[leaseKey]bool // the totals of those leases
}

// add counts the close of t at final.
func (m *ledgerMoves) add(t upstream.Ticket, final int64) {
	if m.totals == nil {
		m.totals, m.leased, m.leaseOf, m.ofLease = map[leaseKey]int64{}, map[string]int64{}, map[string]leaseKey{}, map[leaseKey]bool{}
	}
	amount := int64(t.Amount)
	for i, p := range ticketTotals(t) {
		k := leaseKey{p[0], p[1]}
		delta := final
		if id := t.Leases[i]; id != "" {
			delta -= amount
			m.leased[id] += amount
			m.leaseOf[id], m.ofLease[k] = k, true
		}
		m.totals[k] += delta
	}
}

// write moves the totals and the leases inside tx, each once, in the
// order every ledger transaction locks them: the totals as
// leaseKey.compare sorts them (one statement), then the leases by id. A
// lease the stale sweep released took what it held out of its total
// already: the reservations carved from it leave that total once.
func (m *ledgerMoves) write(ctx context.Context, tx *store.Tx) error {
	keys := slices.SortedFunc(maps.Keys(m.totals), leaseKey.compare)
	var q strings.Builder
	var args []any
	for _, k := range keys {
		// A total of a lease moves even by nothing: its row is locked
		// before the lease's.
		if m.totals[k] == 0 && !m.ofLease[k] {
			continue
		}
		if len(args) == 0 {
			q.WriteString(`INSERT INTO shim_spend_totals (scope, period, amount) VALUES (?, ?, ?)`)
		} else {
			q.WriteString(`, (?, ?, ?)`)
		}
		args = append(args, k.scope, k.period, m.totals[k])
	}
	if len(args) > 0 {
		q.WriteString(` ON CONFLICT (scope, period) DO UPDATE SET amount = shim_spend_totals.amount + excluded.amount`)
		if _, err := tx.Exec(ctx, q.String(), args...); err != nil {
			return fmt.Errorf("store: ledger totals: %w", err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(m.leased)) {
		res, err := tx.Exec(ctx, `UPDATE shim_spend_leases SET amount = amount - ? WHERE id = ? AND state = ?`, m.leased[id], id, leaseOpen)
		if err != nil {
			return fmt.Errorf("store: ledger leases: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			continue
		}
		k := m.leaseOf[id]
		if err := addToTotal(ctx, tx, k.scope, k.period, m.leased[id]); err != nil {
			return fmt.Errorf("store: ledger totals: %w", err)
		}
	}
	return nil
}

// flushJournal writes this process's deferred closes now, so that what it
// reads next counts them.
func (s *Ledger) flushJournal(ctx context.Context) error {
	return journalOf(s.db).write(ctx)
}

// recoverJournal writes the deferred closes of receipts whose turn began
// before cutoff and whose process did not write them (it died, or cannot
// write), and reports how many it wrote.
func (s *Ledger) recoverJournal(ctx context.Context, cutoff time.Time) (int, error) {
	rows, err := s.db.Query(ctx, `SELECT tenant, id, at FROM shim_receipts WHERE ledger IS NOT NULL`)
	if err != nil {
		return 0, fmt.Errorf("store: stale spend journal: %w", err)
	}
	type key struct{ tenant, id string }
	var left []key
	for rows.Next() {
		var k key
		var at string
		if err := rows.Scan(&k.tenant, &k.id, &at); err != nil {
			rows.Close()
			return 0, fmt.Errorf("store: stale spend journal: %w", err)
		}
		if t, err := contract.ParseTimestamp(at); err == nil && !t.Before(cutoff) {
			continue // its process is likely writing it now
		}
		left = append(left, k)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("store: stale spend journal: %w", err)
	}
	n := 0
	for _, k := range left {
		wrote := 0
		err := s.db.InSeparateTx(ctx, func(tx *store.Tx) error {
			wrote = 0
			var doc sql.NullString
			err := tx.QueryRow(ctx, `SELECT ledger FROM shim_receipts WHERE tenant = ? AND id = ?`+tx.Dialect().ForUpdate(), k.tenant, k.id).Scan(&doc)
			if err != nil || !doc.Valid {
				return err // written meanwhile (NULL), or the read failed
			}
			var entries []ledgerEntry
			if err := json.Unmarshal([]byte(doc.String), &entries); err != nil {
				return fmt.Errorf("store: stale spend journal: receipt %s: %w", k.id, err)
			}
			wrote = len(entries)
			return writeJournal(ctx, tx, []journaled{{tenant: contract.TenantSlot(k.tenant), receipt: k.id, entries: entries}})
		})
		if err != nil {
			return n, fmt.Errorf("store: stale spend journal: %w", err)
		}
		n += wrote
	}
	return n, nil
}
