package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuTicks is the CPU time (user + system, in clock ticks of 10 ms) the
// process pid has used, from /proc/pid/stat.
func cpuTicks(tb testing.TB, pid int) int64 {
	tb.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// workerdOf is the pid of the workerd process miniflare started under the
// node process parent.
func workerdOf(tb testing.TB, parent int) int {
	tb.Helper()
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil {
			continue
		}
		s := string(b)
		rest := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if ppid, _ := strconv.Atoi(rest[1]); ppid == parent && strings.Contains(s, "(workerd)") {
			pid, _ := strconv.Atoi(strings.Fields(s)[0])
			return pid
		}
	}
	tb.Fatalf("no workerd process under %d", parent)
	return 0
}

// edgeBenchTarget is one side of the edge benchmark.
type edgeBenchTarget struct {
	name, url, key string
	pid            int // the process that serves (workerd; serve)
}

// edgeKey makes a key with admin over POST /v1/admin/keys and returns it.
func edgeKey(tb testing.TB, url, admin, spec string) string {
	tb.Helper()
	b := edgeCall(tb, url, admin, "/v1/admin/keys", spec)
	var k struct{ Key string }
	if err := json.Unmarshal(b, &k); err != nil || k.Key == "" {
		tb.Fatalf("key: %s", b)
	}
	return k.Key
}

// edgeCall sends one request (a GET without body; with key, when given,
// and the edge secret the parity test's sides require) and returns its
// body; it fails unless the answer is 2xx.
func edgeCall(tb testing.TB, url, key, path, body string) []byte {
	method := "POST"
	if body == "" {
		method = "GET"
	}
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Edge-Auth", edgeSecret)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("X-Caduceus-Harness", "claude-code")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		tb.Fatalf("%s %s: %d %s", path, url, resp.StatusCode, b)
	}
	return b
}

// BenchmarkEdgeWorker times the Worker under miniflare's workerd (with
// D1) beside `caduceus serve` on SQLite, each in a process of its own, on
// the same requests: the probes, the public preview, a direct answer and a
// context shim forwarded to a local upstream; and /healthz of the floor
// (deploy/cloudflare/floor) beside them. cpu-ms/op is the CPU the serving process spent per
// request (workerd: the Worker, its HTTP and D1; serve: everything),
// read from /proc; ns/op is the client's wall time per request, one at a
// time. Run it on a quiet machine:
//
//	go test -run '^$' -bench EdgeWorker -count 3 ./cmd/caduceus
//
// With CADUCEUS_BENCH_WORKER_BASE naming another build of the Worker (an
// older commit's, say: its caduceus.wasm, or its deploy/cloudflare
// directory with dist/ built, for its worker.mjs too; baseWorkerDir), that
// build runs too, in a workerd of its own, and each request goes to the
// Worker and then to it (worker-vs-base: cpu-ms/op is the Worker's,
// base-cpu-ms/op the other build's): the two compared under the same
// load, request by request.
func BenchmarkEdgeWorker(b *testing.B) {
	dir := buildWorker(b)
	upstream := httptest.NewServer(&edgeUpstream{})
	b.Cleanup(upstream.Close)
	workerEnv := []string{"CADUCEUS_ADMIN_KEY=" + edgeAdminKey, "CADUCEUS_OPENAI_URL=" + upstream.URL + "/v1", "CADUCEUS_OPENAI_API_KEY=sk-upstream"}
	w := startWorker(b, dir, workerEnv...)
	p := startProc(b, []string{"CADUCEUS_OPENAI_API_KEY=sk-upstream"}, "--gates", "shim", "--data", b.TempDir(), "--upstream", "openai="+upstream.URL+"/v1", "--log-level", "warn")
	targets := []edgeBenchTarget{
		{name: "serve", url: p.url, key: p.awaitKey(b), pid: p.cmd.Process.Pid},
		{name: "worker", url: w.url, key: edgeAdminKey, pid: workerdOf(b, w.cmd.Process.Pid)},
	}
	if baseDir := baseWorkerDir(b, dir); baseDir != "" {
		base := startWorker(b, baseDir, workerEnv...)
		targets = append(targets, edgeBenchTarget{name: "base", url: base.url, key: edgeAdminKey, pid: workerdOf(b, base.cmd.Process.Pid)})
	}
	for i := range targets {
		t := &targets[i]
		// The admin key has no harness; a key that has one writes the rules.
		t.key = edgeKey(b, t.url, t.key, `{"tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code"}`)
		edgeCall(b, t.url, t.key, "/v1/provisions", `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)
		edgeCall(b, t.url, t.key, "/v1/provisions", `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
		edgeCall(b, t.url, t.key, "/v1/context", `{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`)
	}
	// The floor (deploy/cloudflare/floor) answers /healthz too: what a Go
	// js/wasm Worker spends on a request before any of the edge's code.
	floor := startWorker(b, buildWorkerOf(b, "./deploy/cloudflare/floor"))
	floorTarget := edgeBenchTarget{name: "floor", url: floor.url, pid: workerdOf(b, floor.cmd.Process.Pid)}
	for _, r := range []struct{ name, path, body string }{
		{"healthz", "/healthz", ""}, // no store, no rules: the floor
		{"readyz", "/readyz", ""},   // one statement
		{"preview", "/api/preview", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`},
		{"direct", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`},
		{"shimmed", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`},
	} {
		ts := targets[:2:2] // the floor is appended to a copy
		if r.name == "healthz" {
			ts = append(ts, floorTarget)
		}
		if len(targets) > 2 {
			w, base := targets[1], targets[2]
			b.Run(r.name+"/worker-vs-base", func(b *testing.B) {
				edgeCall(b, w.url, w.key, r.path, r.body) // warm
				edgeCall(b, base.url, base.key, r.path, r.body)
				w0, base0 := cpuTicks(b, w.pid), cpuTicks(b, base.pid)
				for b.Loop() {
					edgeCall(b, w.url, w.key, r.path, r.body)
					edgeCall(b, base.url, base.key, r.path, r.body)
				}
				b.ReportMetric(float64(cpuTicks(b, w.pid)-w0)*10/float64(b.N), "cpu-ms/op")
				b.ReportMetric(float64(cpuTicks(b, base.pid)-base0)*10/float64(b.N), "base-cpu-ms/op")
			})
		}
		for _, t := range ts {
			b.Run(r.name+"/"+t.name, func(b *testing.B) {
				edgeCall(b, t.url, t.key, r.path, r.body) // warm
				before := cpuTicks(b, t.pid)
				for b.Loop() {
					edgeCall(b, t.url, t.key, r.path, r.body)
				}
				b.ReportMetric(float64(cpuTicks(b, t.pid)-before)*10/float64(b.N), "cpu-ms/op")
			})
		}
	}
}

// workerDirWith is a copy of the Worker's directory dir (buildWorker)
// with wasm as its dist/caduceus.wasm.
func workerDirWith(tb testing.TB, dir, wasm string) string {
	tb.Helper()
	return workerDirFrom(tb, dir, dir, wasm)
}

// workerDirFrom is a Worker's directory with from's JavaScript (worker.mjs,
// the scripts that start it, wasm_exec.js), wasm as its
// dist/caduceus.wasm and dir's node_modules (buildWorker).
func workerDirFrom(tb testing.TB, dir, from, wasm string) string {
	tb.Helper()
	out := tb.TempDir()
	for _, f := range []string{"worker.mjs", "start.mjs", "miniflare.mjs", "package.json", filepath.Join("dist", "wasm_exec.js")} {
		copyInto(tb, filepath.Join(from, f), filepath.Join(out, f))
	}
	copyInto(tb, wasm, filepath.Join(out, "dist", "caduceus.wasm"))
	target, err := os.Readlink(filepath.Join(dir, "node_modules"))
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Symlink(target, filepath.Join(out, "node_modules")); err != nil {
		tb.Fatal(err)
	}
	return out
}

// baseWorkerDir is the Worker's directory of the build
// CADUCEUS_BENCH_WORKER_BASE names, beside the Worker's own (dir), or ""
// when it names none: a caduceus.wasm runs with this commit's JavaScript;
// a directory (another checkout's deploy/cloudflare after `make edge`)
// with its own worker.mjs and dist/.
func baseWorkerDir(tb testing.TB, dir string) string {
	tb.Helper()
	base := os.Getenv("CADUCEUS_BENCH_WORKER_BASE")
	if base == "" {
		return ""
	}
	fi, err := os.Stat(base)
	if err != nil {
		tb.Fatalf("CADUCEUS_BENCH_WORKER_BASE: %v", err)
	}
	if fi.IsDir() {
		return workerDirFrom(tb, dir, base, filepath.Join(base, "dist", "caduceus.wasm"))
	}
	return workerDirWith(tb, dir, base)
}

// jsColdEntry is a Worker with no Go in it: its first request is a new
// isolate's without the Go program (js), and with /d1 it makes as many
// round trips to D1 as a turn from JavaScript: two reads and a batch, of
// two reads, where a turn's batch writes (js-d1): what opening D1 and its
// first statements cost an isolate's first request.
const jsColdEntry = `export default {
  async fetch(request, env) {
    if (new URL(request.url).pathname === "/d1") {
      await env.DB.prepare("SELECT id, tenant FROM api_keys LIMIT 1").raw();
      await env.DB.prepare("SELECT COUNT(*) FROM shim_provisions").raw();
      await env.DB.batch([env.DB.prepare("SELECT 1"), env.DB.prepare("SELECT 2")]);
    }
    return new Response("{}", { headers: { "Content-Type": "application/json" } });
  },
};
`

// jsWorkerDir is a Worker's directory beside dir (buildWorker) with
// script as its worker.mjs.
func jsWorkerDir(tb testing.TB, dir, script string) string {
	tb.Helper()
	out := workerDirWith(tb, dir, filepath.Join(dir, "dist", "caduceus.wasm"))
	if err := os.WriteFile(filepath.Join(out, "worker.mjs"), []byte(script), 0o644); err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkEdgeWorkerColdStart times the first request a new Worker
// isolate answers (starting the Go runtime in the module worker.mjs
// instantiated when the isolate loaded, adopting the admin key it
// presents in D1), after miniflare has started workerd: the Worker's first /readyz with the admin key (three D1
// statements: the admin key's read and insert, readyz's own); the same
// Worker's first turn on a D1 that already holds the tenant's key and a
// provision that answers it (worker-turn: a direct answer, three round
// trips: the key, the provisions, the turn's batch), the first request of
// an isolate of a deployed Worker; its first /healthz without an admin key
// (worker-nodb: no D1 statement); the floor's /readyz
// (deploy/cloudflare/floor: only the standard library packages the edge
// uses, behind the same bridge; no D1 statement); the floor's with the
// MCP SDK linked (floor+mcp: -tags caduceus_floor_mcp, its POST /mcp);
// and a Worker with no Go in it, without D1 (js) and making a turn's
// three round trips on worker-turn's D1 (js-d1; jsColdEntry).
// first-ms is that request's wall time; cpu-ms/op the CPU workerd spent
// on it; main-ms the time workerd's main thread (the isolates', the entry
// worker's and miniflare's D1's) ran on a core, wait-ms the time it waited
// runnable for one, threads-ms the time its other threads (V8's optimizing
// compiler among them) ran (coldStart). They run in turn, start after
// start; worker-turn-second is the same turn after an untimed GET /healthz
// has started the Go program; worker-turn-vs-floor the first turn and the
// floor's first request alternated, with their difference. With
// CADUCEUS_BENCH_WORKER_BASE naming another build (baseWorkerDir),
// worker-turn-vs-base compares the two Workers' first turns, start by
// start.
//
//	go test -run '^$' -bench EdgeWorkerColdStart -benchtime 5x ./cmd/caduceus
func BenchmarkEdgeWorkerColdStart(b *testing.B) {
	worker := buildWorker(b)
	admin := []string{"CADUCEUS_ADMIN_KEY=" + edgeAdminKey, "CADUCEUS_OFFLINE=true"}
	// A D1 that already holds a tenant's key and a provision that answers
	// directly: the database an isolate of a deployed Worker starts on.
	d1Dir := b.TempDir()
	stored := append([]string{"CADUCEUS_D1_DIR=" + d1Dir}, admin...)
	first := startWorker(b, worker, stored...)
	tenant := edgeKey(b, first.url, edgeAdminKey, `{"tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code"}`)
	edgeCall(b, first.url, tenant, "/v1/provisions", `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)
	first.cmd.Process.Signal(os.Interrupt)
	first.cmd.Wait()
	turn := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`
	floor := buildWorkerOf(b, "./deploy/cloudflare/floor")
	for _, run := range []struct {
		name, dir, method, path, key, body string
		env                                []string
	}{
		{"js", jsWorkerDir(b, worker, jsColdEntry), "GET", "/", "", "", admin},
		{"js-d1", jsWorkerDir(b, worker, jsColdEntry), "GET", "/d1", "", "", stored},
		{"worker", worker, "GET", "/readyz", edgeAdminKey, "", admin},
		{"worker-turn", worker, "POST", "/v1/chat/completions", tenant, turn, stored},
		{"worker-nodb", worker, "GET", "/healthz", edgeAdminKey, "", []string{"CADUCEUS_OFFLINE=true"}},
		{"floor", floor, "GET", "/readyz", edgeAdminKey, "", admin},
		{"floor+mcp", buildWorkerOf(b, "./deploy/cloudflare/floor", "-tags=caduceus_floor_mcp"), "GET", "/readyz", edgeAdminKey, "", admin},
	} {
		b.Run(run.name, func(b *testing.B) {
			var sum coldStart
			for b.Loop() {
				sum.add(coldFirst(b, run.dir, run.method, run.path, run.key, run.body, run.env))
			}
			sum.report(b, "")
		})
	}
	// worker-turn-second: the same turn as an isolate's second request,
	// after a GET /healthz that started the Go program (no D1 statement):
	// the turn's own code and D1's first statements, run for the first
	// time, without the runtime's start and the packages' initialisation.
	b.Run("worker-turn-second", func(b *testing.B) {
		var sum coldStart
		for b.Loop() {
			sum.add(coldAfter(b, worker, "/healthz", "POST", "/v1/chat/completions", tenant, turn, stored))
		}
		sum.report(b, "")
	})
	// worker-turn-vs-floor: the Worker's first turn and the floor's first
	// request, start by start in turn, each first in every other pair:
	// what the edge adds to the least a Go program behind the same bridge
	// costs a new isolate, on its thread (edge-main-ms) and in wall time
	// (edge-first-ms); the floor's own figures are floor-*.
	b.Run("worker-turn-vs-floor", func(b *testing.B) {
		var sum, floorSum coldStart
		alternate(b, func() {
			sum.add(coldFirst(b, worker, "POST", "/v1/chat/completions", tenant, turn, stored))
		}, func() {
			floorSum.add(coldFirst(b, floor, "GET", "/readyz", edgeAdminKey, "", admin))
		})
		sum.report(b, "")
		floorSum.report(b, "floor-")
		b.ReportMetric(sum.per(sum.mainRun)-floorSum.per(floorSum.mainRun), "edge-main-ms")
		b.ReportMetric(sum.per(sum.wall)-floorSum.per(floorSum.wall), "edge-first-ms")
	})
	// With CADUCEUS_BENCH_WORKER_BASE (baseWorkerDir), the first turn of
	// the Worker and of that build, start by start in turn, each first in
	// every other pair (worker-turn-vs-base): first-ms and cpu-ms/op are
	// the Worker's, base-first-ms and base-cpu-ms/op the other's.
	if base := baseWorkerDir(b, worker); base != "" {
		b.Run("worker-turn-vs-base", func(b *testing.B) {
			var sum, baseSum coldStart
			alternate(b, func() {
				sum.add(coldFirst(b, worker, "POST", "/v1/chat/completions", tenant, turn, stored))
			}, func() {
				baseSum.add(coldFirst(b, base, "POST", "/v1/chat/completions", tenant, turn, stored))
			})
			sum.report(b, "")
			baseSum.report(b, "base-")
		})
	}
}

// coldStart is what coldAfter measures of a new isolate's request (or
// their sum over starts): its wall time, the CPU ticks (10 ms each)
// workerd spent from the request to its answer, and, from each of
// workerd's threads' schedstat, the time its main thread (the one that
// runs the isolates, the entry worker and miniflare's D1) ran, the time
// it waited runnable for a core, and the time its other threads (V8's
// compiler among them) ran.
type coldStart struct {
	n                              int
	wall, mainRun, mainWait, other time.Duration
	ticks                          int64
}

func (c *coldStart) add(d coldStart) {
	c.n++
	c.wall += d.wall
	c.mainRun += d.mainRun
	c.mainWait += d.mainWait
	c.other += d.other
	c.ticks += d.ticks
}

// alternate runs x and y once each per iteration of b's loop, each first
// in every other one.
func alternate(b *testing.B, x, y func()) {
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 {
			x()
			y()
		} else {
			y()
			x()
		}
	}
}

// per is d's mean per start, in milliseconds.
func (c coldStart) per(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000 / float64(c.n)
}

// report gives the means per start: first-ms (the wall), cpu-ms/op (all
// of workerd's CPU), main-ms (its main thread on a core), wait-ms (its
// main thread runnable and waiting for one) and threads-ms (the other
// threads on a core), each name prefixed.
func (c coldStart) report(b *testing.B, prefix string) {
	b.ReportMetric(c.per(c.wall), prefix+"first-ms")
	b.ReportMetric(float64(c.ticks)*10/float64(c.n), prefix+"cpu-ms/op")
	b.ReportMetric(c.per(c.mainRun), prefix+"main-ms")
	b.ReportMetric(c.per(c.mainWait), prefix+"wait-ms")
	b.ReportMetric(c.per(c.other), prefix+"threads-ms")
}

// threadTimes is, from /proc/pid/task/*/schedstat, the time the thread
// tid == pid has run on a core and has waited runnable for one, and the
// time all the process's other threads have run.
func threadTimes(tb testing.TB, pid int) (mainRun, mainWait, other time.Duration) {
	tb.Helper()
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	if err != nil || len(tasks) == 0 {
		tb.Fatalf("no threads of %d: %v", pid, err)
	}
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that ended
		}
		f := strings.Fields(string(b))
		run, _ := strconv.ParseInt(f[0], 10, 64)
		wait, _ := strconv.ParseInt(f[1], 10, 64)
		if filepath.Base(filepath.Dir(t)) == strconv.Itoa(pid) {
			mainRun, mainWait = time.Duration(run), time.Duration(wait)
		} else {
			other += time.Duration(run)
		}
	}
	return mainRun, mainWait, other
}

// coldFirst starts the Worker in dir (with env), sends its new isolate
// one request and stops it, and measures that request (coldStart). The
// start and the stop are outside the benchmark's timer.
func coldFirst(b *testing.B, dir, method, path, key, body string, env []string) coldStart {
	return coldAfter(b, dir, "", method, path, key, body, env)
}

// coldAfter is coldFirst with an untimed GET of warm (when not "") sent to
// the new isolate before the request it times.
func coldAfter(b *testing.B, dir, warm, method, path, key, body string, env []string) coldStart {
	b.StopTimer()
	w := startWorker(b, dir, env...)
	pid := workerdOf(b, w.cmd.Process.Pid)
	if warm != "" {
		resp, err := http.Get(w.url + warm)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("GET %s: %v %v", warm, resp, err)
		}
		resp.Body.Close()
	}
	before := cpuTicks(b, pid)
	run0, wait0, other0 := threadTimes(b, pid)
	b.StartTimer()
	start := time.Now()
	req, _ := http.NewRequest(method, w.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("X-Caduceus-Harness", "claude-code")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("first request: %v %v", resp, err)
	}
	resp.Body.Close()
	wall := time.Since(start)
	b.StopTimer()
	c := coldStart{n: 1, wall: wall, ticks: cpuTicks(b, pid) - before}
	run1, wait1, other1 := threadTimes(b, pid)
	c.mainRun, c.mainWait, c.other = run1-run0, wait1-wait0, other1-other0
	w.cmd.Process.Signal(os.Interrupt)
	w.cmd.Wait()
	b.StartTimer()
	return c
}
