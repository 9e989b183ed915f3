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

// d1CountingEntry is a Worker entry for the test: worker.mjs (renamed
// caduceus-worker.mjs) with its D1 binding wrapped so that every call the
// Worker makes to D1 (a statement's raw, all, first or run; a batch) is
// listed, as "query TABLE", "exec TABLE" or "batch[N] TABLE ...", and
// GET /__d1calls answers the list since the last time it was asked.
const d1CountingEntry = `import inner from "./caduceus-worker.mjs";
const calls = [];
const inners = new WeakMap(), tables = new WeakMap();
function table(sql) {
  const f = sql.trim().split(/\s+/);
  for (let i = 0; i + 1 < f.length; i++) {
    if (["FROM", "INTO", "UPDATE"].includes(f[i].toUpperCase())) return f[i + 1].replace(/[(,]/g, "");
  }
  return "?";
}
function statement(s, sql) {
  const w = {
    bind: (...a) => statement(s.bind(...a), sql),
    raw: (...a) => { calls.push("query " + table(sql)); return s.raw(...a); },
    all: (...a) => { calls.push("query " + table(sql)); return s.all(...a); },
    first: (...a) => { calls.push("query " + table(sql)); return s.first(...a); },
    run: (...a) => { calls.push("exec " + table(sql)); return s.run(...a); },
  };
  inners.set(w, s);
  tables.set(w, table(sql));
  return w;
}
function wrap(db) {
  return {
    prepare: (sql) => statement(db.prepare(sql), sql),
    batch: (list) => {
      calls.push("batch[" + list.length + "] " + list.map((w) => tables.get(w)).join(" "));
      return db.batch(list.map((w) => inners.get(w)));
    },
    exec: (q) => { calls.push("exec ?"); return db.exec(q); },
  };
}
let env2;
export default {
  async fetch(request, env, ctx) {
    if (new URL(request.url).pathname === "/__d1calls") {
      const out = JSON.stringify(calls.splice(0));
      return new Response(out, { headers: { "Content-Type": "application/json" } });
    }
    env2 ??= { ...env, DB: wrap(env.DB) };
    return inner.fetch(request, env2, ctx);
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
	dir := buildWorker(t)
	if err := os.Rename(filepath.Join(dir, "worker.mjs"), filepath.Join(dir, "caduceus-worker.mjs")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "worker.mjs"), []byte(d1CountingEntry), 0o644); err != nil {
		t.Fatal(err)
	}
	upstream := httptest.NewServer(&edgeUpstream{})
	t.Cleanup(upstream.Close)
	w := startWorker(t, dir, "CADUCEUS_ADMIN_KEY="+edgeAdminKey, "CADUCEUS_OPENAI_URL="+upstream.URL+"/v1", "CADUCEUS_OPENAI_API_KEY=sk-upstream")
	calls := func() []string {
		var all []string
		if err := json.Unmarshal(edgeCall(t, w.url, "", "/__d1calls", ""), &all); err != nil {
			t.Fatal(err)
		}
		return slices.DeleteFunc(all, func(c string) bool {
			return c == "query shim_provisions" || c == "query shim_context"
		})
	}
	key := edgeKey(t, w.url, edgeAdminKey, `{"tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code"}`)
	edgeCall(t, w.url, key, "/v1/provisions", `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`)
	edgeCall(t, w.url, key, "/v1/provisions", `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	edgeCall(t, w.url, key, "/v1/context", `{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`)
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
