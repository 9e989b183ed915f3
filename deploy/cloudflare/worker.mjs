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

function start(env) {
  globalThis.caduceusEnv = env;
  const go = new globalThis.Go();
  return WebAssembly.instantiate(program, go.importObject).then((instance) => {
    go.run(instance); // main registers caduceusServe, then waits for requests
    if (typeof globalThis.caduceusServe !== "function") {
      throw new Error("caduceus.wasm did not start");
    }
  });
}

export default {
  async fetch(request, env, ctx) {
    started ??= start(env);
    await started;
    return globalThis.caduceusServe(request, ctx);
  },
};
