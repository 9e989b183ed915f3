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
// record moved up the chain, its ids made new, as the entry's replayMap
// says), and a forwarded turn's
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

// pinnedCalls are the pinned turn's calls, read from the entry once per
// pin (gen).
var pinnedCalls struct {
	mu    sync.Mutex
	gen   int
	calls []replayCall
}

// replayCalls are the pinned turn's calls.
func replayCalls() ([]replayCall, error) {
	v := js.Global().Call("caduceusReplayBase")
	gen := v.Index(0).Int()
	pinnedCalls.mu.Lock()
	defer pinnedCalls.mu.Unlock()
	if gen != pinnedCalls.gen || pinnedCalls.calls == nil {
		var calls []replayCall
		if err := json.Unmarshal([]byte(v.Index(1).String()), &calls); err != nil {
			return nil, err
		}
		pinnedCalls.gen, pinnedCalls.calls = gen, calls
	}
	return pinnedCalls.calls, nil
}

// nextReplay is what the entry's replayMap changes in the pinned calls'
// arguments on their next replay: the turn's record moved up the chain,
// its ids made new.
func nextReplay() (map[any]any, error) {
	var pairs [][2]any
	if err := json.Unmarshal([]byte(js.Global().Call("caduceusReplayNext").String()), &pairs); err != nil {
		return nil, err
	}
	m := make(map[any]any, len(pairs))
	for _, p := range pairs {
		m[p[0]] = p[1]
	}
	return m, nil
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
	calls, err := replayCalls()
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
			var m map[any]any
			if m, err = nextReplay(); err != nil {
				break
			}
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
