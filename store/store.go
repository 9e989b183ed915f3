// Package store is the SQL persistence of Caduceus: one code path over
// database/sql with two dialects, SQLite (the embedded default, a file in the
// data directory) and Postgres (for several processes sharing one database).
//
// Queries are written once with ? placeholders; the DB rebinds them to $n for
// Postgres. DDL in migrations/ uses only types both dialects accept (TEXT,
// BIGINT, INTEGER, BOOLEAN, DOUBLE PRECISION). Every invariant that must hold
// across processes (idempotency, revisions, one current strategy per concern,
// the audit chain) is enforced in SQL: unique keys, conditional updates,
// transactions, never in process memory.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib" // also registers the "pgx" driver
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/internal/telemetry"
)

// Dialect is the SQL flavour of a DB.
type Dialect int

// Dialects.
const (
	SQLite Dialect = iota
	Postgres
)

func (d Dialect) String() string {
	if d == Postgres {
		return "postgres"
	}
	return "sqlite"
}

// DB is the store. Its zero value is not usable; call Open.
//
// On SQLite, writes and transactions go through a single connection (w), so
// writers queue in Go rather than spin on SQLITE_BUSY, and reads use a small
// pool of their own (r) that WAL lets run beside the writer. Code inside
// InTx must use the Tx it is given, never the DB: the writer connection is
// the transaction's.
type DB struct {
	w, r    *sql.DB
	dialect Dialect
	stmts   stmtCache     // SQLite writer statements, prepared once
	rstmts  stmtCache     // SQLite reader statements, prepared once
	batch   *batcher      // group commit
	ckpt    *checkpointer // SQLite: the write-ahead log's checkpoints
	// Now is the clock for timestamps the store writes. Tests may replace it.
	Now func() time.Time
	dsn string // Postgres: for connections of its own (LISTEN)
	// syncFull: SQLite with synchronous=FULL (sqliteOptions.full).
	syncFull bool

	// bg is Postgres's pool for work no request waits for (Background);
	// main is, in the DB Background returns, the store it is a view of.
	bg   *sql.DB
	main *DB
	back *DB // the view Background returns (Postgres)

	// parts are the objects attached to this store (Part), closed
	// before it in the reverse order of their making.
	partsMu sync.Mutex
	parts   map[any]io.Closer
	order   []io.Closer
}

// Part returns the object attached to db under key, made by make on first
// use: state a gate keeps per store and per process (the shim ledger's
// leases and journal), closed by Close before the store's connections, in
// the reverse order of their making. key is a value of an unexported type
// of the package that attaches it, as for context keys.
func (db *DB) Part(key any, make func() io.Closer) io.Closer {
	db = db.Main()
	db.partsMu.Lock()
	defer db.partsMu.Unlock()
	if p, ok := db.parts[key]; ok {
		return p
	}
	if db.parts == nil {
		db.parts = map[any]io.Closer{}
	}
	p := make()
	db.parts[key] = p
	db.order = append(db.order, p)
	return p
}

// Querier is what both DB and Tx offer: statements with ? placeholders.
type Querier interface {
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	Query(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) *sql.Row
	Dialect() Dialect
}

// DefaultFile is the SQLite file name inside the data directory.
const DefaultFile = "caduceus.db"

// Open opens the store named by dsn and runs the embedded migrations.
//
// dsn is empty (SQLite at dataDir/caduceus.db), a postgres:// or
// postgresql:// URL, or sqlite:PATH / file:PATH (an empty PATH is the data
// directory's file), optionally followed by ?synchronous=normal or
// ?synchronous=full. The SQLite file is opened with WAL, foreign keys on, a
// busy timeout and synchronous=NORMAL unless full is asked for.
func Open(ctx context.Context, dsn, dataDir string) (*DB, error) {
	var db *DB
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		db, err = openPostgres(dsn)
	case dsn == "", strings.HasPrefix(dsn, "sqlite:"), strings.HasPrefix(dsn, "file:"):
		var o sqliteOptions
		if o, err = parseSQLite(dsn); err != nil {
			return nil, err
		}
		if o.path == "" {
			if dataDir == "" {
				dataDir = ".caduceus"
			}
			if err := os.MkdirAll(dataDir, 0o700); err != nil {
				return nil, fmt.Errorf("store: data directory: %w", err)
			}
			o.path = SQLiteFile("", dataDir)
		}
		db, err = openSQLite(o)
	default:
		return nil, CheckName(dsn)
	}
	if err != nil {
		return nil, err
	}
	if err := db.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// SQLiteFile is the file of the SQLite store that dsn names with dataDir
// as Open would open it (dataDir's caduceus.db for an empty name or path),
// or "" when dsn names no SQLite store or its parameters are refused (Open
// then says why).
func SQLiteFile(dsn, dataDir string) string {
	if dsn != "" && !strings.HasPrefix(dsn, "sqlite:") && !strings.HasPrefix(dsn, "file:") {
		return ""
	}
	o, err := parseSQLite(dsn)
	if err != nil {
		return ""
	}
	if o.path == "" {
		if dataDir == "" {
			dataDir = ".caduceus"
		}
		return filepath.Join(dataDir, DefaultFile)
	}
	return o.path
}

// SplitSQLiteName splits a SQLite store name ("", "sqlite:PATH" or
// "file:PATH", optionally with parameters) into its prefix, its path and
// its parameters with their '?' ("" for none): what follows the path's last
// '?' is parameters when it holds a '='. prefix+path+params is name.
func SplitSQLiteName(name string) (prefix, path, params string) {
	for _, p := range []string{"sqlite:", "file:"} {
		if rest, ok := strings.CutPrefix(name, p); ok {
			prefix, name = p, rest
			break
		}
	}
	if i := strings.LastIndexByte(name, '?'); i >= 0 && strings.Contains(name[i:], "=") {
		return prefix, name[:i], name[i:]
	}
	return prefix, name, ""
}

// SQLiteName is the store name of the SQLite file at path, with
// synchronous=full when full: the form whose path is read back whole,
// whatever '?' and '=' it holds.
func SQLiteName(path string, full bool) string {
	if full {
		return "sqlite:" + path + "?synchronous=full"
	}
	return "sqlite:" + path + "?synchronous=normal"
}

// CheckName reports what Open would refuse in a store name before opening
// anything: a kind it does not know, or SQLite parameters it does not
// take.
func CheckName(dsn string) error {
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		return nil
	case dsn == "", strings.HasPrefix(dsn, "sqlite:"), strings.HasPrefix(dsn, "file:"):
		_, err := parseSQLite(dsn)
		return err
	}
	return fmt.Errorf("store: unsupported store %q (want postgres://..., sqlite:PATH, or empty for the data directory)", redact(dsn))
}

// sqliteOptions is what a SQLite store name says: the file (empty: the
// data directory's) and whether each commit waits for the disk.
type sqliteOptions struct {
	path string
	// full is synchronous=FULL: a commit returns once its WAL frames are
	// on the disk, so it survives a power loss or an operating system
	// crash. The default, NORMAL, survives the process being killed (the
	// frames are in the operating system's cache) and leaves the sync to
	// the checkpoint.
	full bool
}

// parseSQLite reads a SQLite store name: "", "sqlite:PATH" or "file:PATH",
// with an optional "?synchronous=normal|full" after the last '?'. What
// follows a path's last '?' is a parameter list when it holds a '='; the
// store knows no parameter but synchronous.
func parseSQLite(dsn string) (sqliteOptions, error) {
	_, path, params := SplitSQLiteName(dsn)
	o := sqliteOptions{path: path}
	if params == "" {
		return o, nil
	}
	for _, kv := range strings.Split(params[1:], "&") {
		k, v, _ := strings.Cut(kv, "=")
		if k != "synchronous" {
			return sqliteOptions{}, fmt.Errorf("store: sqlite parameter %q: the only one is synchronous (normal or full)", k)
		}
		switch strings.ToLower(v) {
		case "normal":
			o.full = false
		case "full":
			o.full = true
		default:
			return sqliteOptions{}, fmt.Errorf("store: sqlite synchronous=%q: want normal or full", v)
		}
	}
	return o, nil
}

func openSQLite(o sqliteOptions) (*DB, error) {
	path := o.path
	if path == "" {
		return nil, errors.New("store: empty sqlite path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	sync := "NORMAL"
	if o.full {
		sync = "FULL"
	}
	base := "file:" + sqlitePath(path) + "?_busy_timeout=10000&_foreign_keys=1&_synchronous=" + sync + "&_journal_mode=WAL"
	// The writer never checkpoints inside a commit: see CheckpointEvery.
	w, err := sql.Open("sqlite", base+"&_txlock=immediate&_pragma=wal_autocheckpoint(0)&_pragma=journal_size_limit(67108864)")
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	// The writer sets WAL first: the readers then find the file in WAL mode.
	if err := w.Ping(); err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open sqlite %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", base)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	db := &DB{w: w, r: r, dialect: SQLite, Now: time.Now, syncFull: o.full}
	db.startCheckpoints() // before the batcher, which reads db.ckpt
	db.batch = newBatcher(db, "")
	return db, nil
}

func openPostgres(dsn string) (*DB, error) {
	dsn, piped, err := pipelineDSN(dsn)
	if err != nil {
		return nil, err
	}
	p, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	p.SetMaxOpenConns(16)
	p.SetMaxIdleConns(16)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("store: open postgres: %w", err)
	}
	name := "caduceus background"
	if app := cfg.RuntimeParams["application_name"]; app != "" {
		name = app + " (background)"
	}
	cfg.RuntimeParams["application_name"] = name
	bg := stdlib.OpenDB(*cfg)
	bg.SetMaxOpenConns(backgroundConns)
	bg.SetMaxIdleConns(backgroundConns)
	db := &DB{w: p, r: p, dialect: Postgres, Now: time.Now, dsn: dsn, bg: bg}
	db.back = &DB{w: bg, r: bg, dialect: Postgres, dsn: dsn, main: db, Now: func() time.Time { return db.Now() }}
	pipeDSN := ""
	if piped {
		pipeDSN = dsn
	}
	db.batch = newBatcher(db, pipeDSN)
	return db, nil
}

// backgroundConns is the size of Postgres's pool for background work.
const backgroundConns = 4

// Background is the store for work no request waits for: the shim
// ledger's spend journal, its lease top-ups and its sweeps. On Postgres its
// statements and transactions run on a pool of its own (up to 4
// connections, application_name "caduceus background"), outside the group
// commit, so they never take a connection a request is waiting for, and
// what a request waits for can be told apart on the wire. It shares db's
// parts (Part) and clock and is closed with db. On SQLite, where one
// writer runs everything in turn, it is db.
func (db *DB) Background() *DB {
	if db.back == nil {
		return db
	}
	return db.back
}

// Main is the store Background is a view of: db itself, when it is not
// such a view.
func (db *DB) Main() *DB {
	if db.main != nil {
		return db.main
	}
	return db
}

// Close closes the attached parts (Part), then the pools.
func (db *DB) Close() error {
	if db.main != nil {
		return nil // a Background view: closed with its store
	}
	db.partsMu.Lock()
	parts := db.order
	db.parts, db.order = nil, nil
	db.partsMu.Unlock()
	var err error
	for i := len(parts) - 1; i >= 0; i-- {
		err = errors.Join(err, parts[i].Close())
	}
	if db.batch != nil {
		db.batch.close() // closes the writer's statements and gives its connection back
	}
	if db.ckpt != nil {
		db.ckpt.close()
	}
	db.rstmts.close()
	err = errors.Join(err, db.w.Close())
	if db.r != db.w {
		err = errors.Join(err, db.r.Close())
	}
	if db.bg != nil {
		err = errors.Join(err, db.bg.Close())
	}
	return err
}

// Ping checks the store answers a query (readiness).
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// Dialect reports the SQL flavour.
func (db *DB) Dialect() Dialect { return db.dialect }

// Name is the dialect's name, and on SQLite " synchronous=full" when each
// commit waits for the disk: what logs and the bench call the store.
func (db *DB) Name() string {
	if db.syncFull {
		return db.dialect.String() + " synchronous=full"
	}
	return db.dialect.String()
}

// Exec runs a statement on the writer: on SQLite a transaction of its own
// through the group commit (the batcher holds the one writer connection).
func (db *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if db.dialect != SQLite {
		return db.w.ExecContext(ctx, db.dialect.Rebind(query), args...)
	}
	var res sql.Result
	err := db.batch.do(ctx, "", func(tx *Tx) error {
		var err error
		res, err = tx.Exec(ctx, query, args...)
		return err
	})
	return res, err
}

// Query runs a read on the reader pool.
func (db *DB) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := db.readStmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return db.r.QueryContext(ctx, db.dialect.Rebind(query), args...)
}

// QueryRow runs a single-row read on the reader pool.
func (db *DB) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := db.readStmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return db.r.QueryRowContext(ctx, db.dialect.Rebind(query), args...)
}

// readStmt returns the cached prepared statement for a read on SQLite's
// reader pool, or nil on Postgres (pgx caches statements per connection
// itself).
func (db *DB) readStmt(ctx context.Context, query string) *sql.Stmt {
	if db.dialect != SQLite {
		return nil
	}
	return db.rstmts.get(ctx, query, db.r.PrepareContext)
}

// Tx is a transaction on the writer.
type Tx struct {
	q       execer // Postgres: the *sql.Tx; SQLite: the writer connection inside BEGIN
	conn    *sql.Conn
	dialect Dialect
	db      *DB
	heads   *auditHeads // the chain heads appended to, written at commit (nil: each append writes its own)
	shared  bool        // a group commit's transaction (see stmtContext)
	// whole: a Postgres group commit's first pass, with no savepoint
	// around each transaction (batcher.runWhole). A savepoint inside one
	// is not needed either: an error fails the pass, and the batch runs
	// again with savepoints, where Savepoints reports true.
	whole bool
	// raw, later, failed: the Postgres group commit's first pass keeps the
	// statements ExecLater is given and sends them together (later.go).
	raw    *sql.Conn
	later  []laterStmt
	failed error
	begun  bool // the first pass has sent its BEGIN (later.go)
	// stmtFailed: in the first pass, an Exec or Query failed (fn may
	// have turned its error into its own).
	stmtFailed bool
	// headMoved: in an optimistic first pass, a chain head was not where
	// this process last left it (checkHeads).
	headMoved bool
	// pipe: a pipelined batch's transaction (pipe.go): ExecLater keeps its
	// statements, and any other statement fails (errPipeRead) and sets
	// needConn: the batch then runs without the pipe.
	pipe, needConn bool
}

// Savepoints reports whether a savepoint inside t can isolate a failure
// from the rest of t. False only in a Postgres group commit's first pass
// (batcher.runWhole), where a failing statement is returned instead: the
// pass is rolled back and t's function runs again, with savepoints.
func (t *Tx) Savepoints() bool { return !t.whole }

// execer is what a transaction runs its statements on: a *sql.Tx, or on
// SQLite the batcher's writer connection, which has begun the transaction
// itself.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Exec runs a statement in the transaction.
func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if err := t.flushFirst(ctx); err != nil {
		return nil, err
	}
	ctx = t.stmtContext(ctx)
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	res, err := t.q.ExecContext(ctx, t.dialect.Rebind(query), args...)
	t.stmtFailed = t.stmtFailed || err != nil
	return res, err
}

// Query runs a read in the transaction.
func (t *Tx) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := t.flushFirst(ctx); err != nil {
		return nil, err
	}
	ctx = t.stmtContext(ctx)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	rows, err := t.q.QueryContext(ctx, t.dialect.Rebind(query), args...)
	t.stmtFailed = t.stmtFailed || err != nil
	return rows, err
}

// QueryRow runs a single-row read in the transaction.
func (t *Tx) QueryRow(ctx context.Context, query string, args ...any) *sql.Row {
	// A failed batch aborts the Postgres transaction: the row's read then
	// fails too, and t.failed fails the pass.
	_ = t.flushFirst(ctx)
	ctx = t.stmtContext(ctx)
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.q.QueryRowContext(ctx, t.dialect.Rebind(query), args...)
}

// flushFirst sends the statements ExecLater kept before one that may read
// what they wrote.
func (t *Tx) flushFirst(ctx context.Context) error {
	if t.pipe {
		t.needConn = true
		return errPipeRead
	}
	if t.raw == nil {
		return nil
	}
	return t.flush(ctx)
}

// stmtContext is the context a statement runs with: in a transaction the
// group commit shares, never the caller's cancellation, which would
// interrupt (on Postgres, close the connection of) everyone's transaction.
func (t *Tx) stmtContext(ctx context.Context) context.Context {
	if t.shared {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

// stmt returns the cached prepared statement for query on SQLite's writer
// connection, or nil where there is no cache (Postgres: pgx caches
// statements per connection itself).
func (t *Tx) stmt(ctx context.Context, query string) *sql.Stmt {
	if t.conn == nil {
		return nil
	}
	return t.db.stmts.get(ctx, query, t.conn.PrepareContext)
}

// Dialect reports the SQL flavour.
func (t *Tx) Dialect() Dialect { return t.dialect }

// DB returns the store the transaction belongs to (for its clock and
// dialect helpers; not for statements).
func (t *Tx) DB() *DB { return t.db }

// InTx runs fn in a transaction and commits it if fn returns nil.
//
// Transactions that arrive together share one commit (group commit, see
// batcher): each runs in its own savepoint, so one failing rolls back only
// itself. On SQLite, transactions take the write lock at BEGIN (immediate),
// so they cannot deadlock upgrading. On Postgres a serialization failure or
// deadlock is retried up to three times. fn may run more than once and must
// not keep side effects outside the transaction. Once fn has started, the
// caller's cancellation no longer interrupts it: the answer always says
// whether the change was committed. A panic in fn rolls the transaction back
// and is returned as an error.
//
// In a traced request, the caller's wait (its turn in the group commit and
// the commit) is a "store.commit" span of the request's trace.
func (db *DB) InTx(ctx context.Context, fn func(*Tx) error) error {
	return db.inTxNamed(ctx, "", fn)
}

// InTxFor is InTx for a transaction that appends to tenant's audit chain
// (AppendAudit, AppendPrepared) and to no other: on Postgres it locks that
// chain's head before fn runs, and its group commit locks the heads of all
// its transactions' tenants first, in order (lockHeads), so transactions
// of several processes never deadlock over the heads. On SQLite, where
// one writer runs every transaction in turn, it is InTx.
func (db *DB) InTxFor(ctx context.Context, tenant contract.TenantSlot, fn func(*Tx) error) error {
	if db.dialect != Postgres {
		return db.inTxNamed(ctx, "", fn)
	}
	return db.inTxNamed(ctx, string(tenant), fn)
}

// inTxNamed is InTx and InTxFor: tenant is the chain fn names ("": none).
func (db *DB) inTxNamed(ctx context.Context, tenant string, fn func(*Tx) error) (err error) {
	if _, span := telemetry.Child(ctx, "store.commit", telemetry.SpanKindInternal); span != nil {
		span.SetAttributes(telemetry.KeyDBSystem.String(db.dialect.otelName()))
		defer func() { telemetry.End(span, err) }()
	}
	if db.batch != nil {
		return db.batch.do(ctx, tenant, fn)
	}
	return db.inTxRetried(ctx, headFirst(tenant, fn))
}

// otelName is the dialect's OpenTelemetry db.system.name.
func (d Dialect) otelName() string {
	if d == Postgres {
		return "postgresql"
	}
	return "sqlite"
}

// InSeparateTx runs fn in a transaction of its own on Postgres, outside
// the group commit, retried as InTx retries; on SQLite, where one writer
// runs every transaction in turn, it joins the group commit. For writes
// that lock shared rows (a budget's totals) which a group commit's other
// transactions must not hold while they wait on theirs.
func (db *DB) InSeparateTx(ctx context.Context, fn func(*Tx) error) (err error) {
	if db.dialect == Postgres {
		if _, span := telemetry.Child(ctx, "store.commit", telemetry.SpanKindInternal); span != nil {
			span.SetAttributes(telemetry.KeyDBSystem.String(db.dialect.otelName()))
			defer func() { telemetry.End(span, err) }()
		}
		return db.inTxRetried(ctx, fn)
	}
	return db.InTx(ctx, fn)
}

// inTxRetried is inTx, retried up to three times on a Postgres
// serialization failure or deadlock.
func (db *DB) inTxRetried(ctx context.Context, fn func(*Tx) error) error {
	var err error
	for attempt := 0; attempt < 4; attempt++ {
		err = db.inTx(ctx, fn)
		if err == nil || !IsRetryable(err) {
			return err
		}
	}
	return err
}

func (db *DB) inTx(ctx context.Context, fn func(*Tx) error) error {
	sqlTx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	t := &Tx{q: sqlTx, dialect: db.dialect, db: db}
	if err := safe(fn)(t); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// Rebind rewrites ? placeholders to $1, $2, ... for Postgres. Queries must not
// contain a literal ? inside strings.
func (d Dialect) Rebind(q string) string {
	if d != Postgres || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// ForUpdate is the row-lock suffix of a SELECT inside a transaction: Postgres
// locks the rows; SQLite needs nothing because its transactions hold the
// database write lock from BEGIN.
func (d Dialect) ForUpdate() string {
	if d == Postgres {
		return " FOR UPDATE"
	}
	return ""
}

// IsUniqueViolation reports whether err is a unique or primary key violation.
func IsUniqueViolation(err error) bool {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code == "23505"
	}
	if se, ok := errors.AsType[*sqlite.Error](err); ok {
		c := se.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// IsRetryable reports whether err is a Postgres serialization failure or
// deadlock: the transaction may succeed when run again.
func IsRetryable(err error) bool {
	if pe, ok := errors.AsType[*pgconn.PgError](err); ok {
		return pe.Code == "40001" || pe.Code == "40P01"
	}
	return false
}

// redact hides a password in a DSN for error messages.
func redact(dsn string) string {
	if i := strings.Index(dsn, "@"); i > 0 {
		if j := strings.Index(dsn, "://"); j > 0 && j < i {
			return dsn[:j+3] + "***" + dsn[i:]
		}
	}
	return dsn
}

// Micros is the store's time representation: microseconds since the epoch.
func Micros(t time.Time) int64 { return t.UnixMicro() }

// FromMicros turns a stored time back into a time.Time (UTC).
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// sqlitePath escapes a file path for the driver's "file:PATH?params" DSN:
// a '?' or '#' in it would end the path there (a data directory named
// "runs#1" put the database in "runs"), so they, and '%', are
// percent-encoded, which SQLite decodes in a file: URI.
func sqlitePath(path string) string {
	return strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
}
