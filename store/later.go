package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// On Postgres every statement is a round trip to the server. In a group
// commit's first pass (batcher.runWhole) the statements whose results
// nobody reads — an audit record's INSERT, a receipt's, a chain head's
// UPDATE, entity memory — are kept (ExecLater) and sent together, in one
// pgx batch, before the next statement that reads or before the commit.
// A failure among them fails the pass as any failed statement does: it is
// rolled back and the batch runs again with a savepoint each, where
// ExecLater runs its statement at once.

// laterStmt is a statement kept for the next batch.
type laterStmt struct {
	query string
	args  []any
}

// ExecLater runs a statement whose result the caller does not read and
// whose failure may fail the whole transaction: at once, or — in a
// Postgres group commit's first pass — with the transaction's next batch
// of such statements (its error then surfaces there, and the pass runs
// again with ExecLater running at once).
func (t *Tx) ExecLater(ctx context.Context, query string, args ...any) error {
	if t.raw == nil {
		_, err := t.Exec(ctx, query, args...)
		return err
	}
	if t.failed != nil {
		return t.failed
	}
	t.later = append(t.later, laterStmt{query: t.dialect.Rebind(query), args: args})
	return nil
}

// flush sends the kept statements in one batch. A failure is kept in
// t.failed: the pass is over.
func (t *Tx) flush(ctx context.Context) error {
	if t.failed != nil || len(t.later) == 0 {
		return t.failed
	}
	later := t.later
	t.later = t.later[:0]
	err := t.raw.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		var b pgx.Batch
		for _, s := range later {
			b.Queue(s.query, s.args...)
		}
		br := c.SendBatch(context.WithoutCancel(ctx), &b)
		for range later {
			if _, err := br.Exec(); err != nil {
				br.Close()
				return err
			}
		}
		return br.Close()
	})
	if err != nil {
		t.failed = fmt.Errorf("store: batched statements: %w", err)
	}
	return t.failed
}

// ExecLater is Tx.ExecLater when q is a transaction, else q.Exec.
func ExecLater(ctx context.Context, q Querier, query string, args ...any) error {
	if t, ok := q.(*Tx); ok {
		return t.ExecLater(ctx, query, args...)
	}
	_, err := q.Exec(ctx, query, args...)
	return err
}
