// Profiles the Worker's isolate under workerd while it answers warm
// requests, or a new isolate's first request: miniflare runs it
// (start.mjs, as miniflare.mjs does, with a local D1, an upstream in this
// process and the admin key below), the inspector's CDP
// Profiler samples the isolate (its JavaScript and the Go program's Wasm,
// whose functions keep their names when built without -ldflags=-s), and
// the profile is written for Chrome's DevTools or speedscope, with the
// functions that took the most time printed per request:
//
//   GOOS=js GOARCH=wasm go build -o dist/caduceus.wasm .   (and dist/wasm_exec.js, as `make edge`)
//   node profile.mjs [healthz|readyz|preview|direct|shimmed] [requests|first] [out.cpuprofile]
//
// With "first" for requests, the request profiled is a new isolate's
// first: the rules are written, the Worker stopped and started again on
// the same (persisted) D1, and the profiler attached before the request,
// which then starts the Go runtime and runs the packages'
// initialisation. Its output also gives the time spent under the
// runtime's start (schedinit) and the packages' initialisation (doInit1).
//
// The profiler's sampling slows the isolate (a forwarded turn takes about
// twice its wall time); the shares hold, the absolute times do not.
// docs/edge.md ("CPU per request", "Cold start") says what its figures
// were.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { startWorker } from "./start.mjs";

const [kind = "shimmed", nArg = "300", out = "worker.cpuprofile"] = process.argv.slice(2);
const first = nArg === "first";
const N = first ? 1 : Number(nArg);
const admin = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst";
const requests = {
  healthz: ["/healthz", ""],
  readyz: ["/readyz", ""],
  preview: ["/api/preview", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`],
  direct: ["/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`],
  shimmed: ["/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`],
};
if (!requests[kind] || !(N > 0)) throw new Error(`usage: node profile.mjs [${Object.keys(requests).join("|")}] [requests|first] [out]`);

// The upstream: one chat completion for every call.
const upstream = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.setHeader("Content-Type", "application/json");
    res.end(`{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`);
  });
});
await new Promise((r) => upstream.listen(0, "127.0.0.1", r));

const inspectorPort = 20000 + Math.floor(Math.random() * 20000);
const persist = first ? mkdtempSync(join(tmpdir(), "caduceus-profile-d1-")) : false;
const options = {
  bindings: {
    CADUCEUS_ADMIN_KEY: admin,
    CADUCEUS_OPENAI_URL: `http://127.0.0.1:${upstream.address().port}/v1`,
    CADUCEUS_OPENAI_API_KEY: "sk-upstream",
  },
  persist,
  inspectorPort,
};
let mf = await startWorker(options);
try {
  let url = (await mf.ready).origin;
  const call = async (key, path, body) => {
    const r = await fetch(url + path, {
      method: body ? "POST" : "GET",
      body: body || undefined,
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + key, "X-Caduceus-Harness": "claude-code" },
    });
    const text = await r.text();
    if (!r.ok) throw new Error(`${path}: ${r.status} ${text}`);
    return text;
  };
  // The rules BenchmarkEdgeWorker sets (cmd/caduceus).
  const { key } = JSON.parse(await call(admin, "/v1/admin/keys", `{"tenant":"slot-1","scopes":["route","configure"],"harness":"claude-code"}`));
  await call(key, "/v1/provisions", `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days."}}`);
  await call(key, "/v1/provisions", `{"id":"PROV-DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`);
  await call(key, "/v1/context", `{"ref":"verb:deploy","kind":"verb","title":"Deploying","body":"Deploy with make deploy-staging first."}`);
  const [path, body] = requests[kind];
  if (first) {
    // A new isolate on the same D1: the Worker stopped and started again.
    await mf.dispose();
    mf = null;
    mf = await startWorker(options);
    url = (await mf.ready).origin;
  } else {
    for (let i = 0; i < 300; i++) await call(key, path, body); // warm
  }

  // The Worker's own isolate ("core:user:"; miniflare's entry worker and
  // D1's have their own).
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json/list`)).json();
  const target = targets.find((t) => t.title.includes("core:user:"));
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => { ws.on("open", resolve); ws.on("error", reject); });
  let next = 0;
  const waiting = new Map();
  ws.on("message", (m) => {
    const msg = JSON.parse(m.toString());
    waiting.get(msg.id)?.(msg);
    waiting.delete(msg.id);
  });
  const cdp = (method, params = {}) => new Promise((resolve) => {
    const id = ++next;
    waiting.set(id, resolve);
    ws.send(JSON.stringify({ id, method, params }));
  });
  await cdp("Profiler.enable");
  await cdp("Profiler.setSamplingInterval", { interval: 100 });
  await cdp("Profiler.start");
  const start = performance.now();
  for (let i = 0; i < N; i++) await call(key, path, body);
  const wall = performance.now() - start;
  const { result, error } = await cdp("Profiler.stop");
  if (error) throw new Error(JSON.stringify(error));
  ws.close();
  writeFileSync(out, JSON.stringify(result.profile));

  // Self time per function, per request.
  const p = result.profile;
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let busy = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const name = byId.get(p.samples[i]).callFrame.functionName || "(anonymous)";
    const dt = p.timeDeltas[i + 1] ?? 0;
    if (name === "(idle)" || name === "(root)") continue;
    busy += dt;
    self.set(name, (self.get(name) ?? 0) + dt);
  }
  const ms = (us) => (us / 1000 / N).toFixed(3).padStart(8);
  console.log(`${kind}: ${N} requests, ${(wall / N).toFixed(2)} ms of wall each while profiled; the isolate busy ${ms(busy).trim()} ms each; ${out}`);
  for (const [name, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${ms(t)} ms  ${name}`);
  if (first) {
    // Time under the runtime's start and the packages' initialisation.
    const parent = new Map();
    for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
    const under = { "runtime.schedinit": 0, "runtime.doInit1": 0 };
    for (let i = 0; i < p.samples.length; i++) {
      for (let id = p.samples[i]; id !== undefined; id = parent.get(id)) {
        const name = byId.get(id).callFrame.functionName;
        if (name in under) {
          under[name] += p.timeDeltas[i + 1] ?? 0;
          break;
        }
      }
    }
    for (const [name, t] of Object.entries(under)) console.log(`${ms(t)} ms  under ${name}`);
  }
} finally {
  await mf?.dispose();
  upstream.close();
  if (persist) rmSync(persist, { recursive: true, force: true });
}
