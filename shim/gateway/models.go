package gateway

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/upstream"
)

// Model is a model a caller may ask for.
type Model struct {
	ID      string        // the name a client asks for
	OwnedBy string        // the provider of its first step the caller is granted
	Kind    upstream.Kind // the wire it is served over
	// Translated: a step the caller is granted translates, so the model
	// is served over both wires.
	Translated bool
}

// Serves reports whether clients of kind's wire may ask for the model.
func (m Model) Serves(kind upstream.Kind) bool { return m.Kind == kind || m.Translated }

// Models lists, sorted by name, the models of the caller's plan that reach
// at least one model identity the caller is granted.
func (g *Gateway) Models(c contract.Caller) []Model {
	_, plan, ok := g.cfg.Upstream.PlanFor(c.Identity.TenantSlot)
	if !ok {
		return nil
	}
	var out []Model
	for _, name := range slices.Sorted(maps.Keys(plan.Models)) {
		if strings.HasSuffix(name, "*") {
			continue // a pattern is no model a client can name as it stands
		}
		steps := plan.Models[name]
		var model *Model
		for _, st := range steps {
			for _, m := range st.Members() {
				id := g.cfg.Upstream.MemberIdentity(m, name)
				if !c.Granted(id) {
					continue
				}
				if model == nil {
					provider, _, _ := strings.Cut(id, "/")
					model = &Model{ID: name, OwnedBy: provider, Kind: g.cfg.Upstream.Routes[steps[0].Members()[0].Route].Kind}
				}
				model.Translated = model.Translated || st.Translate
			}
		}
		if model != nil {
			out = append(out, *model)
		}
	}
	return out
}

// CountTokensPath is Anthropic's token counting endpoint.
const CountTokensPath = "/v1/messages/count_tokens"

// CountTokens forwards an Anthropic count_tokens request to the first route
// of the caller's plan for its model that the caller is granted and that is
// not held, and writes the answer as it came. Counting costs nothing, so
// nothing is reserved. A Refusal is returned (nothing written) when no such
// route exists or it cannot be reached.
func (g *Gateway) CountTokens(ctx context.Context, w Writer, req Request) Result {
	return g.count(ctx, w, req, CountTokensPath, upstream.KindAnthropic)
}

// InputTokensPath is the Responses API's input token counting endpoint.
const InputTokensPath = "/v1/responses/input_tokens"

// InputTokens forwards a Responses API input_tokens request as CountTokens
// forwards Anthropic's: to the first route of the caller's plan for its
// model that the caller is granted and that is not held, nothing reserved.
func (g *Gateway) InputTokens(ctx context.Context, w Writer, req Request) Result {
	return g.count(ctx, w, req, InputTokensPath, upstream.KindOpenAI)
}

// count forwards a token count to path on a route of kind.
func (g *Gateway) count(ctx context.Context, w Writer, req Request, path string, kind upstream.Kind) Result {
	c := g.cfg.Upstream
	model := req.Body.Model()
	planName, plan, ok := c.PlanFor(req.Caller.Identity.TenantSlot)
	res := Result{Plan: planName}
	steps := plan.Steps(model)
	if !ok || len(steps) == 0 {
		return refused(res, http.StatusNotFound, CodeModelNotRouted, fmt.Sprintf("shim: the model %q does not exist or is not routed here", model), false)
	}
	// Counting costs nothing: a balanced step's members are tried in
	// their order. A count is never translated: only the steps of its
	// own wire count.
	var members []upstream.Member
	for _, st := range steps {
		if c.Routes[st.Members()[0].Route].Kind == kind {
			members = append(members, st.Members()...)
		}
	}
	if len(members) == 0 {
		return refused(res, http.StatusBadRequest, CodeWrongWire, fmt.Sprintf("shim: %q is not served over the %s API", model, kind), false)
	}
	authFailed := false
	for _, st := range members {
		id := c.MemberIdentity(st, model)
		if !req.Caller.Granted(id) {
			continue
		}
		if until, err := g.cfg.Holds.HeldUntil(ctx, id); err != nil || !until.IsZero() {
			continue
		}
		body := req.Body
		if st.Model != "" && st.Model != model {
			body = body.WithModel(st.Model)
		}
		resp, _, err := g.send(ctx, req, st.Route, path, cmp.Or(st.Model, model), body.Raw, g.cfg.HeaderTimeout)
		if err != nil {
			continue
		}
		b, err := readAll(resp.Body, 1<<20)
		resp.Body.Close()
		if err != nil {
			continue
		}
		if authRefused(resp.StatusCode) {
			g.refusedCredential(st.Route, id, resp.StatusCode, b)
			authFailed = true
			continue
		}
		g.setHealth(st.Route, routeHealthy)
		res.Attempts = append(res.Attempts, Attempt{Route: st.Route, Model: id, Outcome: "answered", Status: resp.StatusCode})
		res.Route, res.Status = st.Route, resp.StatusCode
		g.passOn(w, outcome{status: resp.StatusCode, errAnswer: b, errHeader: resp.Header})
		return res
	}
	if !slices.ContainsFunc(members, func(m upstream.Member) bool { return req.Caller.Granted(c.MemberIdentity(m, model)) }) {
		return refused(res, http.StatusForbidden, CodeNotGranted, fmt.Sprintf("shim: this key is not granted %s", c.MemberIdentity(members[0], model)), false)
	}
	if authFailed {
		return refused(res, http.StatusBadGateway, CodeUpstreamAuth, "shim: the upstream refused this route's credential; the operator must fix the route", false)
	}
	return refused(res, http.StatusBadGateway, CodeUpstreamFailed, "shim: no route of the plan could count the tokens", true)
}

// Pass forwards req as it is (its Method, its Body, which may be nil) to
// path on route, which served an earlier answer of the caller's as model
// identity id (a Responses API answer retrieved or cancelled by its id),
// and writes the upstream's answer as it came. The caller must still be
// granted id. Nothing is reserved: retrieving is not generating. A
// Refusal is returned (nothing written) when the grant is gone, the route
// is no longer configured, or it cannot be reached.
func (g *Gateway) Pass(ctx context.Context, w Writer, req Request, route, id, path string) Result {
	res := Result{}
	if !req.Caller.Granted(id) {
		return refused(res, http.StatusForbidden, CodeNotGranted, fmt.Sprintf("shim: this key is not granted %s", id), false)
	}
	if _, ok := g.cfg.Upstream.Routes[route]; !ok {
		return refused(res, http.StatusNotFound, CodeModelNotRouted, fmt.Sprintf("shim: the route %q that served this answer is no longer configured", route), false)
	}
	resp, _, err := g.send(ctx, req, route, path, "", req.Body.Raw, g.cfg.HeaderTimeout)
	if err != nil {
		return refused(res, http.StatusBadGateway, CodeUpstreamFailed, "shim: the upstream could not be reached", true)
	}
	defer resp.Body.Close()
	b, err := readAll(resp.Body, g.cfg.MaxAnswer)
	if err != nil {
		return refused(res, http.StatusBadGateway, CodeUpstreamFailed, "shim: the upstream's answer broke off", true)
	}
	if authRefused(resp.StatusCode) {
		g.refusedCredential(route, id, resp.StatusCode, b)
		return refused(res, http.StatusBadGateway, CodeUpstreamAuth, "shim: the upstream refused this route's credential; the operator must fix the route", false)
	}
	res.Attempts = append(res.Attempts, Attempt{Route: route, Model: id, Outcome: "answered", Status: resp.StatusCode})
	res.Route, res.Status = route, resp.StatusCode
	g.passOn(w, outcome{status: resp.StatusCode, errAnswer: b, errHeader: resp.Header})
	return res
}

// ModelsPath is the models endpoint both providers serve.
const ModelsPath = "/v1/models"
