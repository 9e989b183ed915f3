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
import { startWorker } from "./start.mjs";

const port = Number(process.argv[2] ?? 8787);
const names = [
  "CADUCEUS_ADMIN_KEY", "CADUCEUS_EDGE_SECRET", "CADUCEUS_OPENAI_URL", "CADUCEUS_OPENAI_API_KEY",
  "CADUCEUS_ANTHROPIC_URL", "CADUCEUS_ANTHROPIC_API_KEY", "CADUCEUS_OFFLINE",
  "CADUCEUS_CLASSIFIER_URL", "CADUCEUS_CLASSIFIER_API_KEY",
  "CADUCEUS_EMBEDDINGS_URL", "CADUCEUS_EMBEDDINGS_MODEL", "CADUCEUS_EMBEDDINGS_API_KEY",
  "CADUCEUS_SYNC_ALLOW",
];
const bindings = Object.fromEntries(names.filter((n) => process.env[n]).map((n) => [n, process.env[n]]));

// The migrations are applied tracked, as wrangler applies them (start.mjs).
const mf = await startWorker({ bindings, port, persist: process.env.CADUCEUS_D1_DIR || false });
const url = await mf.ready;
console.log(`listening on ${url.origin}`);

for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => mf.dispose().then(() => process.exit(0)));
}
