// Package trader is the Hermes → Trader control gate of seed 000: one write
// entry point, apply_control_decision, that validates a control decision
// against the strategies and concerns of a tenant, applies it when it is
// safe, reconciles the affected strategy runtime and answers a structured
// response. Refusing is a normal, recorded outcome (status rejected), never a
// Go error.
//
// The package holds the types, the rules and the ports it needs: a Store
// (one transaction per decision; see tradertest for its conformance suite and
// an in-memory implementation) and a Runtime. The MCP tools, HTTP routes, CLI
// commands and the SQL Store are thin layers over Service.
package trader

// Version is the control decision contract version this package speaks.
//
// History:
//   - 0.1 (2026-11-29): seed 000 v0.1 — switch, pause, resume, set_risk_mode;
//     keep refused; the six-key validation map; statuses applied, rejected,
//     noop, failed; dry_run, override, idempotency on decision_id.
const Version = "0.1"
