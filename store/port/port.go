// Package port is the store's port: the SQL that SQLite, Postgres and
// Cloudflare D1 all answer, with no driver behind it. A statement runs on
// its own (D1 runs each in an implicit transaction of its own), and a Batch
// runs statements in order in one transaction, all of them or none; there
// are no interactive transactions, because D1 has none. Statements are
// written once, with ? placeholders, in the dialect SQLite and Postgres
// share.
//
// store.DB answers the port for SQLite and Postgres (DB.Port), the Worker
// answers it with D1 (deploy/cloudflare). Stores written on the port alone,
// such as the shim gate's (shim/shimstore), run on all three; the
// conformance suites run them there.
package port

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DB is the SQL the stores written on the port run on. Arguments are
// strings, int64s and nil; Query's rows hold what the driver returns for
// TEXT and INTEGER columns (D1: string and float64; SQLite: string and
// int64; Postgres: string and int64), which Row reads.
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

// ErrUnique is what a DB's error wraps when a statement broke a unique or
// primary key constraint; errors.Is finds it (Unique).
var ErrUnique = errors.New("unique constraint")

// Unique reports whether err is a unique or primary key violation.
func Unique(err error) bool { return errors.Is(err, ErrUnique) }

// UniqueError wraps err, a unique or primary key violation the driver
// reported, so that Unique finds it and its text stays the driver's.
func UniqueError(err error) error { return uniqueError{err} }

type uniqueError struct{ err error }

func (e uniqueError) Error() string        { return e.err.Error() }
func (e uniqueError) Unwrap() error        { return e.err }
func (e uniqueError) Is(target error) bool { return target == ErrUnique }

// SQLiteUnique reports whether msg is SQLite's text for a unique or
// primary key violation, as D1 passes it on ("UNIQUE constraint failed:
// table.column").
func SQLiteUnique(msg string) bool { return strings.Contains(msg, "UNIQUE constraint failed") }

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
	case int32:
		return int64(v)
	case float64:
		return int64(v)
	case string:
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	case []byte:
		n, _ := strconv.ParseInt(string(v), 10, 64)
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

// One runs a query expected to return at most one row; found is false when
// it returned none.
func One(ctx context.Context, db DB, query string, args ...any) (Row, bool, error) {
	rows, err := db.Query(ctx, query, args...)
	if err != nil || len(rows) == 0 {
		return nil, false, err
	}
	return rows[0], true, nil
}

// Micros is t in microseconds since the epoch, the stores' time column.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros is the time us microseconds after the epoch, in UTC.
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }
