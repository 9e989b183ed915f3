package store

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ErrCommitUnknown is the error (wrapped with its cause) of a Postgres
// transaction whose COMMIT was sent but whose answer never came: the
// connection broke while the result was awaited, so the server may or
// may not have committed it. It is not run again (that could commit it
// twice); the caller learns that its change may have landed, and
// IsUnavailable counts the error as the store being unavailable, never
// a success.
var ErrCommitUnknown = errors.New("store: the connection broke after COMMIT was sent: whether the transaction committed is unknown")

// IsUnavailable reports whether err says the store could not be reached
// or cannot take the write now, rather than that the statement or the data
// is wrong: the same request may succeed once the database is back. The
// server answers such a failure 503 store_unavailable with Retry-After
// (contract.Unavailable) instead of 500 internal.
//
// On Postgres: a failed connect (pgconn.ConnectError, which also covers a
// deadline reached while connecting), a connection that broke (a network
// error, an unexpected EOF, pgconn's "conn closed", driver.ErrBadConn), and
// the server's own refusals of a session: SQLSTATE class 08 (connection
// exception), 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03
// cannot_connect_now and 53300 too_many_connections; and a commit whose
// outcome is unknown (ErrCommitUnknown). On SQLite: the disk
// or the file system is full (SQLITE_FULL).
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrCommitUnknown) {
		return true
	}
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		switch c := pe.Code; {
		case strings.HasPrefix(c, "08"), c == "57P01", c == "57P02", c == "57P03", c == "53300":
			return true
		}
		return false
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		return se.Code()&0xff == sqlite3.SQLITE_FULL
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	for _, target := range []error{driver.ErrBadConn, pgconn.ErrConnClosed, io.ErrUnexpectedEOF,
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.EPIPE, syscall.ENOSPC} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}
