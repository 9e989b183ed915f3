package gateway

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
)

// A balanced step (upstream.Step.Balance) is a group of routes serving one
// model, each its own model identity. Per request the gateway orders the
// group's members, and the plan's steps run along that order as if each
// member were a step of its own — its grant, hold, reservation, retries
// and failover as any step's:
//
//  1. members the caller is not granted are left out (all of them: the
//     group stays as configured, each refused as not granted);
//  2. a member past its cool-down whose trial no other request of this
//     process is making comes first: this request tries it (half-open);
//  3. then one member picked at random by weight among the healthy ones
//     (the unhealthy ones when none is healthy), then the other healthy
//     ones, heaviest first, then the unhealthy ones, then the held ones
//     (which the step skips as held).
//
// A route is unhealthy after Config.Upstream.RouteHealth's failures in a
// row (a refused connection, a 5xx before any byte, no headers in time,
// its credential refused, with route_health.latency an answer whose
// headers took longer) on any process sharing the store, for its
// cool-down; any other answer ends the run.

// flatten makes f's steps of the plan's: each balanced step's members,
// in their configured order, as steps of their own (f.groups says where).
func (f *forwarding) flatten(steps []upstream.Step) {
	if !slices.ContainsFunc(steps, upstream.Step.Balanced) {
		f.steps = steps
		f.ids = make([]string, len(steps))
		for i, st := range steps {
			f.ids[i] = f.cfg.StepIdentity(st, f.model)
		}
		return
	}
	for _, st := range steps {
		from := len(f.steps)
		for _, m := range st.Members() {
			f.steps = append(f.steps, upstream.Step{Route: m.Route, Model: m.Model, Translate: st.Translate})
			f.ids = append(f.ids, f.cfg.MemberIdentity(m, f.model))
			f.weights = append(f.weights, m.W())
		}
		if st.Balanced() {
			f.groups = append(f.groups, [2]int{from, len(f.steps)})
		}
	}
}

// Ranks of a balanced step's members, in the order they are tried.
const (
	rankProbe = iota
	rankHealthy
	rankUnhealthy
	rankHeld
)

// choose orders the members of each of f's balanced steps for this
// request (see above).
func (g *Gateway) choose(ctx context.Context, f *forwarding) {
	now := g.cfg.Now()
	steps, ids := make([]upstream.Step, 0, len(f.steps)), make([]string, 0, len(f.ids))
	at := 0
	for _, gr := range f.groups {
		steps, ids = append(steps, f.steps[at:gr[0]]...), append(ids, f.ids[at:gr[0]]...)
		for _, k := range g.order(ctx, f, gr[0], gr[1], now) {
			steps, ids = append(steps, f.steps[k]), append(ids, f.ids[k])
		}
		at = gr[1]
	}
	f.steps, f.ids = append(steps, f.steps[at:]...), append(ids, f.ids[at:]...)
}

// order is the order in which this request tries the members from..to-1
// of f's steps (their indexes).
func (g *Gateway) order(ctx context.Context, f *forwarding, from, to int, now time.Time) []int {
	type member struct{ k, w, rank int }
	ms := make([]member, 0, to-from)
	probe := false
	for k := from; k < to; k++ {
		if !f.req.Caller.Granted(f.ids[k]) {
			continue
		}
		m := member{k: k, w: f.weights[k], rank: rankHealthy}
		route := f.steps[k].Route
		if until, err := g.cfg.Holds.HeldUntil(ctx, f.ids[k]); err == nil && !until.IsZero() {
			m.rank = rankHeld // (an error is the step's to report)
		} else if until, err := g.rh.UnhealthyUntil(ctx, route); err != nil {
			g.cfg.Logger.Warn("gateway: route health not read; taken for healthy", "route", route, "err", err)
		} else if !until.IsZero() {
			m.rank = rankUnhealthy
			if until.After(now) {
				g.setHealth(route, routeUnhealthy) // found so by another process
			}
			if !until.After(now) && !probe && g.probing[route].CompareAndSwap(false, true) {
				m.rank, probe = rankProbe, true
				f.probes = append(f.probes, route)
			}
		}
		ms = append(ms, m)
	}
	out := make([]int, 0, to-from)
	if len(ms) == 0 {
		for k := from; k < to; k++ {
			out = append(out, k)
		}
		return out
	}
	slices.SortStableFunc(ms, func(a, b member) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(b.w, a.w))
	})
	// The first member after a probe is picked by weight among its rank.
	p := 0
	if ms[0].rank == rankProbe {
		p = 1
	}
	if p < len(ms) {
		end, total := p, 0
		for end < len(ms) && ms[end].rank == ms[p].rank {
			total += ms[end].w
			end++
		}
		r := g.pick(total)
		for j := p; j < end; j++ {
			if r -= ms[j].w; r < 0 {
				chosen := ms[j]
				copy(ms[p+1:j+1], ms[p:j])
				ms[p] = chosen
				break
			}
		}
	}
	for _, m := range ms {
		out = append(out, m.k)
	}
	return out
}

// pick is a random number in [0, n).
func (g *Gateway) pick(n int) int {
	if g.rnd == nil {
		return rand.IntN(n)
	}
	g.randMu.Lock()
	defer g.randMu.Unlock()
	return g.rnd.IntN(n)
}

// endProbes lets the next request try the routes f tried after their
// cool-down, if their outcome did not settle their health.
func (g *Gateway) endProbes(f *forwarding) {
	for _, r := range f.probes {
		g.probing[r].Store(false)
	}
}

// routeFailed reports whether out counts against its route's health: a
// refused connection or a 5xx before any byte (not a 429: that holds the
// model identity), no headers in time or an answer broken off before the
// client got any of it, the route's credential refused.
func routeFailed(out outcome) bool {
	switch out.outcome {
	case "definite", "uncertain", "auth_failed":
		return true
	}
	return false
}

// observe makes an attempt's outcome on a member of a balanced step its
// route's health: an answer (of any status) ends the route's run of
// failures, unless its headers took longer than route_health.latency; a
// failure (or such a slow answer) adds to it, unless the route is already
// unhealthy (it was tried as the last resort). A run that makes the route
// unhealthy sets caduceus_shim_route_healthy to 0 (OnRouteHealth) until
// its next answer.
func (g *Gateway) observe(ctx context.Context, route string, out outcome) {
	if !g.balanced[route] {
		return
	}
	ctx = context.WithoutCancel(ctx)
	slow := g.slow > 0 && out.waited > g.slow
	var err error
	switch {
	case out.outcome == "answered" && !slow:
		err = g.rh.RouteAnswered(ctx, route)
	case routeFailed(out) || slow:
		now := g.cfg.Now()
		until, rerr := g.rh.UnhealthyUntil(ctx, route)
		if rerr == nil && until.After(now) {
			g.setHealth(route, routeUnhealthy)
			return
		}
		err = g.rh.RouteFailed(ctx, route, g.threshold, now.Add(g.cooldown))
		if until, rerr := g.rh.UnhealthyUntil(ctx, route); err == nil && rerr == nil && until.After(now) {
			g.setHealth(route, routeUnhealthy)
		}
	}
	if err != nil {
		g.cfg.Logger.Warn("gateway: route health not recorded", "route", route, "err", err)
	}
}

// memHealth is upstream.RouteHealth in one process's memory, for a
// gateway whose Holds keep no health.
type memHealth struct {
	mu   sync.Mutex
	runs map[string]*healthRun
}

type healthRun struct {
	failures int
	until    time.Time
}

func (h *memHealth) RouteFailed(_ context.Context, route string, threshold int, until time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.runs[route]
	if r == nil {
		r = &healthRun{}
		h.runs[route] = r
	}
	if r.failures++; r.failures >= threshold {
		r.until = until
	}
	return nil
}

func (h *memHealth) RouteAnswered(_ context.Context, route string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.runs, route)
	return nil
}

func (h *memHealth) UnhealthyUntil(_ context.Context, route string) (time.Time, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r := h.runs[route]; r != nil {
		return r.until, nil
	}
	return time.Time{}, nil
}
