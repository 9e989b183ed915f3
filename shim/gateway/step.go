package gateway

import (
	"context"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// What a deferred reservation is closed with.
const (
	CloseSettle  = "settle"
	CloseRelease = "release"
)

type stepVerdict int

const (
	stepNext stepVerdict = iota // try the next step
	stepDone                    // f.res is the answer (or its refusal)
	stepStop                    // no step may follow: f.last is the answer
)

// step tries step i: grant, hold, reservation, the call, and what follows
// its failure.
func (f *forwarding) step(ctx context.Context, g *Gateway, w Writer, i int) stepVerdict {
	st, id := f.steps[i], f.ids[i]
	now := g.cfg.Now()
	var x *leg
	if f.translated(i) && f.untranslatable {
		return stepNext // the request cannot be carried to this step's wire
	}
	var price upstream.Price
	var amount upstream.Microdollars
	ubody, strip := f.body, f.strip
	if !f.open {
		if !f.req.Caller.Granted(id) {
			f.res.Attempts = append(f.res.Attempts, Attempt{Route: st.Route, Model: id, Outcome: "not_granted"})
			return stepNext
		}
		if v, held := f.held(ctx, g, i, Attempt{Route: st.Route, Model: id}, now); held {
			return v
		}
		price, _ = f.cfg.PriceOf(id)
		if f.translated(i) {
			var ok bool
			if ubody, x, ok = f.translatedBody(i, price, now.Unix()); !ok {
				return stepNext
			}
			strip = false
		}
		amount = price.MaxCost(int64(len(ubody.Raw)), f.req.Parsed.MaxOut)
		if f.req.Protocol == wire.Embeddings {
			amount = price.Cost(upstream.Usage{Input: int64(len(f.body.Raw))}) // an embedding has no output
		}
	}
	if x == nil && st.Model != "" && st.Model != f.model {
		ubody = f.body.WithModel(st.Model)
	}
	// The answer may start streaming to the client at once only when no
	// further step could take over; the wait for its headers is bounded by
	// attempt_timeout only when a further step could take over then.
	canMove := f.mayMove(i, upstream.Uncertain) || f.mayMove(i, upstream.Definite)
	wait := g.timeouts[st.Route]
	if f.mayMove(i, upstream.Uncertain) && (wait == 0 || g.cfg.HeaderTimeout < wait) {
		wait = g.cfg.HeaderTimeout
	}
	backoff, _ := f.plan.Backoff() // checked by Validate
	for try := 0; ; try++ {
		att := Attempt{Route: st.Route, Model: id}
		if x != nil {
			att.Wire = x.up
			x.renew() // each try translates its own stream
		}
		if !f.open {
			if v, ok := f.reserve(ctx, g, i, &att, amount); !ok {
				return v
			}
		}
		out := g.attempt(ctx, w, call{req: f.req, route: st.Route, id: id, model: f.asked(i), price: price, body: ubody.Raw, wait: wait,
			holdFirst: f.req.Parsed.Stream && canMove, strip: strip, capture: f.capture, x: x})
		g.observe(ctx, st.Route, out)
		f.sent = f.sent || out.failure == upstream.Uncertain
		att.Outcome, att.Status = out.outcome, out.status
		if !f.open {
			f.close(ctx, g, &att, out, int64(amount))
		}
		f.res.Attempts = append(f.res.Attempts, att)
		// A definite failure of the moment (refused, 502, 503, 504 before
		// any byte) is tried again on this step, as the plan allows.
		if try < f.plan.Retries && upstream.Retryable(out.failure, out.status) && ctx.Err() == nil {
			f.retried = true
			if !sleep(ctx, jitter(backoff<<try)) {
				return f.after(ctx, g, w, i, out, now)
			}
			continue
		}
		return f.after(ctx, g, w, i, out, now)
	}
}

// jitter is d scaled by a random factor in [0.5, 1.5), so clients that
// failed together do not retry together.
func jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(rand.Int64N(int64(d)+1))
}

// sleep waits d or until ctx ends; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// after decides what follows an attempt: its answer, the client gone, a
// hold on a 429, the next step, or the upstream's own error passed on.
func (f *forwarding) after(ctx context.Context, g *Gateway, w Writer, i int, out outcome, now time.Time) stepVerdict {
	st, id := f.steps[i], f.ids[i]
	if out.answered {
		g.answeredBy(id)
		f.res.Route, f.res.Status, f.res.Final, f.res.Broken = st.Route, out.status, out.final, out.broken
		f.res.ResponseID = out.responseID
		f.tokens = out.tokens
		if f.translated(i) {
			f.res.UpstreamWire = f.res.Attempts[len(f.res.Attempts)-1].Wire
		}
		if f.cacheKey != "" && out.captured != nil && out.status >= 200 && out.status < 300 {
			g.keep(ctx, f, out)
		}
		return stepDone
	}
	if out.outcome == "canceled" {
		f.res.Refusal = &Refusal{Status: 499, Code: "canceled", Message: "shim: the client went away"}
		return stepDone
	}
	if out.failure == upstream.Definite && out.status == http.StatusTooManyRequests && !f.open {
		hold := g.holdFor(id, out.retryAfter, now)
		if err := g.cfg.Holds.Hold(context.WithoutCancel(ctx), id, g.cfg.Now().Add(hold)); err != nil {
			g.cfg.Logger.Error("gateway: hold not recorded", "model", id, "err", err)
		}
		if out.retryAfter == "" {
			// Passed on, the upstream's 429 tells the client to come
			// back when the hold ends, not sooner (it would meet the
			// hold) nor later.
			out.errHeader = out.errHeader.Clone()
			out.errHeader.Set("Retry-After", upstream.Seconds(hold))
		}
	}
	if f.mayMove(i, out.failure) {
		return stepNext
	}
	if out.errAnswer != nil {
		// No step may take over: the upstream's own error is the answer.
		if f.retried {
			out.errHeader = out.errHeader.Clone()
			out.errHeader.Set("X-Should-Retry", "false")
		}
		g.passOn(w, out)
		f.res.Route, f.res.Status = st.Route, out.status
		if f.translated(i) {
			f.res.UpstreamWire = f.res.Attempts[len(f.res.Attempts)-1].Wire
		}
		return stepDone
	}
	if out.outcome == "auth_failed" {
		f.last = &Refusal{Status: http.StatusBadGateway, Code: CodeUpstreamAuth,
			Message: "shim: the upstream refused this route's credential; the operator must fix the route"}
		return stepStop
	}
	if out.failure == upstream.Uncertain {
		// Sent, and perhaps run: a retry may run it twice.
		f.last = &Refusal{Status: http.StatusBadGateway, Code: CodeUpstreamIncomplete,
			Message: "shim: the upstream may have run the request but its answer did not arrive whole; not retried, as that may run it twice"}
		return stepStop
	}
	f.last = &Refusal{Status: http.StatusBadGateway, Code: CodeUpstreamFailed, Retry: true, Message: "shim: the upstream could not be reached"}
	return stepStop
}
