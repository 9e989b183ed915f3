package store

import (
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/jackc/pgx/v5/pgconn"
)

// On Postgres a group commit's first pass (runWhole) locks the chain heads
// its transactions name before they run, and reads them: a round trip of
// its own before the one that carries the writes and the COMMIT. Most of
// the time the head it reads is the one this process's last commit left,
// so the batcher keeps, per tenant, the head (seq and hash) of the chain as
// its last committed transaction left it (knownHeads), and a batch whose
// every named tenant has one runs optimistically: the pass does not read
// the heads but checks them, with a statement that locks the head row and
// fails the transaction unless the row still holds the known head
// (checkHeads), kept and sent with the writes and the COMMIT. The pass is
// then one round trip: BEGIN, the checks (in the tenants' order, the
// first statements, so heads are still locked first and in order, see
// lockHeads), the transactions' writes, the heads' new values and COMMIT.
//
// When a head moved (another process, or a transaction outside the group
// commit, appended to that chain; or the row was changed or removed), its
// check fails, the transaction aborts and nothing of the pass commits: it
// is rolled back, answered to nobody, the batch's known heads are
// forgotten and the batch runs again as a locked pass, which reads the
// heads and fills the cache again. Heads are forgotten too whenever a
// pass or its commit fails, or its outcome is unknown; a batch with a
// tenant whose head is not known takes the locked pass.

// knownHeads is the batcher's cache of chain heads. Its methods may be
// called from any goroutine (the tests run passes from theirs).
type knownHeads struct {
	mu    sync.Mutex
	heads auditHeads
}

// cover returns the known heads of the tenants batch names, or nil when
// the batch names none or one of them has no known head.
func (k *knownHeads) cover(batch []*txReq) auditHeads {
	tenants := namedTenants(batch)
	if len(tenants) == 0 {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make(auditHeads, len(tenants))
	for _, tenant := range tenants {
		head, ok := k.heads[tenant]
		if !ok {
			return nil
		}
		out[tenant] = head
	}
	return out
}

// remember keeps heads, a committed transaction's, as known.
func (k *knownHeads) remember(heads auditHeads) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.heads == nil {
		k.heads = auditHeads{}
	}
	for tenant, head := range heads {
		head.row = true // the commit wrote it
		k.heads[tenant] = head
	}
}

// forget drops the known heads of the tenants batch names and of heads.
func (k *knownHeads) forget(batch []*txReq, heads auditHeads) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, r := range batch {
		delete(k.heads, r.tenant)
	}
	for tenant := range heads {
		delete(k.heads, tenant)
	}
}

// clear forgets every known head.
func (k *knownHeads) clear() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.heads = nil
}

// namedTenants are the tenants batch's transactions name, sorted, each
// once.
func namedTenants(batch []*txReq) []string {
	var tenants []string
	for _, r := range batch {
		if r.tenant != "" {
			tenants = append(tenants, r.tenant)
		}
	}
	slices.Sort(tenants)
	return slices.Compact(tenants)
}

// headCheck locks tenant's head row and fails the transaction (division by
// zero, SQLSTATE 22012) unless the row holds seq and hash. A row locked by
// another transaction is waited for, and then read as that transaction
// left it (READ COMMITTED re-checks the row it waited for).
const headCheck = `SELECT 1 / count(*) FROM (SELECT 1 FROM audit_heads WHERE tenant = $1 AND seq = $2 AND hash = $3 FOR UPDATE) AS head`

// checkHeads keeps, in t, a head check of every tenant known names, in the
// tenants' order, and takes those heads as t's.
func checkHeads(t *Tx, known auditHeads) {
	for _, tenant := range slices.Sorted(maps.Keys(known)) {
		head := known[tenant]
		t.later = append(t.later, laterStmt{query: headCheck, args: []any{tenant, head.seq, head.hash}, headCheck: true})
		(*t.heads)[tenant] = head
	}
}

// headMovedError reports whether err is a head check's failure.
func headMovedError(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == "22012"
}
