package main

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// d1CountingEntry is a Worker entry for the tests: worker.mjs (renamed
// caduceus-worker.mjs) with its D1 binding wrapped so that every call the
// Worker makes to D1 (a statement's raw, all, first or run; a batch) is
// listed, as "query TABLE", "exec TABLE" or "batch[N] TABLE ...", and
// GET /__d1calls answers the list since the last time it was asked. GET
// /__d1replay runs the D1 calls of the last request the Go side served
// again from JavaScript (the turn's record moved up the chain, its ids
// made new), POST /__fetch makes a forwarded turn's upstream call from
// JavaScript, and GET /__noop answers without Go or D1: what D1 and the
// upstream call cost a turn, apart from the Worker's own code
// (BenchmarkEdgeWorkerD1). GET /__pin keeps the last request's D1 calls
// for the Go side of a benchmark build, whose POST /__goturn makes them
// again (deploy/cloudflare/bench.go).
const d1CountingEntry = `import inner from "./caduceus-worker.mjs";
const calls = [];
let current = [], last = [];
const inners = new WeakMap(), tables = new WeakMap(), texts = new WeakMap();
function table(sql) {
  const f = sql.trim().split(/\s+/);
  for (let i = 0; i + 1 < f.length; i++) {
    if (["FROM", "INTO", "UPDATE"].includes(f[i].toUpperCase())) return f[i + 1].replace(/[(,]/g, "");
  }
  return "?";
}
function statement(s, sql, args) {
  const note = (kind) => { calls.push(kind + " " + table(sql)); current.push({ kind, sql, args }); };
  const w = {
    bind: (...a) => statement(s.bind(...a), sql, a),
    raw: (...a) => { note("query"); return s.raw(...a); },
    all: (...a) => { note("query"); return s.all(...a); },
    first: (...a) => { note("query"); return s.first(...a); },
    run: (...a) => { note("exec"); return s.run(...a); },
  };
  inners.set(w, s);
  tables.set(w, table(sql));
  texts.set(w, { sql, args });
  return w;
}
function wrap(db) {
  return {
    prepare: (sql) => statement(db.prepare(sql), sql, []),
    batch: (list) => {
      calls.push("batch[" + list.length + "] " + list.map((w) => tables.get(w)).join(" "));
      current.push({ kind: "batch", stmts: list.map((w) => texts.get(w)) });
      return db.batch(list.map((w) => inners.get(w)));
    },
    exec: (q) => { calls.push("exec ?"); return db.exec(q); },
  };
}
// replayMap is what the n-th replay of calls changes in their arguments:
// the turn's batch with its audit record moved n places up the chain
// (seq, the head's guard, prev_hash and hash follow) and its ids made new,
// so that each replay stores what the turn stored, once more.
function replayMap(calls, n) {
  const map = new Map();
  for (const c of calls) {
    if (c.kind !== "batch") continue;
    const rec = c.stmts.find((st) => st.sql.startsWith("INSERT INTO audit_records"));
    const rc = c.stmts.find((st) => st.sql.startsWith("INSERT INTO shim_receipts"));
    if (rec) {
      const [seq, id, prev, hash] = [rec.args[1], rec.args[2], rec.args[rec.args.length - 4], rec.args[rec.args.length - 3]];
      map.set(seq, seq + n).set(seq - 1, seq + n - 1).set(id, id + "r" + n);
      const fake = (i) => "sha256:" + i.toString(16).padStart(64, "0"); // a hash in form
      map.set(prev, n === 1 ? hash : fake(n - 1)).set(hash, fake(n));
    }
    if (rc) map.set(rc.args[1], rc.args[1] + "r" + n);
  }
  return map;
}
// The rules' reads, which come once a second (RulesTTL), are not
// replayed: the steady turn is.
const steady = (calls) => calls.filter((c) =>
  !(c.kind === "query" && ["shim_provisions", "shim_context"].includes(table(c.sql))));
// replay runs the D1 calls of the last request the Go side served again,
// from here, as its n-th replay (replayMap).
let replays = 0;
async function replay(db) {
  const map = replayMap(last, ++replays);
  const args = (a) => a.map((v) => (map.has(v) ? map.get(v) : v));
  const prep = (sql, a) => (a.length ? db.prepare(sql).bind(...args(a)) : db.prepare(sql));
  for (const c of steady(last)) {
    if (c.kind === "query") await prep(c.sql, c.args).raw();
    else if (c.kind === "exec") await prep(c.sql, c.args).run();
    else await db.batch(c.stmts.map((st) => prep(st.sql, st.args)));
  }
}
// For the Go side of a benchmark build (deploy/cloudflare/bench.go, POST
// /__goturn): caduceusReplayBase is the steady D1 calls of the request
// GET /__pin pinned (the last before it), as JSON, and which pin they are;
// caduceusReplayNext is what the pinned calls' next replay changes in
// their arguments (replayMap), as JSON pairs.
let pins = 0, pinnedCalls = [], pinned = "[]", pinReplays = 0;
globalThis.caduceusReplayBase = () => [pins, pinned];
globalThis.caduceusReplayNext = () => JSON.stringify([...replayMap(pinnedCalls, ++pinReplays)]);
let env2;
export default {
  async fetch(request, env, ctx) {
    const path = new URL(request.url).pathname;
    if (path === "/__d1calls") {
      const out = JSON.stringify(calls.splice(0));
      return new Response(out, { headers: { "Content-Type": "application/json" } });
    }
    if (path === "/__noop") return new Response("{}");
    if (path === "/__fetch") {
      // The upstream call of a forwarded turn, from JavaScript.
      const r = await fetch(env.CADUCEUS_OPENAI_URL + "/chat/completions", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Authorization": "Bearer " + env.CADUCEUS_OPENAI_API_KEY },
        body: await request.text(),
      });
      return new Response(await r.text(), { status: r.status });
    }
    if (path === "/__d1replay") {
      await replay(env.DB);
      return new Response("{}");
    }
    env2 ??= { ...env, DB: wrap(env.DB) };
    if (path === "/__pin") {
      pins++;
      pinnedCalls = steady(last);
      pinned = JSON.stringify(pinnedCalls);
      pinReplays = 0;
      return new Response("{}");
    }
    if (path === "/__goturn") {
      current = []; // its calls are not a turn's: last stays the turn's
      return inner.fetch(request, env2, ctx);
    }
    current = [];
    const resp = await inner.fetch(request, env2, ctx);
    last = current;
    replays = 0;
    return resp;
  },
};
`

// The Worker's own D1 calls per turn, under miniflare: each a round trip
// (docs/edge.md, "CPU per request"). The same as TestTurnRoundTrips
// (./edge) lists natively, counted here at the D1 binding itself. The
// provisions and context entries, which the shim rereads once its
// RulesTTL (1 s) has passed, are left out: when a turn rereads them
// depends on the clock.
func TestEdgeWorkerD1RoundTrips(t *testing.T) {
	w, key := startCountingWorker(t)
	calls := func() []string {
		var all []string
		if err := json.Unmarshal(edgeCall(t, w.url, "", "/__d1calls", ""), &all); err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(all, func(c string) bool {
			return c == "query shim_provisions" || c == "query shim_context"
		})
	}
	for _, c := range []struct {
		name, path, body string
		want             []string
	}{
		{"readyz", "/readyz", "", []string{"query ?"}},
		{"direct", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`,
			[]string{"query api_keys", "batch[5] audit_records audit_heads shim_receipts shim_outcomes shim_outcomes"}},
		{"shimmed", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`,
			[]string{"query api_keys", "batch[5] audit_records audit_heads shim_receipts shim_outcomes shim_outcomes"}},
		{"forwarded", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hello"}]}`,
			[]string{"query api_keys", "batch[4] audit_records audit_heads shim_receipts shim_outcomes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			edgeCall(t, w.url, key, c.path, c.body)
			calls()
			for range 3 {
				edgeCall(t, w.url, key, c.path, c.body)
				if got := calls(); !slices.Equal(got, c.want) {
					t.Fatalf("%s made %d calls to D1:\n  %s\nwant %d:\n  %s", c.name, len(got), strings.Join(got, "\n  "), len(c.want), strings.Join(c.want, "\n  "))
				}
			}
		})
	}
}

// startCountingWorker builds the Worker, as a benchmark build (-tags
// caduceus_bench: POST /__goturn), with d1CountingEntry in front, and
// starts it with an upstream, the admin keys of slot-1 and slot-3, and a
// key of slot-1 with the benchmark's provisions and context entry; it
// returns the Worker and the key.
func startCountingWorker(tb testing.TB) (workerProc, string) {
	dir := buildWorkerOf(tb, "./deploy/cloudflare", "-tags=caduceus_bench")
	if err := os.Rename(filepath.Join(dir, "worker.mjs"), filepath.Join(dir, "caduceus-worker.mjs")); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "worker.mjs"), []byte(d1CountingEntry), 0o644); err != nil {
		tb.Fatal(err)
	}
	upstream := httptest.NewServer(&edgeUpstream{})
	tb.Cleanup(upstream.Close)
	w := startWorker(tb, dir, "CADUCEUS_ADMIN_KEY="+edgeAdminKey+",slot-3="+edgeAdminKey3, "CADUCEUS_OPENAI_URL="+upstream.URL+"/v1", "CADUCEUS_OPENAI_API_KEY=sk-upstream")
	key := edgeKey(tb, w.url, edgeAdminKey, `{"tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code"}`)
	edgeCall(tb, w.url, key, "/v1/provisions", `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)
	edgeCall(tb, w.url, key, "/v1/provisions", `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	edgeCall(tb, w.url, key, "/v1/context", `{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`)
	return w, key
}

// BenchmarkEdgeWorkerD1 is what D1 costs workerd per request, apart from
// the Worker's own code: the D1 calls of one request (readyz's statement;
// a direct answer's and a context shim's two round trips, TestEdgeWorkerD1RoundTrips)
// run again and again from JavaScript in the Worker's isolate
// (d1CountingEntry's /__d1replay, which adds no statement), beside a
// request answered there without Go or D1 (noop), and a forwarded turn's
// upstream call made from there (upstream: miniflare passes it through a
// worker of its own). A request's D1 is its replay's cpu-ms/op less
// noop's, the upstream call's runtime part upstream's less noop's; the
// rest of its cost at the Worker is the Worker's (BenchmarkEdgeWorker).
// shimmed-worker+go-io sends a context shim's turn and then the same
// turn's I/O made from Go with none of the edge's code (POST /__goturn),
// request by request: worker-cpu-ms/op less go-io-cpu-ms/op is what the
// edge's own code costs the turn.
//
//	go test -run '^$' -bench EdgeWorkerD1 -benchtime 300x -count 2 ./cmd/caduceus
func BenchmarkEdgeWorkerD1(b *testing.B) {
	w, key := startCountingWorker(b)
	pid := workerdOf(b, w.cmd.Process.Pid)
	measure := func(b *testing.B, key, path, body string) {
		edgeCall(b, w.url, key, path, body) // warm
		before := cpuTicks(b, pid)
		for b.Loop() {
			edgeCall(b, w.url, key, path, body)
		}
		b.ReportMetric(float64(cpuTicks(b, pid)-before)*10/float64(b.N), "cpu-ms/op")
	}
	shimmed := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`
	b.Run("noop", func(b *testing.B) { measure(b, "", "/__noop", "") })
	b.Run("upstream", func(b *testing.B) { measure(b, "", "/__fetch", shimmed) })
	for _, r := range []struct{ name, path, body string }{
		{"readyz", "/readyz", ""},
		{"direct", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`},
		{"shimmed", "/v1/chat/completions", shimmed},
	} {
		edgeCall(b, w.url, key, r.path, r.body)
		edgeCall(b, w.url, key, r.path, r.body) // the request whose calls are replayed
		b.Run(r.name, func(b *testing.B) { measure(b, "", "/__d1replay", "") })
	}
	// A forwarded turn's I/O made from Go through the Worker's bridge with
	// none of the edge's code (go-io: deploy/cloudflare/bench.go), beside
	// the Worker's own turns, request by request in the one isolate, each
	// request's CPU read around it. go-io makes the I/O of a turn of
	// another tenant (slot-3), so that each appends to a chain of its own.
	key3 := edgeKey(b, w.url, edgeAdminKey3, `{"tenant":"slot-3","scopes":["route","configure"],"harness":"claude-code"}`)
	edgeCall(b, w.url, key3, "/v1/provisions", `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	edgeCall(b, w.url, key3, "/v1/context", `{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`)
	edgeCall(b, w.url, key3, "/v1/chat/completions", shimmed)
	edgeCall(b, w.url, key3, "/v1/chat/completions", shimmed)
	edgeCall(b, w.url, "", "/__pin", "")
	b.Run("shimmed-worker+go-io", func(b *testing.B) {
		edgeCall(b, w.url, key, "/v1/chat/completions", shimmed) // warm
		edgeCall(b, w.url, "", "/__goturn", shimmed)
		var worker, goIO int64
		for b.Loop() {
			t0 := cpuTicks(b, pid)
			edgeCall(b, w.url, key, "/v1/chat/completions", shimmed)
			t1 := cpuTicks(b, pid)
			edgeCall(b, w.url, "", "/__goturn", shimmed)
			worker, goIO = worker+t1-t0, goIO+cpuTicks(b, pid)-t1
		}
		b.ReportMetric(float64(worker)*10/float64(b.N), "worker-cpu-ms/op")
		b.ReportMetric(float64(goIO)*10/float64(b.N), "go-io-cpu-ms/op")
	})
}
