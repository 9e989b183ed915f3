// Package edge is Caduceus at the edge: the shim gate served by the same
// server and shim packages as `caduceus serve`, on a store reached through
// one small SQL port (DB) that a Cloudflare Worker answers with D1
// (deploy/cloudflare) and the tests answer with SQLite. It holds no rule of
// its own: triggers, shimming, direct answers, receipts, CAS versions,
// tenant isolation and the public routes are the shim's and the server's;
// this package stores their rows in D1's dialect (SQLite) with single
// statements, because D1 has no interactive transactions.
package edge

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// DB is the SQL the edge's stores run on. Each call is one statement, run
// on its own (D1 runs each in its own implicit transaction). Arguments are
// strings, int64s and nil; Query's rows hold what the driver returns for
// TEXT and INTEGER columns (D1: string and float64; SQLite: string and
// int64), which Row reads.
type DB interface {
	Query(ctx context.Context, query string, args ...any) ([]Row, error)
	// Exec runs a statement and returns how many rows it changed.
	Exec(ctx context.Context, query string, args ...any) (changes int64, err error)
	// Batch runs statements in order in one transaction (D1's batch): all
	// of them, or, when one fails, none, and that one's error.
	Batch(ctx context.Context, stmts []Statement) error
}

// Statement is one statement of a Batch.
type Statement struct {
	SQL  string
	Args []any
}

// execAll runs stmts one by one (each its own transaction).
func execAll(ctx context.Context, db DB, stmts []Statement) error {
	for _, st := range stmts {
		if _, err := db.Exec(ctx, st.SQL, st.Args...); err != nil {
			return err
		}
	}
	return nil
}

// Row is one result row, its values in column order.
type Row []any

// Str returns column i as a string ("" for NULL).
func (r Row) Str(i int) string {
	switch v := r[i].(type) {
	case nil:
		return ""
	case string:
		return v
	case []byte:
		return string(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

// Int returns column i as an int64 (0 for NULL).
func (r Row) Int(i int) int64 {
	switch v := r[i].(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	case bool:
		if v {
			return 1
		}
	}
	return 0
}

// Null reports whether column i is NULL.
func (r Row) Null(i int) bool { return r[i] == nil }

// micros is t in microseconds since the epoch, the stores' time column.
func micros(t time.Time) int64 { return t.UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// one runs a query expected to return at most one row; found is false when
// it returned none.
func one(ctx context.Context, db DB, query string, args ...any) (Row, bool, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	return rows[0], true, nil
}
