// Package tradergate is the trader gate's module (package gate): its routes
// and MCP tools over trader.Service, which validates, applies and audits.
package tradergate

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/trader"
)

// Gate is the trader gate.
type Gate struct{ svc *trader.Service }

// New returns the trader gate over svc.
func New(svc *trader.Service) *Gate { return &Gate{svc: svc} }

var _ gate.Gate = (*Gate)(nil)

// Name implements gate.Gate.
func (g *Gate) Name() string { return "trader" }

// Jobs implements gate.Gate: the trader has none.
func (g *Gate) Jobs() []gate.Job { return nil }

// Routes implements gate.Gate: the one write entry point (seed 000),
// management and reads.
func (g *Gate) Routes() []server.Route {
	return []server.Route{
		{Pattern: "POST /v1/trader/decisions", Action: "trader.apply", Scope: contract.ScopeOperate, Handler: g.apply},
		{Pattern: "GET /v1/trader/decisions/{id}", Action: "trader.decision", Scope: contract.ScopeRoute, Handler: g.decision},
		{Pattern: "GET /v1/trader/history", Action: "trader.history", Scope: contract.ScopeRoute, Handler: g.history},
		{Pattern: "GET /v1/trader/strategies", Action: "trader.list_strategies", Scope: contract.ScopeRoute, Handler: g.listStrategies},
		{Pattern: "GET /v1/trader/strategies/{id}", Action: "trader.get_strategy", Scope: contract.ScopeRoute, Handler: g.getStrategy},
		{Pattern: "PUT /v1/trader/strategies/{id}", Action: "trader.put_strategy", Scope: contract.ScopeConfigure, Handler: g.putStrategy},
		{Pattern: "GET /v1/trader/concerns", Action: "trader.list_concerns", Scope: contract.ScopeRoute, Handler: g.listConcerns},
		{Pattern: "PUT /v1/trader/concerns/{id}", Action: "trader.put_concern", Scope: contract.ScopeConfigure, Handler: g.putConcern},
	}
}

func (g *Gate) apply(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	// Read one byte past the contract's limit so the trader can answer an
	// oversized body itself (a recorded refusal), not the transport.
	body, err := io.ReadAll(io.LimitReader(r.Body, trader.MaxRequestBytes+1))
	if err != nil {
		return err
	}
	resp, err := g.svc.Apply(r.Context(), c.Caller, body)
	if err != nil {
		return err
	}
	c.Audited = true // the trader wrote the attempt's record in its transaction
	c.Resource = "decision/" + server.Clip(resp.DecisionID, 100)
	if resp.Status != trader.Applied && resp.Status != trader.Noop {
		c.Outcome = contract.OutcomeDeny
	}
	status := http.StatusOK
	if resp.NotARequest() {
		status = http.StatusBadRequest
	}
	return server.WriteJSON(w, status, resp)
}

func (g *Gate) decision(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	id := r.PathValue("id")
	c.Resource = "decision/" + server.Clip(id, 100)
	v, err := g.svc.Decision(r.Context(), c.Caller.Identity.TenantSlot, id)
	return server.AnswerOK(w, v, err)
}

func (g *Gate) history(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	limit, err := server.QueryLimit(r, 50, 1000)
	if err != nil {
		return err
	}
	concern := r.URL.Query().Get("concern")
	c.Resource = "history/" + server.Clip(concern, 100)
	list, err := g.svc.History(r.Context(), c.Caller.Identity.TenantSlot, concern, limit)
	if err != nil {
		return err
	}
	if list == nil {
		list = []trader.Attempt{}
	}
	return server.WriteJSON(w, http.StatusOK, map[string]any{"attempts": list})
}

func (g *Gate) listStrategies(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	q := r.URL.Query()
	f := trader.StrategyFilter{ConcernID: q.Get("concern_id"), AccountID: q.Get("account_id"), MarketSymbol: q.Get("market_symbol"), Status: trader.Status(q.Get("status"))}
	c.Resource = "strategies"
	list, err := g.svc.ListStrategies(r.Context(), c.Caller.Identity.TenantSlot, f)
	return server.AnswerOK(w, trader.StrategyList{Strategies: list}, err)
}

func (g *Gate) getStrategy(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	id := r.PathValue("id")
	c.Resource = "strategy/" + server.Clip(id, 100)
	st, err := g.svc.GetStrategy(r.Context(), c.Caller.Identity.TenantSlot, id)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.FormatInt(int64(st.Revision), 10))
	return server.WriteJSON(w, http.StatusOK, st)
}

func (g *Gate) listConcerns(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	c.Resource = "concerns"
	list, err := g.svc.ListConcerns(r.Context(), c.Caller.Identity.TenantSlot)
	return server.AnswerOK(w, map[string]any{"concerns": list}, err)
}

// answerPut finishes a trader management write: whether the trader audited
// it, the error or the new revision as ETag and the record.
func answerPut(w http.ResponseWriter, c *server.Call, rev contract.Revision, out any, err error) error {
	c.Audited = traderAudited(err)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.FormatInt(int64(rev), 10))
	return server.WriteJSON(w, http.StatusOK, out)
}

func (g *Gate) putStrategy(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	c.Resource = "strategy/" + server.Clip(r.PathValue("id"), 100)
	st, rev, err := server.PutRequest(r, "id", func(st *trader.Strategy) *string { return &st.ID })
	if err != nil {
		return err
	}
	out, err := g.svc.PutStrategy(r.Context(), c.Caller, st, rev)
	return answerPut(w, c, out.Revision, out, err)
}

func (g *Gate) putConcern(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	c.Resource = "concern/" + server.Clip(r.PathValue("id"), 100)
	cn, rev, err := server.PutRequest(r, "concern_id", func(cn *trader.Concern) *string { return &cn.ConcernID })
	if err != nil {
		return err
	}
	out, err := g.svc.PutConcern(r.Context(), c.Caller, cn, rev)
	return answerPut(w, c, out.Revision, out, err)
}

// traderAudited reports whether the trader recorded a management write
// itself: it does for every outcome but a deny (caller checks) or an
// internal failure.
func traderAudited(err error) bool {
	if err == nil {
		return true
	}
	k := contract.KindOf(err)
	return k != contract.KindDeny && k != contract.KindInternal
}

var (
	listStrategiesSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"properties":{"concern_id":{"type":"string"},"account_id":{"type":"string"},"market_symbol":{"type":"string"},"status":{"type":"string","enum":["active","paused","inactive"]}}}`)
	getStrategySchema    = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["strategy_id"],"properties":{"strategy_id":{"type":"string"}}}`)
)

// Tools implements gate.Gate.
func (g *Gate) Tools() []server.Tool {
	svc := g.svc
	return []server.Tool{
		{
			Name:        "apply_control_decision",
			Description: "Apply one Hermes control decision to a trading strategy (switch, pause, resume, set_risk_mode). Validated, idempotent on decision_id (a repeat answers the first response unchanged plus replayed: true), audited; a refusal is a response with status rejected; a dry run changes nothing and answers noop with result.mode_change would_apply.",
			Scope:       contract.ScopeOperate,
			InputSchema: trader.RequestSchema(),
			Audited:     true,
			Call: func(ctx context.Context, c contract.Caller, args json.RawMessage) (any, error) {
				return svc.Apply(ctx, c, args)
			},
		},
		{
			Name:        "list_strategies",
			Description: "List the caller's strategies, optionally filtered by concern_id, account_id, market_symbol or status.",
			Scope:       contract.ScopeRoute,
			InputSchema: listStrategiesSchema,
			Call: func(ctx context.Context, c contract.Caller, args json.RawMessage) (any, error) {
				var f trader.StrategyFilter
				if err := server.DecodeStrict(args, &f); err != nil {
					return nil, err
				}
				list, err := svc.ListStrategies(ctx, c.Identity.TenantSlot, f)
				return trader.StrategyList{Strategies: list}, err
			},
		},
		{
			Name:        "get_strategy",
			Description: "Get one of the caller's strategies by strategy_id.",
			Scope:       contract.ScopeRoute,
			InputSchema: getStrategySchema,
			Call: func(ctx context.Context, c contract.Caller, args json.RawMessage) (any, error) {
				var ref trader.StrategyRef
				if err := server.DecodeStrict(args, &ref); err != nil {
					return nil, err
				}
				return svc.GetStrategy(ctx, c.Identity.TenantSlot, ref.ID)
			},
		},
	}
}
