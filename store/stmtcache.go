package store

import (
	"context"
	"database/sql"
	"sync"
)

// stmtCache keeps prepared statements of one SQLite connection or pool.
// Parsing a statement is about a fifth of a small write transaction's cost
// in modernc's SQLite, so a query is prepared the first time it runs and
// serves every later run. The writer's cache prepares on the connection
// the batcher pins (every write runs on it); the readers' on their pool
// (database/sql prepares a pooled statement again on each connection that
// first runs it). Queries are the package's own constants plus a bounded
// set of built ones; past maxStmts nothing more is cached.
type stmtCache struct {
	mu     sync.Mutex
	m      map[string]*sql.Stmt
	closed bool
}

const maxStmts = 256

// get returns query's statement, preparing it with prepare on first use, or
// nil when it cannot be prepared (the caller then runs it unprepared, which
// reports the error) or the cache is full or closed.
func (c *stmtCache) get(ctx context.Context, query string, prepare func(context.Context, string) (*sql.Stmt, error)) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.m[query]
	full := c.closed || len(c.m) >= maxStmts
	c.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := prepare(ctx, query)
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

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for _, st := range c.m {
		st.Close()
	}
	c.m = nil
}
