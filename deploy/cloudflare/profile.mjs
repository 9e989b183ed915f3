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
//   node profile.mjs [healthz|readyz|preview|direct|shimmed] [requests|first|second] [out.cpuprofile]
//
// With "first" for requests, the request profiled is a new isolate's
// first: the rules are written, the Worker stopped and started again on
// the same (persisted) D1, and the profiler attached before the request,
// which then starts the Go runtime and runs the packages'
// initialisation. Its output also gives the time spent under the
// runtime's start (schedinit) and the packages' initialisation (doInit1).
//
// With an out file whose name ends in ".data", Linux perf records the
// whole workerd process instead (perf record -g, started disabled and
// enabled through its control FIFOs around the requests), and the
// isolate's thread (workerd's main thread, which also runs miniflare's
// entry worker and D1) is summed by what its samples were doing: V8's
// baseline compiler compiling a Wasm function on its first call (lazy
// compilation), V8's garbage collector, SQLite (D1), the kernel, the
// compiled code itself, and the rest; the other threads (V8's optimizing
// compiler among them) are summed apart. It needs perf (Debian's
// linux-perf) and the permission to attach to workerd.
//
// The profiler's sampling slows the isolate (a forwarded turn takes about
// twice its wall time); the shares hold, the absolute times do not.
// docs/edge.md ("CPU per request", "Cold start") says what its figures
// were.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { once } from "node:events";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import WebSocket from "ws";
import { startWorker } from "./start.mjs";

const [kind = "shimmed", nArg = "300", out = "worker.cpuprofile"] = process.argv.slice(2);
// "second": a new isolate whose Go program an untimed GET /healthz has
// started; the request profiled is its first turn, the program's start
// left out.
const second = nArg === "second";
const first = nArg === "first" || second;
const N = first ? 1 : Number(nArg);
const admin = "cad_0123456789abcdef_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst";
const requests = {
  healthz: ["/healthz", ""],
  readyz: ["/readyz", ""],
  preview: ["/api/preview", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`],
  direct: ["/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"how do I get a refund?"}]}`],
  shimmed: ["/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"please deploy the payments service"}]}`],
};
if (!requests[kind] || !(N > 0)) throw new Error(`usage: node profile.mjs [${Object.keys(requests).join("|")}] [requests|first|second] [out]`);

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
    if (second) {
      const r = await fetch(url + "/healthz");
      await r.text();
      if (!r.ok) throw new Error(`/healthz: ${r.status}`);
    }
  } else {
    for (let i = 0; i < 300; i++) await call(key, path, body); // warm
  }

  await (out.endsWith(".data") ? perfRecord : cdpProfile)(out, () => call(key, path, body), N);
} finally {
  await mf?.dispose();
  upstream.close();
  if (persist) rmSync(persist, { recursive: true, force: true });
}

// cdpProfile profiles the Worker's isolate with the CDP Profiler while
// send runs n times, writes the profile to out, and prints, per request,
// the functions that took the most time.
async function cdpProfile(out, send, n) {
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
  for (let i = 0; i < n; i++) await send();
  const wall = performance.now() - start;
  const { result, error } = await cdp("Profiler.stop");
  if (error) throw new Error(JSON.stringify(error));
  ws.close();
  writeFileSync(out, JSON.stringify(result.profile));

  // Self time per function, per request.
  const p = result.profile;
  const byId = new Map(p.nodes.map((node) => [node.id, node]));
  const self = new Map();
  let busy = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const name = byId.get(p.samples[i]).callFrame.functionName || "(anonymous)";
    const dt = p.timeDeltas[i + 1] ?? 0;
    if (name === "(idle)" || name === "(root)") continue;
    busy += dt;
    self.set(name, (self.get(name) ?? 0) + dt);
  }
  const ms = (us) => (us / 1000 / n).toFixed(3).padStart(8);
  console.log(`${kind}: ${n} requests, ${(wall / n).toFixed(2)} ms of wall each while profiled; the isolate busy ${ms(busy).trim()} ms each; ${out}`);
  for (const [name, t] of [...self].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log(`${ms(t)} ms  ${name}`);
  if (first) {
    // Time under the runtime's start and the packages' initialisation.
    const parent = new Map();
    for (const node of p.nodes) for (const c of node.children ?? []) parent.set(c, node.id);
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
}

// perfRecord records workerd (the child of this process) with perf while
// send runs n times, then prints, per request, what the samples of its
// main thread were doing and how much the other threads ran.
async function perfRecord(out, send, n) {
  const workerd = readdirSync("/proc").filter((d) => /^[0-9]+$/.test(d)).find((d) => {
    try {
      const stat = readFileSync(`/proc/${d}/stat`, "utf8");
      return stat.includes("(workerd)") && Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === process.pid;
    } catch {
      return false;
    }
  });
  if (!workerd) throw new Error("no workerd process under this one");
  const fifos = mkdtempSync(join(tmpdir(), "caduceus-perf-"));
  const ctl = join(fifos, "ctl"), ack = join(fifos, "ack");
  execFileSync("mkfifo", [ctl, ack]);
  const hz = 10000;
  const perf = spawn("perf", ["record", "-F", String(hz), "-g", "-D", "-1", "--control", `fifo:${ctl},${ack}`, "-p", workerd, "-o", out], { stdio: ["ignore", "inherit", "inherit"] });
  const exited = once(perf, "exit");
  try {
    // The FIFOs open once perf has opened its ends; each command is
    // answered with "ack" once perf has done it.
    const { open } = await import("node:fs/promises");
    const [c, a] = await Promise.all([open(ctl, "w"), open(ack, "r")]);
    const command = async (cmd) => {
      await c.write(cmd + "\n");
      const buf = Buffer.alloc(16);
      const { bytesRead } = await a.read(buf, 0, 16);
      if (!buf.subarray(0, bytesRead).toString().startsWith("ack")) throw new Error(`perf: ${cmd}: ${buf.subarray(0, bytesRead)}`);
    };
    await command("enable");
    const start = performance.now();
    for (let i = 0; i < n; i++) await send();
    const wall = performance.now() - start;
    await command("disable");
    await c.close();
    await a.close();
    perf.kill("SIGINT");
    await exited;
    console.log(`${n} requests, ${(wall / n).toFixed(2)} ms of wall each while recorded (perf slows workerd); ${out}`);
  } finally {
    perf.kill("SIGKILL");
    rmSync(fifos, { recursive: true, force: true });
  }
  const script = execFileSync("perf", ["script", "-i", out, "-F", "tid,ip,sym"], { maxBuffer: 1 << 30, stdio: ["ignore", "pipe", "ignore"] }).toString();
  const kinds = new Map();
  let other = 0;
  for (const sample of script.split("\n\n")) {
    const lines = sample.trim().split("\n");
    if (!lines[0]) continue;
    const tid = lines[0].trim();
    const frames = lines.slice(1).map((l) => l.trim().replace(/^[0-9a-f]+ /, ""));
    if (tid !== workerd) {
      other++;
      continue;
    }
    const has = (re) => frames.some((f) => re.test(f));
    const kind = /epoll_wait|epoll_pwait/.test(frames[0] ?? "") ? "idle"
      : has(/CompileLazy/) ? "V8's baseline compiler, a Wasm function's first call (lazy compilation)"
      : has(/TriggerTierUp/) ? "V8 starting a function's optimization (tier-up)"
      : has(/v8::internal::Heap::|Scavenger|MarkCompact/) ? "V8's garbage collector"
      : has(/sqlite3/i) ? "SQLite (miniflare's D1)"
      : frames[0] === "[unknown]" ? "compiled code (Wasm and JavaScript)"
      : /^(asm_|exc_|__x64|entry_|do_syscall)/.test(frames.at(-1) ?? "") || has(/^(exc_page_fault|asm_exc_page_fault)$/) ? "the kernel"
      : "the rest (workerd, V8's runtime, the bridge's builtins)";
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  const ms = (count) => (count * 1000 / hz / n).toFixed(1).padStart(7);
  const busy = [...kinds].filter(([k]) => k !== "idle").reduce((t, [, c]) => t + c, 0);
  console.log(`${ms(busy)} ms a request on workerd's main thread:`);
  for (const [kind, count] of [...kinds].filter(([k]) => k !== "idle").sort((x, y) => y[1] - x[1])) {
    console.log(`${ms(count)} ms ${(100 * count / busy).toFixed(1).padStart(5)}%  ${kind}`);
  }
  console.log(`${ms(other)} ms a request on workerd's other threads (V8's optimizing compiler among them)`);
}
