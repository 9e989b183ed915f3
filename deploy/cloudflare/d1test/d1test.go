//go:build !js

// Package d1test answers the edge's SQL port (port.DB) with D1 as workerd
// runs it locally (Miniflare's D1, the database `wrangler dev` gives a
// Worker), so the store suites run on D1 from `go test`: Open starts
// deploy/cloudflare/d1bridge.mjs once per test process and leases one of
// its databases, emptied and migrated, to each test.
//
// The bridge calls the D1 binding as the Worker's d1.go does, so what the
// stores see here is what they see in production: numbers (an int64
// argument is bound as a JavaScript number, which D1 binds as REAL; a
// column's INTEGER affinity stores it as an integer) come back as float64,
// TEXT as string, NULL as nil, and D1's errors keep D1's message (the
// stores read a unique violation from it).
//
// Node (20 or later) must be on the PATH and deploy/cloudflare must hold
// node_modules (npm ci there; .ci/run does it): without them Open fails
// the test, saying so.
package d1test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/internal/nodetest"

	"github.com/caduceus-dev/caduceus/store/port"
)

// DB is one database of the bridge, answering port.DB.
type DB struct {
	base   string // the bridge's URL and the database: http://127.0.0.1:PORT/DB0
	client *http.Client
}

var _ port.DB = (*DB)(nil)

// Error is a statement D1 refused; its text is D1's message unchanged
// (e.g. "D1_ERROR: UNIQUE constraint failed: keys.id: SQLITE_CONSTRAINT ...").
type Error struct{ Message string }

func (e *Error) Error() string { return e.Message }

type statement struct {
	SQL  string `json:"sql"`
	Args []any  `json:"args"`
}

// blob is how a BLOB result crosses the bridge.
type blob struct {
	Blob string `json:"blob"`
}

// args converts a statement's arguments as d1.go does: an int64 or int
// becomes a float64 (what a JavaScript number holds; the other integer
// and float kinds are numbers to js.ValueOf too), strings, bools and nil
// stay. Anything else (bytes, a named string type) js.ValueOf refuses in
// the Worker, so it is refused here too.
func args(in []any) ([]any, error) {
	out := make([]any, len(in))
	for i, a := range in {
		switch v := a.(type) {
		case nil, string, float64, bool:
			out[i] = v
		case int64:
			out[i] = float64(v)
		case int:
			out[i] = float64(v)
		case int8, int16, int32, uint, uint8, uint16, uint32, uint64, uintptr, float32:
			f, _ := strconv.ParseFloat(fmt.Sprint(v), 64)
			out[i] = f
		default:
			return nil, fmt.Errorf("d1test: argument %d: %T is not a value the Worker binds (string, int64, nil)", i+1, a)
		}
	}
	return out, nil
}

func newStatement(q string, in []any) (statement, error) {
	a, err := args(in)
	return statement{SQL: q, Args: a}, err
}

// Query implements port.DB with D1's raw().
func (d *DB) Query(ctx context.Context, q string, in ...any) ([]port.Row, error) {
	st, err := newStatement(q, in)
	if err != nil {
		return nil, err
	}
	body, err := d.post(ctx, "query", st)
	if err != nil {
		return nil, err
	}
	return DecodeRows(body)
}

// Exec implements port.DB with D1's run(): its meta.changes.
func (d *DB) Exec(ctx context.Context, q string, in ...any) (int64, error) {
	st, err := newStatement(q, in)
	if err != nil {
		return 0, err
	}
	body, err := d.post(ctx, "exec", st)
	if err != nil {
		return 0, err
	}
	return DecodeChanges(body)
}

// Batch implements port.DB with D1's batch(): one transaction, all or none.
func (d *DB) Batch(ctx context.Context, stmts []port.Statement) error {
	list := make([]statement, len(stmts))
	for i, s := range stmts {
		st, err := newStatement(s.SQL, s.Args)
		if err != nil {
			return err
		}
		list[i] = st
	}
	_, err := d.post(ctx, "batch", struct {
		Stmts []statement `json:"stmts"`
	}{list})
	return err
}

// reset drops every table of the database and applies the migrations again.
func (d *DB) reset(ctx context.Context) error {
	_, err := d.post(ctx, "reset", struct{}{})
	return err
}

// post sends one request to the bridge and returns the body of a 200
// answer; any other answer is an error (D1's own for a 422).
func (d *DB) post(ctx context.Context, route string, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("d1test: %s: %w", route, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+"/"+route, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("d1test: %s: %w", route, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("d1test: %s: reading the answer: %w", route, err)
	}
	if res.StatusCode != http.StatusOK {
		return nil, DecodeError(res.StatusCode, body)
	}
	return body, nil
}

// DecodeRows decodes the bridge's answer to a query, {"rows": [[v, ...]]},
// into rows holding what d1.go's rows hold: float64, string, nil, bool
// and []byte (a BLOB, {"blob": base64}).
func DecodeRows(body []byte) ([]port.Row, error) {
	var ans struct {
		Rows *[][]json.RawMessage `json:"rows"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return nil, fmt.Errorf("d1test: query answer: %w", err)
	}
	if ans.Rows == nil {
		return nil, errors.New("d1test: query answer without rows")
	}
	rows := make([]port.Row, len(*ans.Rows))
	for i, raw := range *ans.Rows {
		row := make(port.Row, len(raw))
		for j, r := range raw {
			v, err := decodeValue(r)
			if err != nil {
				return nil, fmt.Errorf("d1test: query answer: row %d column %d: %w", i, j, err)
			}
			row[j] = v
		}
		rows[i] = row
	}
	return rows, nil
}

func decodeValue(r json.RawMessage) (any, error) {
	var v any
	if err := json.Unmarshal(r, &v); err != nil {
		return nil, err
	}
	switch x := v.(type) {
	case nil, string, float64, bool:
		return x, nil
	case map[string]any:
		if s, ok := x["blob"].(string); ok && len(x) == 1 {
			return base64.StdEncoding.DecodeString(s)
		}
	}
	return nil, fmt.Errorf("a value neither a scalar nor a blob: %.80s", r)
}

// DecodeChanges decodes the bridge's answer to an exec, {"changes": n}.
func DecodeChanges(body []byte) (int64, error) {
	var ans struct {
		Changes *int64 `json:"changes"`
	}
	if err := json.Unmarshal(body, &ans); err != nil {
		return 0, fmt.Errorf("d1test: exec answer: %w", err)
	}
	if ans.Changes == nil || *ans.Changes < 0 {
		return 0, fmt.Errorf("d1test: exec answer without a count of changes: %.200s", body)
	}
	return *ans.Changes, nil
}

// DecodeError is the error of an answer other than 200: D1's, its message
// unchanged, for a 422 {"error": message}; the bridge's otherwise.
func DecodeError(status int, body []byte) error {
	var ans struct {
		Error *string `json:"error"`
	}
	if json.Unmarshal(body, &ans) != nil || ans.Error == nil {
		return fmt.Errorf("d1test: the bridge answered %d: %.200q", status, body)
	}
	if status == http.StatusUnprocessableEntity {
		if port.SQLiteUnique(*ans.Error) {
			return port.UniqueError(&Error{Message: *ans.Error})
		}
		return &Error{Message: *ans.Error}
	}
	return fmt.Errorf("d1test: the bridge answered %d: %s", status, *ans.Error)
}

// bridge is the running d1bridge.mjs: its URL and its databases, each
// free one's index in free.
type bridge struct {
	url    string
	free   chan int
	client *http.Client
	stdin  io.WriteCloser // the bridge's standard input, held open (closed, the bridge stops)
}

var (
	startOnce sync.Once
	running   *bridge
	startErr  error
)

// Open leases one of the bridge's databases to t, empty and migrated,
// starting the bridge if this test process has not yet: it is given back
// when t ends. Without node or deploy/cloudflare/node_modules it fails t.
func Open(t testing.TB) port.DB {
	t.Helper()
	startOnce.Do(func() { running, startErr = start() })
	if startErr != nil {
		t.Fatal(startErr)
	}
	b := running
	var i int
	select {
	case i = <-b.free:
	case <-time.After(time.Minute):
		t.Fatalf("d1test: all %d D1 databases of the bridge stayed leased for a minute (CADUCEUS_D1_DATABASES sets how many)", cap(b.free))
	}
	t.Cleanup(func() { b.free <- i })
	db := &DB{base: b.url + "/DB" + strconv.Itoa(i), client: b.client}
	if err := db.reset(context.Background()); err != nil {
		t.Fatalf("d1test: emptying database DB%d: %v", i, err)
	}
	return db
}

var readyRE = regexp.MustCompile(`^d1bridge listening on (http://127\.0\.0\.1:[0-9]+) databases ([0-9]+)$`)

// dir is deploy/cloudflare, where d1bridge.mjs and node_modules are.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// start runs node d1bridge.mjs and waits for its readiness line. The
// bridge reads its standard input, which stays open while this process
// lives: when it ends, the bridge stops.
func start() (*bridge, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return nil, errors.New("d1test: node is not on the PATH: the D1 tests run D1 under Miniflare with Node 20 (.ci/run installs it)")
	}
	src := dir()
	if err := nodetest.NPMCI(src); err != nil {
		return nil, fmt.Errorf("d1test: %w", err)
	}
	cmd := exec.Command("node", "d1bridge.mjs")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CADUCEUS_D1_MIGRATIONS="+filepath.Join(src, "..", "..", "edge", "migrations"))
	stderr := &tailBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe() // held open by the bridge value, never written
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("d1test: node d1bridge.mjs: %w", err)
	}
	ready := make(chan []string, 1)
	exited := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := readyRE.FindStringSubmatch(sc.Text()); m != nil {
				ready <- m
			}
		}
		exited <- cmd.Wait()
	}()
	select {
	case m := <-ready:
		n, _ := strconv.Atoi(m[2])
		b := &bridge{url: m[1], free: make(chan int, n),
			client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, stdin: stdin}
		for i := range n {
			b.free <- i
		}
		return b, nil
	case err := <-exited:
		return nil, fmt.Errorf("d1test: node d1bridge.mjs exited before it served (%v): %s", err, stderr)
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		return nil, fmt.Errorf("d1test: node d1bridge.mjs did not serve within a minute: %s", stderr)
	}
}

// tailBuffer keeps the last 8 KiB written to it, safe for concurrent use.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = t.b[len(t.b)-8<<10:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
