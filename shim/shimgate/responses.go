package shimgate

import (
	"net/http"
	"net/url"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// The Responses API's calls on an answer already made: retrieve it, cancel
// it (a background response), and count a request's input tokens. They
// reach the route that served the answer (its receipt names it), with the
// caller's grant for the model identity it served still required; nothing
// is reserved. Served with gateway routes only.

// responseRoutes are the Responses API routes after POST /v1/responses.
func (g *Gate) responseRoutes() []server.Route {
	env := envelope(wire.Responses)
	return []server.Route{
		{Pattern: "GET /v1/responses/{id}", Action: "shim.response", Scope: contract.ScopeRoute, Envelope: env, Handler: g.response},
		{Pattern: "POST /v1/responses/{id}/cancel", Action: "shim.response_cancel", Scope: contract.ScopeRoute, Envelope: env, Handler: g.response},
		{Pattern: "POST /v1/responses/input_tokens", Action: "shim.input_tokens", Scope: contract.ScopeRoute, Envelope: env, Handler: g.inputTokens},
	}
}

// response forwards GET /v1/responses/{id} and POST .../cancel to the
// route that served the answer id for this caller: not_found when the
// caller's tenant (under key isolation, its key) has no such answer.
func (g *Gate) response(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	id := r.PathValue("id")
	c.Resource = "responses/" + server.Clip(id, 100)
	rc, err := g.cfg.Service.ResponseOf(r.Context(), c.Caller, id)
	if err != nil {
		return err
	}
	route, model := servedBy(rc)
	if route == "" {
		return contract.NotFoundf(shim.CodeNotFound, "shim: no response %q", id)
	}
	path := "/v1/responses/" + url.PathEscape(id)
	var body wire.Body
	if r.Method == http.MethodPost {
		path += "/cancel"
		body = wire.Body{Raw: []byte("{}")}
	}
	res := g.cfg.Gateway.Pass(r.Context(), gateway.Writer{ResponseWriter: w}, gateway.Request{Protocol: wire.Responses, Caller: c.Caller,
		Body: body, Header: r.Header, RawQuery: r.URL.RawQuery, Method: r.Method}, route, model, path)
	return answered(w, wire.Responses, c, res)
}

// servedBy is the route and model identity of the attempt that answered
// the receipt's request.
func servedBy(rc shim.Receipt) (route, model string) {
	if rc.Spend == nil {
		return "", ""
	}
	for i := len(rc.Spend.Attempts) - 1; i >= 0; i-- {
		if a := rc.Spend.Attempts[i]; a.Outcome == "answered" || a.Outcome == "broken" || a.Outcome == "canceled" {
			return a.Route, a.Model
		}
	}
	return "", ""
}

// inputTokens forwards POST /v1/responses/input_tokens to a route of the
// caller's plan for its model, as count_tokens does for Anthropic's.
func (g *Gate) inputTokens(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	body, err := countBody(r)
	if err != nil {
		return err
	}
	res := g.cfg.Gateway.InputTokens(r.Context(), gateway.Writer{ResponseWriter: w}, gateway.Request{Protocol: wire.Responses,
		Caller: c.Caller, Body: body, Header: r.Header, RawQuery: r.URL.RawQuery})
	return answered(w, wire.Responses, c, res)
}

// countBody is the body of a token count request: a JSON object, and not
// for a contributor-tier model.
func countBody(r *http.Request) (wire.Body, error) {
	raw, err := server.ReadBody(r)
	if err != nil {
		return wire.Body{}, err
	}
	if err := contract.CheckJSON(raw); err != nil {
		return wire.Body{}, err
	}
	body, err := wire.BodyOf(raw)
	if err != nil {
		return wire.Body{}, contract.Invalidf("invalid_request", "%s", err.Error())
	}
	if shim.IsContributorModel(body.Model()) {
		return wire.Body{}, contract.Denyf(shim.CodeContributorRefused, "contributor-tier models are refused")
	}
	return body, nil
}

// answered finishes a call the gateway passed on: its refusal written in
// p's envelope (the gateway's refusals carry their own status), or the
// outcome of the upstream's answer recorded.
func answered(w http.ResponseWriter, p wire.Protocol, c *server.Call, res gateway.Result) error {
	if f := res.Refusal; f != nil {
		if !f.Retry {
			w.Header().Set("X-Should-Retry", "false")
		}
		w.Header().Set(wire.RequestIDHeader(p), contract.NewID("req"))
		wire.WriteError(w, p, f.Status, f.Code, f.Message)
		c.Outcome, c.Reason = server.OutcomeOfStatus(f.Status), f.Code
		return nil
	}
	c.Outcome = server.OutcomeOfStatus(res.Status)
	return nil
}
