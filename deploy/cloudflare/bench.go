//go:build js && wasm && caduceus_bench

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"syscall/js"

	"github.com/caduceus-dev/caduceus/deploy/cloudflare/fetch"
	"github.com/caduceus-dev/caduceus/store/port"
)

// A benchmark build (-tags caduceus_bench; BenchmarkEdgeWorkerD1 builds
// it) answers POST /__goturn with the I/O of a turn the Worker served
// (the one d1CountingEntry's GET /__pin kept) and none of the edge's
// code: that turn's D1 calls, as
// d1CountingEntry's /__d1replay runs them from JavaScript (the turn's
// record moved up the chain, its ids made new), and a forwarded turn's
// upstream call with the request's body, made from Go through the
// Worker's own bridge (fetch.Handle, d1, fetch.Transport); the answer is
// the upstream's. What it costs is what any Go js/wasm Worker pays for a
// forwarded turn's I/O; the rest of the turn's cost is the edge's code.
func init() {
	around = func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost && r.URL.Path == "/__goturn" {
				goTurn(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	}
}

// replayCall is one of the turn's D1 calls as d1CountingEntry lists them.
type replayCall struct {
	Kind  string           `json:"kind"`
	SQL   string           `json:"sql"`
	Args  []any            `json:"args"`
	Stmts []port.Statement `json:"stmts"`
}

// replays is the turn replayed: its calls, read from the entry once per
// pin (gen), and how many times they were replayed.
var replays struct {
	mu    sync.Mutex
	gen   int
	calls []replayCall
	n     int
}

// replayCalls are the pinned turn's calls, and next numbers the
// replays of its batch: the n-th moves the audit record n places up the
// chain and makes the ids new.
func replayCalls() (calls []replayCall, next func() int, err error) {
	v := js.Global().Call("caduceusReplayBase")
	gen := v.Index(0).Int()
	replays.mu.Lock()
	defer replays.mu.Unlock()
	if gen != replays.gen || replays.calls == nil {
		var calls []replayCall
		if err := json.Unmarshal([]byte(v.Index(1).String()), &calls); err != nil {
			return nil, nil, err
		}
		replays.gen, replays.calls, replays.n = gen, calls, 0
	}
	return replays.calls, func() int {
		replays.mu.Lock()
		defer replays.mu.Unlock()
		replays.n++
		return replays.n
	}, nil
}

// moved is what /__d1replay's map does to a batch's arguments on its
// n-th replay.
func moved(c replayCall, n int) map[any]any {
	m := map[any]any{}
	fake := func(i int) string { return fmt.Sprintf("sha256:%064x", i) }
	for _, st := range c.Stmts {
		a := st.Args
		switch {
		case strings.HasPrefix(st.SQL, "INSERT INTO audit_records"):
			seq, id := a[1].(float64), a[2].(string)
			prev, hash := a[len(a)-4], a[len(a)-3]
			m[seq], m[seq-1], m[id] = seq+float64(n), seq+float64(n)-1, fmt.Sprintf("%sr%d", id, n)
			if n == 1 {
				m[prev] = hash
			} else {
				m[prev] = fake(n - 1)
			}
			m[hash] = fake(n)
		case strings.HasPrefix(st.SQL, "INSERT INTO shim_receipts"):
			m[a[1]] = fmt.Sprintf("%sr%d", a[1], n)
		}
	}
	return m
}

func mapArgs(m map[any]any, args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if v, ok := m[a]; ok && a != nil {
			out[i] = v
		} else {
			out[i] = a
		}
	}
	return out
}

func goTurn(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	calls, next, err := replayCalls()
	if err == nil && len(calls) == 0 {
		err = fmt.Errorf("no turn is pinned (GET /__pin after one)")
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	env := js.Global().Get("caduceusEnv")
	db := d1{env.Get("DB")}
	ctx := r.Context()
	var answer []byte
	for _, c := range calls {
		switch c.Kind {
		case "query":
			_, err = db.Query(ctx, c.SQL, c.Args...)
		case "exec":
			_, err = db.Exec(ctx, c.SQL, c.Args...)
		case "batch":
			if answer == nil { // the upstream call comes before the turn's batch
				if answer, err = upstreamCall(r, env, body); err != nil {
					break
				}
			}
			m := moved(c, next())
			stmts := make([]port.Statement, len(c.Stmts))
			for i, st := range c.Stmts {
				stmts[i] = port.Statement{SQL: st.SQL, Args: mapArgs(m, st.Args)}
			}
			err = db.Batch(ctx, stmts)
		}
		if err != nil {
			http.Error(w, c.Kind+": "+err.Error(), http.StatusBadGateway)
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(answer)
}

func upstreamCall(r *http.Request, env js.Value, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, env.Get("CADUCEUS_OPENAI_URL").String()+"/chat/completions", strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+env.Get("CADUCEUS_OPENAI_API_KEY").String())
	resp, err := (&http.Client{Transport: fetch.Transport{}}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}
