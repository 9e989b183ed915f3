// startWorker runs the Worker (worker.mjs, beside this file) under
// Miniflare (workerd) with a D1 database named DB, to which the edge's
// migrations are applied as `wrangler d1 migrations apply` applies them:
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

export async function startWorker(options = {}) {
  for (let again = 2; ; again--) {
    try {
      return await start(options);
    } catch (err) {
      if (again === 0 || !syncRace(err)) throw err;
    }
  }
}

async function start({ bindings = {}, port = 0, persist = false, inspectorPort, migrations } = {}) {
  const mf = new Miniflare({
    modules: true,
    scriptPath: join(here, "worker.mjs"),
    modulesRoot: here,
    modulesRules: [
      { type: "CompiledWasm", include: ["**/*.wasm"] },
      { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
    ],
    compatibilityDate: "2026-04-01",
    // A client that leaves aborts request.signal; the Go side cancels the
    // request's context on it (as wrangler.jsonc's compatibility_flags).
    compatibilityFlags: ["enable_request_signal"],
    d1Databases: { DB: "caduceus-edge" },
    d1Persist: persist,
    bindings,
    host: "127.0.0.1",
    port,
    ...(inspectorPort ? { inspectorPort } : {}),
  });
  try {
    await migrate(await mf.getD1Database("DB"),
      migrations || process.env.CADUCEUS_D1_MIGRATIONS || join(here, "..", "..", "edge", "migrations"));
    await mf.ready;
  } catch (err) {
    await mf.dispose();
    throw err;
  }
  return mf;
}

// syncRace reports whether err is Miniflare's own assertion that the
// answer to a synchronous call from Node (Atomics.wait on its worker
// thread; D1's prepare() and bind() are such calls) is the one it waited
// for: seen under load (a CI run beside other packages' tests, 2026-12-07),
// a race in Miniflare rather than anything of the Worker's or of the
// migrations. The migrations are applied each file in one batch, so
// startWorker tries a start that failed on it again from the beginning
// (twice at most); any other error ends the start.
function syncRace(err) {
  return err?.code === "ERR_ASSERTION" && /SynchronousFetcher/.test(err.stack ?? "");
}

async function migrate(db, dir) {
  await db.prepare(`CREATE TABLE IF NOT EXISTS d1_migrations(
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT UNIQUE,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)`).run();
  const applied = async (name) =>
    (await db.prepare("SELECT 1 FROM d1_migrations WHERE name = ?").bind(name).first()) !== null;
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".sql")).sort()) {
    if (await applied(file)) continue;
    const sql = readFileSync(join(dir, file), "utf8")
      .split("\n").filter((l) => !l.trimStart().startsWith("--")).join("\n");
    const statements = sql.split(";").map((s) => s.trim()).filter(Boolean).map((s) => db.prepare(s));
    statements.push(db.prepare("INSERT INTO d1_migrations (name) VALUES (?)").bind(file));
    try {
      await db.batch(statements);
    } catch (err) {
      if (!(await applied(file))) throw new Error(`migration ${file}: ${err.message}`);
    }
  }
}
