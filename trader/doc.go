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
// commands and the SQL Store are thin layers over Service:
//
//	apply_control_decision (MCP, operate)  Service.Apply(ctx, caller, args)
//	list_strategies (MCP, route)           StrategyList{Service.ListStrategies(ctx, tenant, StrategyFilter)}
//	get_strategy (MCP, route)              Service.GetStrategy(ctx, tenant, StrategyRef.ID)
//	POST /v1/trader/decisions              Service.Apply; 200 for every status,
//	                                       400 when Response.NotARequest()
//	GET  /v1/trader/decisions/{id}         Service.Decision(ctx, tenant, id)
//	PUT  /v1/trader/strategies/{id}        Service.PutStrategy(ctx, caller, s, If-Match)
//	PUT  /v1/trader/concerns/{id}          Service.PutConcern(ctx, caller, c, If-Match)
//	caduceus trader import FILE            Service.Import(ctx, caller, data, FormatOf(FILE))
//	caduceus trader apply --payload FILE   Service.Apply
//	caduceus trader history [--concern C]  Service.History(ctx, tenant, C, limit)
//
// The Service audits its own writes — every Apply attempt (trader.apply) and
// every PutStrategy, PutConcern and Import, allowed or refused — inside the
// write's transaction (refusals and failures in one of their own). Reads are
// not audited here.
package trader

// Version is the control decision contract version this package speaks.
//
// History:
//   - 0.1 (2026-11-29): seed 000 v0.1 — switch, pause, resume, set_risk_mode;
//     keep refused; the six-key validation map; statuses applied, rejected,
//     noop, failed; dry_run, override, idempotency on decision_id.
const Version = "0.1"
