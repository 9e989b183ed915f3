package store

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// On Postgres every statement is a round trip to the server. In a group
// commit's first pass (batcher.runWhole) the transaction is driven through
// pgx's pipeline on the pass's connection:
//
//   - the statements whose results nobody reads — an audit record's
//     INSERT, a receipt's, a chain head's UPDATE, entity memory — are kept
//     (ExecLater) and sent together, in one pgx batch, with the next
//     statement that reads or with the COMMIT;
//   - BEGIN is the first kept statement, so it rides with the pass's first
//     read (the chain head's lock, ScanRow), and COMMIT rides with the last
//     kept statements (commitKept).
//
// A group commit of turns is then two round trips: BEGIN with the head's
// lock, and the writes with the COMMIT; or one, when the process knows the
// heads (known.go): the heads' checks are kept statements after BEGIN, and
// everything rides with the COMMIT. A failure among the kept statements
// fails the pass as any failed statement does: it is rolled back and the
// batch runs again — locked, when a head's check failed; else with a
// savepoint each, where ExecLater runs its statement at once. Except when
// the connection breaks once the batch with the COMMIT may have been sent
// (pipeline, commitUnknown): whether the server committed is not known,
// so the batch is not run again, but answered ErrCommitUnknown.

// laterStmt is a statement kept for the next batch; headCheck marks an
// optimistic pass's check of a chain head (checkHeads).
type laterStmt struct {
	query     string
	args      []any
	headCheck bool
}

// ExecLater runs a statement whose result the caller does not read and
// whose failure may fail the whole transaction: at once, or — in a
// Postgres group commit's first pass — with the transaction's next batch
// of such statements (its error then surfaces there, and the pass runs
// again with ExecLater running at once).
func (t *Tx) ExecLater(ctx context.Context, query string, args ...any) error {
	if t.raw == nil && !t.pipe {
		_, err := t.Exec(ctx, query, args...)
		return err
	}
	if t.failed != nil {
		return t.failed
	}
	t.later = append(t.later, laterStmt{query: t.dialect.Rebind(query), args: args})
	return nil
}

// ScanRow runs a one-row read and scans it into dest, sql.ErrNoRows when
// there is none. In a Postgres group commit's first pass the kept
// statements go with it, in one round trip.
func (t *Tx) ScanRow(ctx context.Context, dest []any, query string, args ...any) error {
	if t.raw == nil || t.failed != nil {
		return t.QueryRow(ctx, query, args...).Scan(dest...)
	}
	err := t.pipeline(ctx, laterStmt{query: t.dialect.Rebind(query), args: args}, func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(dest...)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return sql.ErrNoRows
	}
	t.stmtFailed = t.stmtFailed || err != nil
	return err
}

// flush sends the kept statements in one batch. A failure is kept in
// t.failed: the pass is over.
func (t *Tx) flush(ctx context.Context) error {
	if t.failed != nil || len(t.later) == 0 {
		return t.failed
	}
	t.pipeline(ctx, laterStmt{}, nil)
	return t.failed
}

// commitError is a COMMIT's own failure, as against a kept statement's.
type commitError struct{ err error }

func (e commitError) Error() string { return e.err.Error() }
func (e commitError) Unwrap() error { return e.err }

// commitKept sends the kept statements and COMMIT in one batch. A kept
// statement's failure is in t.failed (the pass failed: roll back and run
// again); the COMMIT's is returned as a commitError, and so is any failure
// that broke the connection once the batch may have been sent: it wraps
// ErrCommitUnknown, and the batch must not run again.
func (t *Tx) commitKept(ctx context.Context) error {
	if t.failed != nil {
		return t.failed
	}
	err := t.pipeline(ctx, laterStmt{query: "COMMIT"}, func(br pgx.BatchResults) error {
		tag, err := br.Exec()
		if err == nil && tag.String() != "COMMIT" {
			// Postgres answers COMMIT of a failed transaction with
			// ROLLBACK, and no error.
			err = pgx.ErrTxCommitRollback
		}
		if err != nil {
			return commitError{err}
		}
		return nil
	})
	if t.failed != nil {
		return t.failed
	}
	return err
}

// pipeline sends the kept statements and then tail (when its query is
// set) as one pgx batch, one round trip; read reads tail's result. The
// kept statements' failure is kept in t.failed and returned; tail's is
// returned as read returns it. When tail is COMMIT and the connection
// broke (see commitUnknown), the failure, whichever statement's result it
// came at, is returned as a commitError wrapping ErrCommitUnknown. Once anything has been sent, the pass has
// begun its transaction (t.begun), which rollbackPass must end.
func (t *Tx) pipeline(ctx context.Context, tail laterStmt, read func(pgx.BatchResults) error) error {
	later := t.later
	t.later = t.later[:0]
	t.begun = true
	var keptErr, tailErr error
	broken := false // pgx closed the connection: it broke
	err := t.raw.Raw(func(dc any) error {
		c := dc.(*stdlib.Conn).Conn()
		defer func() { broken = c.PgConn().IsClosed() }()
		var b pgx.Batch
		for _, s := range later {
			b.Queue(s.query, s.args...)
		}
		if tail.query != "" {
			b.Queue(tail.query, tail.args...)
		}
		br := c.SendBatch(context.WithoutCancel(ctx), &b)
		for _, s := range later {
			if _, keptErr = br.Exec(); keptErr != nil {
				t.headMoved = s.headCheck && headMovedError(keptErr)
				return br.Close()
			}
		}
		if tail.query != "" {
			tailErr = read(br)
		}
		return br.Close()
	})
	if cause := cmp.Or(keptErr, tailErr, err); tail.query == "COMMIT" && broken && commitUnknown(cause) {
		// The COMMIT may have been sent and carried out, and its
		// answer lost with the connection: the pass is over and what
		// it did is not known. A kept statement's failure read as such
		// would run the batch again, and commit it twice.
		return commitError{fmt.Errorf("%w: %w", ErrCommitUnknown, cause)}
	}
	if keptErr == nil && tailErr == nil && err != nil {
		// The batch itself failed (the connection, or a tail error
		// Close reported): nothing more can be told apart.
		keptErr = err
	}
	if keptErr != nil {
		t.failed = fmt.Errorf("store: batched statements: %w", keptErr)
		return t.failed
	}
	return tailErr
}

// commitUnknown reports whether err, a failure of a batch that carried a
// COMMIT on a connection that then broke, leaves the COMMIT's outcome
// unknown: it is not the server's answer (a PgError: the server refused a
// statement, so skipped the rest of the batch, COMMIT with it) and pgx
// cannot say it came before anything was sent (pgconn.SafeToRetry).
func commitUnknown(err error) bool {
	if err == nil || pgconn.SafeToRetry(err) {
		return false
	}
	_, server := errors.AsType[*pgconn.PgError](err)
	return !server
}

// rollbackPass ends a first pass's transaction that did not commit. A
// connection whose ROLLBACK fails is closed, not returned to the pool
// (which would refuse it anyway while it is inside a transaction).
func (t *Tx) rollbackPass(ctx context.Context) {
	if !t.begun {
		return
	}
	if _, err := t.raw.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.raw.Raw(func(dc any) error {
			dc.(*stdlib.Conn).Conn().Close(ctx)
			return driver.ErrBadConn
		})
	}
}

// ExecLater is Tx.ExecLater when q is a transaction, else q.Exec.
func ExecLater(ctx context.Context, q Querier, query string, args ...any) error {
	if t, ok := q.(*Tx); ok {
		return t.ExecLater(ctx, query, args...)
	}
	_, err := q.Exec(ctx, query, args...)
	return err
}
