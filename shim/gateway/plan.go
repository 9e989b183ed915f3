package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// forwarding is one request on its way along its plan's steps.
type forwarding struct {
	req   Request
	cfg   upstream.Config
	model string // the model the client asked for
	// keyLim and tenLim are the caller's key's and tenant's budgets and
	// rate limits, read once (upstream.Budgets.For).
	keyLim, tenLim upstream.Limit
	plan           upstream.Plan
	steps          []upstream.Step
	ids            []string // each step's model identity
	// groups are the balanced steps' members among steps, [from, to),
	// with each step's weight (weights: only when there are groups);
	// probes are the routes this request tries after their cool-down.
	groups  [][2]int
	weights []int
	probes  []string
	body    wire.Body // what goes upstream (include_usage added when strip)
	strip   bool      // the client did not ask for the usage chunk: strip it
	res     Result
	last    *Refusal // why the last step that tried could not answer
	sent    bool     // an attempt failed that may have run
	// open: the plan is an Open one (the ungoverned pass-through): no
	// grant, no price, no reservation, no hold, the body as it came.
	open bool
	// retried: an attempt was tried again (the plan's retries): the
	// answer, if an error, tells the SDK not to retry once more.
	retried bool
	// tokens are the input and output tokens the answered attempt
	// reported (for the rate limits' tpm).
	tokens int64
	// cacheKey is the request's key in its plan's cache ("": not cached);
	// capture bounds the answer kept.
	cacheKey string
	capture  int
	// untranslatable: the request cannot be carried to the other wire;
	// translated steps are skipped.
	untranslatable bool
}

// route finds the request's plan and steps and checks, before any upstream
// call, that the model is routed over this wire, that some step is granted,
// and that the body is one the provider would take.
func (g *Gateway) route(req Request) (*forwarding, *Refusal) {
	c := g.cfg.Upstream
	f := &forwarding{req: req, cfg: c, body: req.Body}
	f.keyLim, f.tenLim = c.Budgets.For(string(req.Caller.Identity.TenantSlot), req.Caller.KeyID)
	if req.Parsed != nil {
		f.model = req.Parsed.Model
	}
	planName, plan, ok := c.PlanFor(req.Caller.Identity.TenantSlot)
	f.res.Plan, f.plan = planName, plan
	if !ok {
		return f, &Refusal{Status: http.StatusNotFound, Code: CodeModelNotRouted, Message: "shim: no plan serves this tenant"}
	}
	if plan.Open {
		return g.routeOpen(f)
	}
	steps := plan.Steps(f.model)
	if len(steps) == 0 {
		return f, &Refusal{Status: http.StatusNotFound, Code: CodeModelNotRouted, Message: fmt.Sprintf("shim: the model %q does not exist or is not routed here", f.model)}
	}
	kept, translated := servable(c, req.Protocol, f.model, steps)
	if len(kept) == 0 {
		return f, &Refusal{Status: http.StatusBadRequest, Code: CodeWrongWire, Message: fmt.Sprintf("shim: %q is served over the %s API, not %s", f.model, c.Routes[steps[0].Members()[0].Route].Kind, req.Protocol)}
	}
	f.flatten(kept)
	if !f.grantedFrom(0) {
		return f, &Refusal{Status: http.StatusForbidden, Code: CodeNotGranted, Message: fmt.Sprintf("shim: this key is not granted %s", f.ids[0])}
	}
	if translated {
		if r := f.translation(); r != nil {
			return f, r
		}
	}
	if req.Protocol == wire.ChatCompletions && req.Parsed.Stream && !req.Parsed.IncludeUsage {
		f.body, f.strip = req.Body.WithIncludeUsage(), true
	}
	return f, nil
}

// CodeNoUpstream refuses a request whose wire the Open plan has no route
// for.
const CodeNoUpstream = "upstream_not_configured"

// routeOpen routes a request of an Open plan to its wire's route, whatever
// the model; its body goes as it came.
func (g *Gateway) routeOpen(f *forwarding) (*forwarding, *Refusal) {
	kinds := provider.Native(f.req.Protocol)
	i := slices.IndexFunc(kinds, func(k upstream.Kind) bool { _, ok := f.cfg.OpenRoute(k); return ok })
	if i < 0 {
		return f, &Refusal{Status: http.StatusServiceUnavailable, Code: CodeNoUpstream, Message: fmt.Sprintf("shim: no %s upstream is configured", kindNames(kinds))}
	}
	name, _ := f.cfg.OpenRoute(kinds[i])
	f.open, f.res.Open = true, true
	f.steps = []upstream.Step{{Route: name}}
	f.ids = []string{f.cfg.StepIdentity(f.steps[0], f.model)}
	return f, nil
}

// grantedFrom reports whether the caller is granted step i or a later one
// (any step of an Open plan).
func (f *forwarding) grantedFrom(i int) bool {
	if f.open {
		return i < len(f.ids)
	}
	for _, id := range f.ids[i:] {
		if f.req.Caller.Granted(id) {
			return true
		}
	}
	return false
}

// mayMove reports whether, after failure at step i, the plan and the
// caller's grants let a later step take over.
func (f *forwarding) mayMove(i int, failure upstream.Failure) bool {
	return upstream.MayFailOver(f.plan.Failover, failure, false, f.grantedFrom(i+1))
}

// kindNames names kinds for a refusal: "openai", or "openai or x".
func kindNames(kinds []upstream.Kind) string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	return strings.Join(names, " or ")
}
