package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"iter"
)

// Scanner is one row to scan: a *sql.Row, or the current row of a *sql.Rows.
type Scanner interface{ Scan(...any) error }

// QueryRows runs a read on q and yields its rows in order, each made a T by
// scan. A failure of the read, of a scan or of the iteration is yielded once,
// wrapped "store: what: ...", and ends the sequence. The rows are closed when
// the sequence ends or the loop over it stops early.
func QueryRows[T any](ctx context.Context, q Querier, what string, scan func(Scanner) (T, error), query string, args ...any) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		fail := func(err error) {
			var zero T
			yield(zero, fmt.Errorf("store: %s: %w", what, err))
		}
		rows, err := q.Query(ctx, query, args...)
		if err != nil {
			fail(err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			x, err := scan(rows)
			if err != nil {
				fail(err)
				return
			}
			if !yield(x, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			fail(err)
		}
	}
}

// EachRow hands the rows of seq to fn in order and stops at the first error,
// seq's or fn's, which it returns as it is.
func EachRow[T any](seq iter.Seq2[T, error], fn func(T) error) error {
	for x, err := range seq {
		if err == nil {
			err = fn(x)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// AppendRows appends the rows of seq to out and returns it: with no rows,
// out as given (nil, or an empty slice for a list that must encode as []).
// On a failure it returns nil and the error.
func AppendRows[T any](out []T, seq iter.Seq2[T, error]) ([]T, error) {
	err := EachRow(seq, func(x T) error {
		out = append(out, x)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanValue scans a row of one column into a T.
func ScanValue[T any](row Scanner) (T, error) {
	var v T
	err := row.Scan(&v)
	return v, err
}

// ScanJSON scans a row of one column, a JSON document, into a T.
func ScanJSON[T any](row Scanner) (T, error) {
	var v T
	var doc string
	if err := row.Scan(&doc); err != nil {
		return v, err
	}
	return v, json.Unmarshal([]byte(doc), &v)
}

// RowsAffected is the number of rows a statement changed, from the two
// results of its Exec.
func RowsAffected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
