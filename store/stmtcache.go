package store

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared statements of the SQLite writer connection.
// Parsing a statement is about a fifth of a small write transaction's cost
// in modernc's SQLite; the writer has one connection, so a statement
// prepared once serves every transaction.
//
// A statement cannot be prepared on the writer while a transaction holds its
// only connection, so a query seen inside a transaction runs unprepared that
// time and is prepared between batches (prepareNow). Queries
// are the package's own constants plus a bounded set of built ones; past
// maxStmts nothing more is cached.
type stmtCache struct {
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool
	closed  bool
}

const maxStmts = 256

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st
	}
	if !c.closed && len(c.m)+len(c.pending) < maxStmts {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[query] = true
	}
	return nil
}

// prepareNow prepares the queries seen since the last call. The batcher
// calls it between batches, when no transaction holds the writer; it never
// holds c.mu while preparing.
func (c *stmtCache) prepareNow(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	if c.closed || len(c.pending) == 0 {
		c.mu.Unlock()
		return
	}
	queries := make([]string, 0, len(c.pending))
	for q := range c.pending {
		queries = append(queries, q)
	}
	c.mu.Unlock()
	prepared := map[string]*sql.Stmt{}
	for _, q := range queries {
		if st, err := db.PrepareContext(ctx, q); err == nil {
			prepared[q] = st
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	for _, q := range queries {
		delete(c.pending, q)
	}
	for q, st := range prepared {
		if c.closed {
			st.Close()
			continue
		}
		c.m[q] = st
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}

// readStmts keeps prepared statements of the SQLite reader pool. Unlike the
// writer, the pool can prepare at any time (database/sql prepares a pooled
// statement again on each connection that first runs it), so a query is
// prepared on first use. Bounded like stmtCache: past maxStmts, queries run
// unprepared.
type readStmts struct {
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	closed bool
}

// get returns the prepared statement of query on db, preparing it on first
// use, or nil when it cannot be prepared (then the caller runs the query
// unprepared, which reports the error).
func (c *readStmts) get(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.m[query]
	full := c.closed || len(c.m) >= maxStmts
	c.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[query]; ok || c.closed {
		st.Close()
		return prev
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st
}

func (c *readStmts) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}
