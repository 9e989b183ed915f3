package shim

import (
	"crypto/sha256"
	"net/http"
	"slices"
	"strconv"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// forwardPlan sends body through the gateway: along the caller's plan, with
// its grants, reservations, budgets, failover and holds. The receipt
// records every attempt and what it reserved and settled. A refusal (no
// grant, budget exceeded, a held model, no route that answered) is written
// in p's envelope; x-should-retry: false unless retrying may help (a held
// model after its Retry-After, an upstream that failed).
func (s *Service) forwardPlan(w http.ResponseWriter, t *turn, p wire.Protocol, body wire.Body) {
	t.rc.Decision = DecisionForward
	t.hash(&t.rc.ForwardedSHA256, body.Raw)
	h := sha256.New()
	t.rc.OverheadMicros = t.overhead()
	// A whole answer is held back and sent, with its length, once its
	// receipt is recorded (as passAnswer does); a stream is not held.
	var held *heldAnswer
	before := w.Header().Clone()
	gw := gateway.Writer{ResponseWriter: w, Hash: h, BeforeHeader: func(hdr http.Header) {
		hdr.Set(HeaderReceipt, t.rc.ID)
		hdr.Set(HeaderOverhead, strconv.FormatInt(t.rc.OverheadMicros, 10))
	}, Hold: func(status int, body []byte) { held = &heldAnswer{status, body} }}
	if f := t.answerFilter(p); f != nil {
		gw.Filter = f
	}
	res := s.cfg.Gateway.Forward(t.r.Context(), gw, gateway.Request{Protocol: p, Caller: t.caller, Parsed: t.req, Body: body, Scope: string(s.Scope(t.caller).Slot()), Header: t.r.Header, RawQuery: t.r.URL.RawQuery, ID: t.rc.ID})
	attempts := res.Attempts
	if attempts == nil {
		attempts = []gateway.Attempt{}
	}
	if !res.Open { // the ungoverned pass-through keeps no spend
		t.rc.Spend = &Spend{Plan: res.Plan, Attempts: attempts, Reserved: res.Reserved, Settled: res.Settled}
	}
	if n := len(res.Attempts); n > 0 {
		t.rc.Upstream = res.Attempts[n-1].Route
	}
	ran := slices.ContainsFunc(res.Attempts, gateway.Attempt.MayHaveRun)
	if res.Err != nil {
		s.fail(w, t, before, ran, res.Err)
		return
	}
	if f := res.Refusal; f != nil {
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		for k, v := range f.Header {
			w.Header()[k] = v
		}
		msg := f.Message
		if p == wire.Messages {
			// Anthropic's envelope has no field for the code: it leads.
			msg = f.Code + ": " + msg
		}
		decision := DecisionRefused
		if f.Status >= 500 {
			decision = DecisionFailed // the upstream failed, not the request
		}
		s.reject(w, t, before, ran, rejection{decision, f.Status, f.Code, msg, f.Retry})
		return
	}
	t.rc.ResponseID, t.rc.CacheHit = res.ResponseID, res.CacheHit
	t.rc.Upstream, t.rc.UpstreamStatus, t.rc.UpstreamWire = res.Route, res.Status, res.UpstreamWire
	if n := len(res.Attempts); n > 0 {
		a := res.Attempts[n-1] // the one that answered
		t.served = &contract.Route{ResolvedTarget: a.Model, Provider: s.cfg.Gateway.ProviderClass(a.Route, a.Model)}
	}
	t.rc.ResponseSHA256 = sum(h)
	t.rc.Broken = res.Broken
	stored := s.finish(t)
	switch {
	case res.Broken:
		abort(w, p, http.StatusBadGateway, gateway.CodeUpstreamIncomplete, "the upstream broke off the stream")
	case held != nil && !stored:
		s.unrecorded(w, t, before, true)
	case held != nil:
		w.Header().Set("Content-Length", strconv.Itoa(len(held.body)))
		w.WriteHeader(held.status)
		_, _ = w.Write(held.body)
	case !stored:
		// A stream whose receipt is missing does not end for the client.
		abort(w, p, http.StatusServiceUnavailable, CodeReceiptNotRecorded, "the receipt of this turn could not be stored")
	case res.Final != nil:
		// The stream's last event goes out once its receipt is stored.
		_, _ = w.Write(res.Final)
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
	}
}

// heldAnswer is a whole gateway answer waiting for its receipt.
type heldAnswer struct {
	status int
	body   []byte
}
