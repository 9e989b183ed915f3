// startWorker runs the Worker (worker.mjs, beside this file) under
// Miniflare (workerd) with a D1 database named DB, to which the edge's
// migrations are applied, by a second worker beside it on the same D1
// (migratorScript), as `wrangler d1 migrations apply` applies them:
// each file once, recorded by name in the d1_migrations table, its
// statements and its record in one batch (one transaction). A restart, or
// a second runner on the same persisted D1 directory, applies only what
// is new; when another runner applied a file first, its batch fails and
// the file is found recorded. miniflare.mjs and profile.mjs start the
// Worker through it.
//
// options: bindings (the Worker's environment), port (0: any free one),
// persist (a directory for D1, or false: memory), inspectorPort (for
// CDP), migrations (the directory of .sql files; default
// CADUCEUS_D1_MIGRATIONS or edge/migrations). It returns the Miniflare,
// ready.
import { Miniflare } from "miniflare";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

export async function startWorker({ bindings = {}, port = 0, persist = false, inspectorPort, migrations } = {}) {
  const compatibilityDate = "2026-04-01";
  const d1Databases = { DB: "caduceus-edge" };
  const mf = new Miniflare({
    d1Persist: persist,
    host: "127.0.0.1",
    port,
    ...(inspectorPort ? { inspectorPort } : {}),
    workers: [
      {
        modules: true,
        scriptPath: join(here, "worker.mjs"),
        modulesRoot: here,
        modulesRules: [
          { type: "CompiledWasm", include: ["**/*.wasm"] },
          { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
        ],
        compatibilityDate,
        // A client that leaves aborts request.signal; the Go side cancels
        // the request's context on it (as wrangler.jsonc's
        // compatibility_flags).
        compatibilityFlags: ["enable_request_signal"],
        d1Databases,
        bindings,
      },
      // The migrations run in workerd, beside the Worker on the same D1,
      // sent over HTTP to a socket of their own: Miniflare's D1 binding in
      // Node makes a synchronous call for every prepare() and bind(), and
      // under load one of those calls can find no answer (an assertion in
      // its SynchronousFetcher).
      {
        name: migrator,
        modules: true,
        script: migratorScript,
        compatibilityDate,
        d1Databases,
        unsafeDirectSockets: [{ host: "127.0.0.1", port: 0 }],
      },
    ],
  });
  try {
    await migrate(await mf.unsafeGetDirectURL(migrator),
      migrations || process.env.CADUCEUS_D1_MIGRATIONS || join(here, "..", "..", "edge", "migrations"));
    await mf.ready;
  } catch (err) {
    await mf.dispose();
    throw err;
  }
  return mf;
}

// migrator is the name of the worker that applies the migrations.
const migrator = "caduceus-migrate";

// migratorScript applies the migration files POSTed to it as JSON
// ([{name, statements}], in order), each unless d1_migrations records it:
// its statements and its record in one batch. It answers 200, or 500 with
// the file and D1's error.
const migratorScript = `export default {
  async fetch(request, env) {
    const db = env.DB;
    await db.prepare(\`CREATE TABLE IF NOT EXISTS d1_migrations(
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT UNIQUE,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)\`).run();
    const applied = async (name) =>
      (await db.prepare("SELECT 1 FROM d1_migrations WHERE name = ?").bind(name).first()) !== null;
    for (const { name, statements } of await request.json()) {
      if (await applied(name)) continue;
      const batch = statements.map((s) => db.prepare(s));
      batch.push(db.prepare("INSERT INTO d1_migrations (name) VALUES (?)").bind(name));
      try {
        await db.batch(batch);
      } catch (err) {
        // Another runner on the same D1 applied it first.
        if (!(await applied(name))) return new Response("migration " + name + ": " + err.message, { status: 500 });
      }
    }
    return new Response("ok");
  },
};`;

// migrate sends the .sql files of dir, in name order, each split into its
// statements, to the migrator at url.
async function migrate(url, dir) {
  const files = readdirSync(dir).filter((f) => f.endsWith(".sql")).sort().map((name) => {
    const sql = readFileSync(join(dir, name), "utf8")
      .split("\n").filter((l) => !l.trimStart().startsWith("--")).join("\n");
    return { name, statements: sql.split(";").map((s) => s.trim()).filter(Boolean) };
  });
  const r = await fetch(url, { method: "POST", body: JSON.stringify(files) });
  const text = await r.text();
  if (!r.ok) throw new Error(text);
}
