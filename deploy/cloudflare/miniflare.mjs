// Runs the Worker locally under Miniflare (workerd) with a D1 database the
// edge's migrations (edge/migrations, or CADUCEUS_D1_MIGRATIONS) were applied to (tracked, as wrangler does), for the parity test and for
// trying the edge without a Cloudflare account:
//
//   node miniflare.mjs [port]    (after `make edge` and `npm ci`)
//
// Bindings come from the environment: CADUCEUS_ADMIN_KEY,
// CADUCEUS_EDGE_SECRET, CADUCEUS_OPENAI_URL, CADUCEUS_OPENAI_API_KEY,
// CADUCEUS_ANTHROPIC_URL, CADUCEUS_ANTHROPIC_API_KEY, CADUCEUS_OFFLINE,
// CADUCEUS_CLASSIFIER_URL (and _API_KEY), CADUCEUS_EMBEDDINGS_URL (and
// _MODEL, _API_KEY), CADUCEUS_SYNC_ALLOW.
// CADUCEUS_D1_DIR keeps the database in that directory (default: memory).
// It prints "listening on http://127.0.0.1:PORT" once it serves, and stops
// on SIGTERM or SIGINT.
import { Miniflare } from "miniflare";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const port = Number(process.argv[2] ?? 8787);
const names = [
  "CADUCEUS_ADMIN_KEY", "CADUCEUS_EDGE_SECRET", "CADUCEUS_OPENAI_URL", "CADUCEUS_OPENAI_API_KEY",
  "CADUCEUS_ANTHROPIC_URL", "CADUCEUS_ANTHROPIC_API_KEY", "CADUCEUS_OFFLINE",
  "CADUCEUS_CLASSIFIER_URL", "CADUCEUS_CLASSIFIER_API_KEY",
  "CADUCEUS_EMBEDDINGS_URL", "CADUCEUS_EMBEDDINGS_MODEL", "CADUCEUS_EMBEDDINGS_API_KEY",
  "CADUCEUS_SYNC_ALLOW",
];
const bindings = Object.fromEntries(names.filter((n) => process.env[n]).map((n) => [n, process.env[n]]));

const mf = new Miniflare({
  modules: true,
  scriptPath: join(here, "worker.mjs"),
  modulesRules: [
    { type: "CompiledWasm", include: ["**/*.wasm"] },
    { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
  ],
  compatibilityDate: "2026-04-01",
  // A client that leaves aborts request.signal; the Go side cancels the
  // request's context on it (as wrangler.jsonc's compatibility_flags).
  compatibilityFlags: ["enable_request_signal"],
  d1Databases: { DB: "caduceus-edge" },
  d1Persist: process.env.CADUCEUS_D1_DIR || false,
  bindings,
  host: "127.0.0.1",
  port,
});

// Migrations are applied as `wrangler d1 migrations apply` applies them:
// each file once, recorded by name in the d1_migrations table, its
// statements and its record in one batch (one transaction). A restart, or a
// second runner on the same CADUCEUS_D1_DIR, applies only what is new; when
// another runner applied a file first, its batch fails and the file is
// found recorded.
const migrations = process.env.CADUCEUS_D1_MIGRATIONS || join(here, "..", "..", "edge", "migrations");
const db = await mf.getD1Database("DB");
await db.prepare(`CREATE TABLE IF NOT EXISTS d1_migrations(
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT UNIQUE,
    applied_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP NOT NULL
)`).run();
const applied = async (name) =>
  (await db.prepare("SELECT 1 FROM d1_migrations WHERE name = ?").bind(name).first()) !== null;
for (const file of readdirSync(migrations).filter((f) => f.endsWith(".sql")).sort()) {
  if (await applied(file)) continue;
  const sql = readFileSync(join(migrations, file), "utf8")
    .split("\n").filter((l) => !l.trimStart().startsWith("--")).join("\n");
  const statements = sql.split(";").map((s) => s.trim()).filter(Boolean).map((s) => db.prepare(s));
  statements.push(db.prepare("INSERT INTO d1_migrations (name) VALUES (?)").bind(file));
  try {
    await db.batch(statements);
  } catch (err) {
    if (!(await applied(file))) throw new Error(`migration ${file}: ${err.message}`);
  }
}
const url = await mf.ready;
console.log(`listening on ${url.origin}`);

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => mf.dispose().then(() => process.exit(0)));
}
