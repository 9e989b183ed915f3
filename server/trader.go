package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trader"
)

// The trader gate's HTTP handlers and MCP tools: thin layers over
// trader.Service, which validates, applies and audits.

func (s *Server) traderApply(w http.ResponseWriter, r *http.Request, c *Call) error {
	// Read one byte past the contract's limit so the trader can answer an
	// oversized body itself (a recorded refusal), not the transport.
	body, err := io.ReadAll(io.LimitReader(r.Body, trader.MaxRequestBytes+1))
	if err != nil {
		return err
	}
	resp, err := s.cfg.Trader.Apply(r.Context(), c.Caller, body)
	if err != nil {
		return err
	}
	c.Audited = true // the trader wrote the attempt's record in its transaction
	c.Resource = "decision/" + clip(resp.DecisionID, 100)
	if resp.Status != trader.Applied && resp.Status != trader.Noop {
		c.Outcome = contract.OutcomeDeny
	}
	status := http.StatusOK
	if resp.NotARequest() {
		status = http.StatusBadRequest
	}
	return WriteJSON(w, status, resp)
}

func (s *Server) traderDecision(w http.ResponseWriter, r *http.Request, c *Call) error {
	id := r.PathValue("id")
	c.Resource = "decision/" + clip(id, 100)
	v, err := s.cfg.Trader.Decision(r.Context(), c.Caller.Identity.TenantSlot, id)
	return answerOK(w, v, err)
}

func (s *Server) traderHistory(w http.ResponseWriter, r *http.Request, c *Call) error {
	limit, err := queryLimit(r, 50, 1000)
	if err != nil {
		return err
	}
	concern := r.URL.Query().Get("concern")
	c.Resource = "history/" + clip(concern, 100)
	list, err := s.cfg.Trader.History(r.Context(), c.Caller.Identity.TenantSlot, concern, limit)
	if err != nil {
		return err
	}
	if list == nil {
		list = []trader.Attempt{}
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"attempts": list})
}

func (s *Server) traderListStrategies(w http.ResponseWriter, r *http.Request, c *Call) error {
	q := r.URL.Query()
	f := trader.StrategyFilter{ConcernID: q.Get("concern_id"), AccountID: q.Get("account_id"), MarketSymbol: q.Get("market_symbol"), Status: trader.Status(q.Get("status"))}
	c.Resource = "strategies"
	list, err := s.cfg.Trader.ListStrategies(r.Context(), c.Caller.Identity.TenantSlot, f)
	return answerOK(w, trader.StrategyList{Strategies: list}, err)
}

func (s *Server) traderGetStrategy(w http.ResponseWriter, r *http.Request, c *Call) error {
	id := r.PathValue("id")
	c.Resource = "strategy/" + clip(id, 100)
	st, err := s.cfg.Trader.GetStrategy(r.Context(), c.Caller.Identity.TenantSlot, id)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.FormatInt(int64(st.Revision), 10))
	return WriteJSON(w, http.StatusOK, st)
}

func (s *Server) traderListConcerns(w http.ResponseWriter, r *http.Request, c *Call) error {
	c.Resource = "concerns"
	list, err := s.cfg.Trader.ListConcerns(r.Context(), c.Caller.Identity.TenantSlot)
	return answerOK(w, map[string]any{"concerns": list}, err)
}

// ifMatch reads If-Match as a revision; absent means 0 ("create only").
func ifMatch(r *http.Request) (contract.Revision, error) {
	v := strings.Trim(strings.TrimSpace(r.Header.Get("If-Match")), `"`)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, contract.FieldError("If-Match", "bad_if_match", "If-Match must be a revision number >= 1, got %q", v)
	}
	return contract.Revision(n), nil
}

func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return contract.Invalidf("bad_json", "the body is not valid: %v", err)
	}
	if dec.More() {
		return contract.Invalidf("bad_json", "the body has data after the JSON value")
	}
	return nil
}

// putRequest reads a revisioned PUT: the If-Match revision and the strict
// JSON body; idOf points at the body's id field, which must be empty (it is
// filled from the path) or equal to the path's id.
func putRequest[T any](r *http.Request, idField string, idOf func(*T) *string) (T, contract.Revision, error) {
	var v T
	rev, err := ifMatch(r)
	if err != nil {
		return v, 0, err
	}
	body, err := readBody(r)
	if err != nil {
		return v, 0, err
	}
	if err := decodeStrict(body, &v); err != nil {
		return v, 0, err
	}
	id, pathID := idOf(&v), r.PathValue("id")
	if *id == "" {
		*id = pathID
	}
	if *id != pathID {
		return v, 0, contract.FieldError(idField, "id_mismatch", "the body's %s %q is not the path's %q", idField, *id, pathID)
	}
	return v, rev, nil
}

// answerOK writes v as the call's 200 JSON answer, or returns err when the
// call that made v failed.
func answerOK(w http.ResponseWriter, v any, err error) error {
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, v)
}

// answerPut finishes a trader management write: whether the trader audited
// it, the error or the new revision as ETag and the record.
func answerPut(w http.ResponseWriter, c *Call, rev contract.Revision, out any, err error) error {
	c.Audited = traderAudited(err)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", strconv.FormatInt(int64(rev), 10))
	return WriteJSON(w, http.StatusOK, out)
}

func (s *Server) traderPutStrategy(w http.ResponseWriter, r *http.Request, c *Call) error {
	c.Resource = "strategy/" + clip(r.PathValue("id"), 100)
	st, rev, err := putRequest(r, "id", func(st *trader.Strategy) *string { return &st.ID })
	if err != nil {
		return err
	}
	out, err := s.cfg.Trader.PutStrategy(r.Context(), c.Caller, st, rev)
	return answerPut(w, c, out.Revision, out, err)
}

func (s *Server) traderPutConcern(w http.ResponseWriter, r *http.Request, c *Call) error {
	c.Resource = "concern/" + clip(r.PathValue("id"), 100)
	cn, rev, err := putRequest(r, "concern_id", func(cn *trader.Concern) *string { return &cn.ConcernID })
	if err != nil {
		return err
	}
	out, err := s.cfg.Trader.PutConcern(r.Context(), c.Caller, cn, rev)
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

func (s *Server) traderTools() []Tool {
	svc := s.cfg.Trader
	return []Tool{
		{
			Name:        "apply_control_decision",
			Description: "Apply one Hermes control decision to a trading strategy (switch, pause, resume, set_risk_mode). Validated, idempotent on decision_id, audited; a refusal is a response with status rejected.",
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
				if err := decodeStrict(args, &f); err != nil {
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
				if err := decodeStrict(args, &ref); err != nil {
					return nil, err
				}
				return svc.GetStrategy(ctx, c.Identity.TenantSlot, ref.ID)
			},
		},
	}
}
