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
// time and is prepared after the transaction ends (preparePending). Queries
// are the package's own constants plus a bounded set of built ones; past
// maxStmts nothing more is cached.
type stmtCache struct {
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool
}

const maxStmts = 256

func (c *stmtCache) get(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st
	}
	if len(c.m)+len(c.pending) < maxStmts {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[query] = true
	}
	return nil
}

// preparePending prepares the queries seen since the last call. It must run
// when no transaction holds the writer.
func (c *stmtCache) preparePending(ctx context.Context, db *sql.DB) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.pending) == 0 {
		return
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	for q := range c.pending {
		if st, err := db.PrepareContext(ctx, q); err == nil {
			c.m[q] = st
		}
		delete(c.pending, q)
	}
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}
