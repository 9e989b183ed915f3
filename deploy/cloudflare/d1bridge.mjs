// The D1 bridge: D1 as workerd runs it locally (Miniflare's D1, the
// database `wrangler dev` gives a Worker), served over HTTP on 127.0.0.1 so
// that Go tests off the Worker (deploy/cloudflare/d1test) run the edge's
// stores on it. A tiny Worker holding D1 bindings answers; it calls the
// binding exactly as the Worker's d1.go does (prepare, bind, raw / run /
// batch), so each answer, each error message included, is D1's own.
//
//   node d1bridge.mjs    (after `npm ci`)
//
// CADUCEUS_D1_MIGRATIONS names the migrations directory (default
// edge/migrations); CADUCEUS_D1_DATABASES how many databases it holds
// (default 4, DB0 .. DBn-1), so that tests holding several at once each
// get one of their own. It prints "d1bridge listening on
// http://127.0.0.1:PORT databases N" once it serves, and stops when its
// standard input closes (the Go test process that started it exited) or
// on SIGTERM or SIGINT.
//
// Every route is a POST of JSON to /DB<i>/<route>:
//
//   /query  {"sql", "args"}  -> {"rows": [[v, ...], ...]}   raw()
//   /exec   {"sql", "args"}  -> {"changes": n}             run(), meta.changes
//   /batch  {"stmts": [{"sql", "args"}, ...]} -> {}          batch(): all or none
//   /reset  {}               -> {}   every table dropped, the migrations applied again
//
// Arguments are JSON strings, numbers, booleans and null, bound as the
// JavaScript values JSON.parse makes of them (a number is a JavaScript
// number, as d1.go binds an int64: D1 binds it as REAL). A result's BLOB
// is answered as {"blob": "<base64>"}. A statement D1 refuses is
// answered 422 {"error": message}, its message as D1 threw it.
import { Miniflare } from "miniflare";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const migrationsDir = process.env.CADUCEUS_D1_MIGRATIONS || join(here, "..", "..", "edge", "migrations");
const count = Number(process.env.CADUCEUS_D1_DATABASES || 4);
if (!Number.isInteger(count) || count < 1 || count > 64) {
  throw new Error(`CADUCEUS_D1_DATABASES=${process.env.CADUCEUS_D1_DATABASES}: want 1 to 64`);
}

// Each migration file's statements, split as miniflare.mjs splits them
// (comment lines dropped, then on ";"), applied in one batch per file.
const migrations = readdirSync(migrationsDir).filter((f) => f.endsWith(".sql")).sort().map((file) =>
  readFileSync(join(migrationsDir, file), "utf8")
    .split("\n").filter((l) => !l.trimStart().startsWith("--")).join("\n")
    .split(";").map((s) => s.trim()).filter(Boolean));
if (migrations.length === 0) throw new Error(`no migrations (*.sql) in ${migrationsDir}`);

const script = `
const b64 = (bytes) => { let s = ""; for (const c of bytes) s += String.fromCharCode(c); return btoa(s); };
const value = (v) => {
  if (v instanceof ArrayBuffer) return { blob: b64(new Uint8Array(v)) };
  if (ArrayBuffer.isView(v)) return { blob: b64(new Uint8Array(v.buffer, v.byteOffset, v.byteLength)) };
  if (Array.isArray(v)) return { blob: b64(v) };
  return v;
};
const statement = (db, st) => {
  const s = db.prepare(st.sql);
  return st.args && st.args.length > 0 ? s.bind(...st.args) : s;
};
async function reset(db, migrations) {
  const tables = await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%'").raw();
  if (tables.length > 0) {
    await db.batch(tables.map(([name]) => db.prepare('DROP TABLE "' + name.replaceAll('"', '""') + '"')));
  }
  for (const stmts of migrations) await db.batch(stmts.map((s) => db.prepare(s)));
}
export default {
  async fetch(request, env) {
    const [, name, route] = new URL(request.url).pathname.split("/");
    const db = env[name];
    if (request.method !== "POST" || !/^DB[0-9]+$/.test(name) || db === undefined) {
      return Response.json({ error: "d1bridge: no route " + request.method + " " + new URL(request.url).pathname }, { status: 404 });
    }
    let body;
    try {
      body = await request.json();
    } catch (e) {
      return Response.json({ error: "d1bridge: the request is not JSON: " + e.message }, { status: 400 });
    }
    try {
      switch (route) {
        case "query":
          return Response.json({ rows: (await statement(db, body).raw()).map((r) => r.map(value)) });
        case "exec":
          return Response.json({ changes: (await statement(db, body).run()).meta.changes });
        case "batch":
          await db.batch(body.stmts.map((st) => statement(db, st)));
          return Response.json({});
        case "reset":
          await reset(db, env.MIGRATIONS);
          return Response.json({});
      }
    } catch (e) {
      return Response.json({ error: e instanceof Error ? e.message : String(e) }, { status: 422 });
    }
    return Response.json({ error: "d1bridge: no route " + route }, { status: 404 });
  },
};
`;

const d1Databases = Object.fromEntries(Array.from({ length: count }, (_, i) => [`DB${i}`, `caduceus-d1bridge-${i}`]));
const mf = new Miniflare({
  modules: true,
  script,
  compatibilityDate: "2026-04-01",
  d1Databases,
  d1Persist: false,
  bindings: { MIGRATIONS: migrations },
  host: "127.0.0.1",
  port: 0,
});
const url = await mf.ready;
console.log(`d1bridge listening on ${url.origin} databases ${count}`);

let stopping = false;
const stop = () => {
  if (stopping) return;
  stopping = true;
  mf.dispose().then(() => process.exit(0), () => process.exit(1));
};
for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, stop);
process.stdin.on("end", stop);
process.stdin.on("close", stop);
process.stdin.resume();
