package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caduceus-dev/caduceus/internal/telemetry"
	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
)

// outcome is one attempt's result.
type outcome struct {
	outcome  string
	status   int
	failure  upstream.Failure // when the attempt failed
	answered bool             // the client got this attempt's answer
	waited   time.Duration    // from the call to the upstream's headers
	broken   bool             // its stream broke off after the client began receiving it
	settle   bool             // settle (with cost) rather than release
	cost     int64            // -1: settle at the reservation
	// estimated: cost is an estimate (meter.estimate), not usage.
	estimated bool
	// errAnswer is a 5xx or 429 the upstream sent, kept to pass on when
	// no step may take over.
	errAnswer  []byte
	errHeader  http.Header
	retryAfter string
	final      []byte // a stream's terminal event, held back
	responseID string // a Responses API answer's id
	tokens     int64  // the usage's input and output tokens
	// captured is the answer as the client got it, for the plan's cache
	// (a stream's events but the last; nil: not kept).
	captured    []byte
	contentType string
}

// forwardRequestHeaders are passed upstream as they came; credentials are
// the route's, never the caller's. The W3C trace context (traceparent,
// tracestate) passes as it came; when serve traces, send replaces it with
// the attempt span's.
var forwardRequestHeaders = []string{"Accept", "User-Agent", "Openai-Beta", "Openai-Organization", "Openai-Project",
	"Anthropic-Version", "Anthropic-Beta", "Idempotency-Key", "Traceparent", "Tracestate"} // canonical

// dropResponseHeaders are not passed back to the caller.
var dropResponseHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Set-Cookie": true,
}

// cancelOnClose cancels the attempt's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// send makes one upstream call, waiting at most wait for its response
// headers (0: as long as ctx lasts). wrote reports whether the request was
// written before a failure (an error before that is definite).
func (g *Gateway) send(ctx context.Context, req Request, routeName, path, model string, body []byte, wait time.Duration) (resp *http.Response, wrote bool, err error) {
	r := g.cfg.Upstream.Routes[routeName]
	actx, cancel := context.WithCancel(ctx)
	// wait bounds the wait for the answer's headers once the request is
	// written (not its dial or its writing: an attempt not yet sent is
	// not waiting on the upstream).
	var timerMu sync.Mutex
	var timer *time.Timer
	stopped := false
	stop := func() {
		timerMu.Lock()
		defer timerMu.Unlock()
		stopped = true
		if timer != nil {
			timer.Stop()
		}
	}
	var sent atomic.Bool
	trace := &httptrace.ClientTrace{WroteRequest: func(info httptrace.WroteRequestInfo) {
		if info.Err != nil {
			return
		}
		sent.Store(true)
		if wait > 0 {
			timerMu.Lock()
			if !stopped {
				timer = time.AfterFunc(wait, cancel)
			}
			timerMu.Unlock()
		}
	}}
	pv := provider.For(r.Kind)
	ureq, err := pv.Request(httptrace.WithClientTrace(actx, trace), provider.Call{Route: r, Key: g.cfg.Keys[routeName],
		Method: req.Method, Model: model, Stream: req.Parsed != nil && req.Parsed.Stream, Path: path, RawQuery: req.RawQuery, Body: body})
	if err != nil {
		stop()
		cancel()
		return nil, false, err
	}
	foreign := !pv.Speaks(req.Protocol, model) // a translated request
	for _, k := range forwardRequestHeaders {
		if foreign && pv.Foreign(k) {
			continue
		}
		if v := req.Header.Values(k); len(v) > 0 {
			ureq.Header[k] = v
		}
	}
	telemetry.Inject(actx, ureq.Header) // the attempt's traceparent, when traced
	resp, err = g.cfg.Client.Do(ureq)
	stop()
	if err != nil {
		cancel()
		return nil, sent.Load(), err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, true, nil
}

// call is one upstream call of a step: what goes where, and how its answer
// reaches the client.
type call struct {
	req   Request
	route string // the route's name
	id    string // the step's model identity
	model string // the model the upstream is asked for
	price upstream.Price
	body  []byte        // what goes upstream
	wait  time.Duration // the most to wait for its headers once sent (0: as long as ctx)
	// holdFirst: a stream's headers wait for its first event, so a stream
	// that breaks before it can still move to another step.
	holdFirst bool
	// strip: the usage chunk the client did not ask for is left out.
	strip   bool
	capture int  // the most of the answer kept for the plan's cache
	x       *leg // translates the answer from the upstream's wire; nil: the client's own
}

// attempt is do observed: in a traced request, a "shim.attempt" span
// (whose traceparent goes upstream) with the route, the model identity,
// the outcome and the status; and OnAttempt told.
func (g *Gateway) attempt(ctx context.Context, w Writer, c call) outcome {
	actx, span := telemetry.Child(ctx, "shim.attempt", telemetry.SpanKindClient) // nil: not traced
	began := time.Now()
	out := g.do(actx, w, c)
	if span != nil {
		span.SetAttributes(telemetry.KeyRoute.String(c.route), telemetry.KeyModelIdentity.String(c.id), telemetry.KeyOutcome.String(out.outcome))
		if out.status != 0 {
			span.SetAttributes(telemetry.KeyStatus.Int(out.status))
		}
		if !out.answered {
			telemetry.Fail(span, out.outcome)
		}
		span.End()
	}
	if g.cfg.OnAttempt != nil {
		g.cfg.OnAttempt(c.route, out.outcome, time.Since(began))
	}
	return out
}

// do makes the call and, when it answers, writes the answer to w.
func (g *Gateway) do(ctx context.Context, w Writer, c call) (out outcome) {
	req, routeName, id, price, body, x := c.req, c.route, c.id, c.price, c.body, c.x
	up := req.Protocol // the wire the upstream speaks
	if x != nil {
		up = x.up
	}
	pv := provider.For(g.cfg.Upstream.Routes[routeName].Kind)
	mt := pv.Meter(up)
	sent := time.Now()
	resp, wrote, err := g.send(ctx, req, routeName, up.Path(), c.model, body, c.wait)
	if err != nil {
		if ctx.Err() != nil {
			return g.canceled(mt, wrote, price, body)
		}
		var refused *provider.CredentialRefused
		if errors.As(err, &refused) { // nothing was sent
			g.refusedCredential(routeName, id, refused.Status, refused.Body)
			return outcome{outcome: "auth_failed", status: refused.Status, failure: upstream.Definite}
		}
		g.cfg.Logger.Warn("gateway: upstream failed", "route", routeName, "model", id, "sent", wrote, "err", err)
		if wrote {
			return uncertain(0)
		}
		return outcome{outcome: "definite", failure: upstream.Definite}
	}
	defer resp.Body.Close()
	waited := time.Since(sent)
	defer func() { out.waited = waited }()
	if authRefused(resp.StatusCode) {
		b, _ := readAll(resp.Body, 1<<20)
		g.refusedCredential(routeName, id, resp.StatusCode, b)
		return outcome{outcome: "auth_failed", status: resp.StatusCode, failure: upstream.Definite}
	}
	g.setHealth(routeName, routeHealthy)
	if f, ok := pv.Failure(resp.StatusCode); ok {
		b, _ := readAll(resp.Body, 1<<20)
		name := "definite"
		if resp.StatusCode == http.StatusTooManyRequests {
			name = "rate_limited"
		}
		b, hdr := x.errorAnswer(resp.StatusCode, b, resp.Header)
		return outcome{outcome: name, status: resp.StatusCode, failure: f, errAnswer: b, errHeader: hdr, retryAfter: resp.Header.Get("Retry-After")}
	}
	a := &answerCall{call: c, g: g, w: w, mt: mt, resp: resp}
	events, ok := pv.Events(resp.Header, resp.Body)
	if !ok {
		return a.whole(ctx)
	}
	return a.stream(ctx, events)
}

// canceled is an attempt the client left before its answer began: one
// that was sent may have run, so it settles at the estimate of what was
// generated (its input, and any deltas read); one that was not is
// released.
func (g *Gateway) canceled(mt provider.Meter, sent bool, price upstream.Price, body []byte) outcome {
	if !sent {
		return outcome{outcome: "canceled"}
	}
	return outcome{outcome: "canceled", settle: true, cost: int64(price.Cost(mt.Estimate(len(body)))), estimated: true}
}

// uncertain is an attempt that was sent and failed before its answer
// reached the client: it may have run, so it is settled at its
// reservation.
func uncertain(status int) outcome {
	return outcome{outcome: "uncertain", status: status, failure: upstream.Uncertain, settle: true, cost: -1}
}

// charged settles an answered attempt: a 2xx at the cost of its usage (at
// the reservation when the upstream reported none), anything else released.
func (g *Gateway) charged(status int, mt provider.Meter, body []byte, price upstream.Price, id string) outcome {
	o := outcome{outcome: "answered", status: status, answered: true}
	if status < 200 || status > 299 {
		return o
	}
	if body != nil {
		mt.Observe(body)
	}
	o.settle = true
	if u, seen, _ := mt.Usage(); seen {
		o.cost = int64(price.Cost(u))
		o.tokens = u.Input + u.CachedInput + u.CacheWrite + u.Output
	} else {
		o.cost = -1 // the reservation stands
	}
	return o
}

// netTransport is net/http's transport as Transport configures it.
func netTransport(maxIdlePerHost int) *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // no global cap: the per-host pool bounds it
		MaxIdleConnsPerHost:   maxIdlePerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}
