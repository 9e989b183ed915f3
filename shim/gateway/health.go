package gateway

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
)

// holdFor is how long a 429 holds identity: the upstream's Retry-After, or
// without one a backoff growing with each consecutive 429 (upstream.Backoff).
func (g *Gateway) holdFor(identity, retryAfter string, now time.Time) time.Duration {
	if d, ok := upstream.ParseRetryAfter(retryAfter, now); ok {
		return d
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	n := g.streaks[identity] + 1
	if n == 1 {
		g.busy.Add(1)
	}
	g.streaks[identity] = n
	return upstream.Backoff(n, g.cfg.MaxHold)
}

// answeredBy ends identity's streak of 429s.
func (g *Gateway) answeredBy(identity string) {
	if g.busy.Load() == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if _, ok := g.streaks[identity]; ok {
		delete(g.streaks, identity)
		g.busy.Add(-1)
	}
}

// Route health states.
const (
	routeHealthy   = 1
	routeAuthFails = 2
	routeUnhealthy = 3 // a balanced step's member in its cool-down
)

// setHealth records a route's health and tells OnRouteHealth of a change.
func (g *Gateway) setHealth(route string, state int32) {
	h := g.health[route]
	if h == nil || h.Load() == state || h.Swap(state) == state {
		return
	}
	if g.cfg.OnRouteHealth != nil {
		g.cfg.OnRouteHealth(route, state == routeHealthy)
	}
}

// authRefused reports whether status is the upstream refusing the route's
// credential: a caller's own credential never goes upstream, so a 401 or
// 403 is always about the route's.
func authRefused(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusForbidden
}

// refusedCredential logs, for the operator, the upstream's answer to a
// route whose credential it refused (never sent to the client), and marks
// the route unhealthy.
func (g *Gateway) refusedCredential(route, id string, status int, body []byte) {
	if len(body) > 2048 {
		body = body[:2048]
	}
	g.cfg.Logger.Error("gateway: the upstream refused the route's credential; fix the route's key", "route", route, "model", id,
		"status", status, "upstream_answer", string(body))
	g.setHealth(route, routeAuthFails)
}

// RouteCheck is what CheckRoutes found of one route.
type RouteCheck struct {
	Route  string
	Status int   // the upstream's status (0: not reached)
	Err    error // the call's failure, when it was not reached
	// Refused: the upstream refused the route's credential (401, 403);
	// the route is marked unhealthy.
	Refused bool
}

// CheckRoutes asks every route's upstream for its models with the route's
// credential, as a startup check: a route whose credential is refused
// (401, 403) is logged for the operator and marked unhealthy
// (OnRouteHealth) before any client meets it; any other answer marks it
// healthy. An unreachable route is reported, not marked. Nothing is
// reserved or charged: listing models costs nothing.
func (g *Gateway) CheckRoutes(ctx context.Context) []RouteCheck {
	var out []RouteCheck
	for _, name := range slices.Sorted(maps.Keys(g.cfg.Upstream.Routes)) {
		rc := RouteCheck{Route: name}
		resp, _, err := g.send(ctx, Request{Method: http.MethodGet, Header: http.Header{}}, name, ModelsPath, "", nil, 10*time.Second)
		if err != nil {
			rc.Err = err
			out = append(out, rc)
			continue
		}
		b, _ := readAll(resp.Body, 1<<16)
		resp.Body.Close()
		rc.Status = resp.StatusCode
		if authRefused(resp.StatusCode) {
			rc.Refused = true
			g.refusedCredential(name, "", resp.StatusCode, b)
		} else {
			g.setHealth(name, routeHealthy)
		}
		out = append(out, rc)
	}
	return out
}
