package store

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps the statements prepared on SQLite's writer connection.
// Parsing a statement is about a fifth of a small write transaction's cost
// in modernc's SQLite; the batcher owns the one writer connection (pinned
// for the store's life) and runs every write on its goroutine, so a query
// is prepared on that connection the first time it runs and serves every
// transaction after. Queries are the package's own constants plus a
// bounded set of built ones; past maxStmts nothing more is cached.
type stmtCache struct {
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	closed bool
}

const maxStmts = 256

// get returns query's statement on conn, preparing it on first use, or nil
// when it cannot be prepared (the caller then runs it unprepared, which
// reports the error) or the cache is full.
func (c *stmtCache) get(ctx context.Context, conn *sql.Conn, query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok || c.closed || len(c.m) >= maxStmts {
		return st
	}
	st, err := conn.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st
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
