// Caduceus at the edge: the Worker's entry. It holds no rule, trigger or
// policy: it starts the Go program (dist/caduceus.wasm, built by `make
// edge` with the Go toolchain's own wasm_exec.js) once per isolate with the
// Worker's bindings, and hands it every request. The Go side reads the
// bindings (D1 as DB, the secrets and vars named in wrangler.jsonc),
// answers each request with a Response, and keeps the request alive with
// ctx.waitUntil until its turn is recorded (a client that aborts a stream
// or leaves a request still leaves a receipt).
import "./dist/wasm_exec.js";
import program from "./dist/caduceus.wasm";

let started;

// The bridge's helpers (deploy/cloudflare/fetch, d1.go): each does in one
// call what the Go side would otherwise do in many, every call a crossing
// between Wasm and JavaScript that makes a js.Value (with a finalizer) of
// what it returns. They hold no rule: they move requests, responses,
// promises and D1's statements and rows across.
globalThis.caduceusBridge = {
  // settle(id, ok, value) and aborted(id) are the Go side's callbacks,
  // set once when it starts.
  settle: null,
  aborted: null,
  pending: new Map(),
  // await settles the Go side's id with p.
  await(p, id) {
    p.then((v) => this.settle(id, true, v), (e) => this.settle(id, false, e));
  },
  // promise is a Promise the Go side settles by id (resolve, reject).
  promise(id) {
    return new Promise((resolve, reject) => this.pending.set(id, { resolve, reject }));
  },
  resolve(id, v) {
    const p = this.pending.get(id);
    this.pending.delete(id);
    p?.resolve(v);
  },
  reject(id, message) {
    const p = this.pending.get(id);
    this.pending.delete(id);
    p?.reject(new Error(message));
  },
  // request is a Request's method, URL, headers and whether it has a body,
  // as JSON; its signal's abort calls aborted(id) (once, if it has one).
  request(req, id) {
    const signal = req.signal;
    let abort = "none";
    if (typeof signal === "object" && signal !== null) {
      if (signal.aborted) abort = "aborted";
      else {
        abort = "listening";
        signal.addEventListener("abort", () => this.aborted(id), { once: true });
      }
    }
    return JSON.stringify([req.method, req.url, Array.from(req.headers), typeof req.body === "object" && req.body !== null, abort]);
  },
  // body settles id with the request's body as a Uint8Array.
  body(req, id) {
    this.await(req.arrayBuffer().then((ab) => new Uint8Array(ab)), id);
  },
  // response is a Response of status with the headers' JSON ([[name,
  // value], ...]) and body (null, a Uint8Array or a ReadableStream).
  response(body, status, headers) {
    return new Response(body, { status, headers: JSON.parse(headers) });
  },
  // Upstream calls (deploy/cloudflare/fetch, client.go): fetch settles
  // id with [the head's JSON ([status, [[name, value], ...], the final URL
  // when redirected]), the whole body as a Uint8Array or null, why the
  // whole body could not be read or null]. A body whose Content-Type is
  // JSON, and an empty one, come whole with the head; any other is read
  // from calls[id] with read(id, awaitId), a chunk a call (null at its
  // end). abort(id) aborts the call and cancels its body (an aborted
  // signal alone leaves workerd's upstream connection open once the head
  // has come), close(id) cancels its body.
  calls: new Map(),
  fetch(id, method, url, headers, body) {
    const call = { ac: new AbortController(), reader: null, aborted: false };
    this.calls.set(id, call);
    fetch(url, { method, headers: JSON.parse(headers), body, signal: call.ac.signal }).then(async (resp) => {
      const head = JSON.stringify([resp.status, Array.from(resp.headers), resp.redirected ? resp.url : ""]);
      if (resp.body === null) {
        this.calls.delete(id);
        return [head, new Uint8Array(0), null];
      }
      call.reader = resp.body.getReader();
      if (!/^application\/([a-z0-9.+-]+\+)?json\b/i.test(resp.headers.get("content-type") ?? "")) {
        return [head, null, null];
      }
      const chunks = [];
      let n = 0;
      try {
        for (;;) {
          const r = await call.reader.read();
          if (r.done) break;
          chunks.push(r.value);
          n += r.value.byteLength;
        }
        if (call.aborted) throw new Error("aborted");
      } catch (e) {
        return [head, null, String(e?.message ?? e)];
      } finally {
        this.calls.delete(id);
      }
      const whole = chunks.length === 1 ? chunks[0] : new Uint8Array(n);
      if (chunks.length !== 1) {
        let at = 0;
        for (const c of chunks) {
          whole.set(c, at);
          at += c.byteLength;
        }
      }
      return [head, whole, null];
    }).then((v) => this.settle(id, true, v), (e) => {
      this.calls.delete(id);
      this.settle(id, false, e);
    });
  },
  read(id, awaitId) {
    const reader = this.calls.get(id)?.reader;
    if (!reader) {
      this.settle(awaitId, true, null);
      return;
    }
    reader.read().then((r) => {
      if (r.done) this.calls.delete(id);
      this.settle(awaitId, true, r.done ? null : r.value);
    }, (e) => {
      this.calls.delete(id);
      this.settle(awaitId, false, e);
    });
  },
  abort(id) {
    const call = this.calls.get(id);
    if (!call) return;
    call.aborted = true;
    call.ac.abort();
    call.reader?.cancel().catch(() => {});
  },
  close(id) {
    const call = this.calls.get(id);
    this.calls.delete(id);
    call?.reader?.cancel().catch(() => {});
  },
  // D1: query settles id with raw()'s rows (as JSON when JSON holds every
  // value as it is; else as they are), exec with run()'s meta.changes,
  // batch with batch()'s end. args is the arguments' JSON ("" for none).
  // batch's stmts is the JSON of [[sql, args], ...].
  statement(db, sql, args) {
    const s = db.prepare(sql);
    return args !== null && args.length > 0 ? s.bind(...args) : s;
  },
  query(db, id, sql, args) {
    const s = this.statement(db, sql, args === "" ? null : JSON.parse(args));
    this.await(s.raw().then((rows) => this.rows(rows)), id);
  },
  exec(db, id, sql, args) {
    const s = this.statement(db, sql, args === "" ? null : JSON.parse(args));
    this.await(s.run().then((r) => r.meta.changes), id);
  },
  batch(db, id, stmts) {
    const list = JSON.parse(stmts).map(([sql, args]) => this.statement(db, sql, args));
    this.await(db.batch(list), id);
  },
  rows(rows) {
    for (const r of rows) {
      for (const v of r) {
        const t = typeof v;
        if ((t === "object" && v !== null) || (t === "number" && (!Number.isFinite(v) || Object.is(v, -0))) ||
          t === "bigint" || t === "symbol" || t === "function") {
          return rows;
        }
      }
    }
    return JSON.stringify(rows);
  },
};

// The module is instantiated when the isolate loads, in global scope,
// which workerd allows (it refuses random values and timers there, so Go's
// runtime, which asks for both as it starts, starts on the first request):
// instantiating copies the module's data into a new memory and builds its
// function table, which a first request then does not wait for.
const go = new globalThis.Go();
const instance = new WebAssembly.Instance(program, go.importObject);

function start(env) {
  globalThis.caduceusEnv = env;
  go.run(instance); // main registers caduceusServe, then waits for requests
  if (typeof globalThis.caduceusServe !== "function") {
    throw new Error("caduceus.wasm did not start");
  }
}

export default {
  async fetch(request, env, ctx) {
    started ??= (async () => start(env))();
    await started;
    return globalThis.caduceusServe(request, ctx);
  },
};
