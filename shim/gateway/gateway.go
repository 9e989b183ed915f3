// Package gateway forwards the shim's LLM requests along a plan (seed 003
// H17): each attempt needs the caller's exact provider/model grant, reserves
// its maximum cost before the call and settles to the reported usage after
// it (or releases on failure); a failed attempt moves to the plan's next
// step only as upstream.MayFailOver allows; a 429 holds the model identity
// on every route, in the store every process shares. A balanced step picks
// one of its routes per request by weight, skipping those the caller is not
// granted, held and unhealthy ones (balance.go). A step with translate:
// true serves a client of the other wire, its turn translated
// (translate.go, shim/translate).
package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/internal/telemetry"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Refusal codes of the gateway.
const (
	CodeModelNotRouted = "model_not_found"
	CodeNotGranted     = "model_not_granted"
	CodeWrongWire      = "wrong_protocol"
	CodeInvalidRequest = "invalid_request"
	CodeBudgetExceeded = upstream.CodeBudgetExceeded
	CodeRateLimited    = "rate_limited"
	CodeUpstreamFailed = "upstream_unreachable"
	// CodeUpstreamIncomplete: an attempt was sent and may have been run,
	// but its answer did not arrive whole; not to be retried.
	CodeUpstreamIncomplete = "upstream_incomplete"
	// CodeUpstreamAuth: the upstream refused the route's own credential
	// (401, 403); the operator must fix the route, a retry cannot help.
	CodeUpstreamAuth    = "upstream_auth_failed"
	CodeLedgerUnhealthy = "internal"
)

// Config configures a Gateway.
type Config struct {
	Upstream upstream.Config
	// Keys are the routes' API keys by route name (read from each route's
	// key_env by the caller); a route without one is sent no credential.
	Keys map[string]string
	// Ledger and Holds keep reservations and holds; a gateway whose plans
	// are all Open keeps neither (nil is allowed then).
	Ledger upstream.Ledger
	Holds  upstream.Holds
	// Rates counts the requests and tokens of the rate limits (budgets'
	// rpm and tpm) across processes; nil: rate limits are not kept.
	Rates upstream.Rates
	// Cache keeps the plans' cached answers across processes; nil: no
	// plan caches.
	Cache upstream.Cache
	// Health keeps the health of the routes of balanced steps across
	// processes; nil: Holds's, when it keeps health too (the store's
	// ledger does), else this gateway's memory.
	Health upstream.RouteHealth
	// Rand, when set, is the source of a balanced step's weighted choice
	// (tests set a seeded one; it is used under a lock); nil: the
	// runtime's generator, which needs none.
	Rand rand.Source
	// Client sends upstream requests (nil: a client over Transport(0)).
	Client *http.Client
	// HeaderTimeout (shim.attempt_timeout) bounds the wait for an
	// attempt's response headers once it is sent, when a further step may
	// take over after an uncertain failure (0: 120s): past it the attempt
	// failed uncertainly and the next step is tried. An attempt nothing
	// may follow waits as long as its client does, or its route's Timeout.
	HeaderTimeout time.Duration
	// MaxHold caps the hold of a 429 without Retry-After (0: 60s): 1 s
	// after the first, doubling with each consecutive one (see
	// upstream.Backoff) until an attempt on that model identity answers.
	MaxHold time.Duration
	// DeferClose leaves each attempt's settlement or release to the caller
	// (Attempt.Closing), so it can join the transaction that stores the
	// request's receipt: one commit fewer per request. Close does it for a
	// caller that could not.
	DeferClose bool
	// MaxAnswer bounds a non-streaming answer (0: 64 MiB).
	MaxAnswer int64
	Now       func() time.Time
	Logger    *slog.Logger
	// OnRouteHealth, when set, is told when a route's health changes:
	// unhealthy when the upstream refused its credential (401, 403),
	// healthy again at its next other answer. It is called outside any
	// lock, at most once per change.
	OnRouteHealth func(route string, healthy bool)
	// OnAttempt, when set, is told of every upstream call made: its
	// route, its outcome (Attempt.Outcome) and how long it took, its
	// answer included.
	OnAttempt func(route, outcome string, took time.Duration)
}

// Gateway forwards requests along plans.
type Gateway struct {
	cfg Config
	// health is each route's last known health: 0 unknown, 1 healthy,
	// 2 its credential refused.
	health map[string]*atomic.Int32
	// timeouts are the routes' Timeouts (0: none).
	timeouts map[string]time.Duration
	// streaks counts, per model identity, the consecutive 429s without
	// Retry-After (this process's); busy is how many it holds.
	mu      sync.Mutex
	streaks map[string]int
	busy    atomic.Int32
	// balanced are the routes that are members of some balanced step:
	// their outcomes make their health (rh), and probing[route] is set
	// while a request of this process tries the route after its
	// cool-down.
	balanced  map[string]bool
	probing   map[string]*atomic.Bool
	rh        upstream.RouteHealth
	threshold int
	cooldown  time.Duration
	slow      time.Duration // an answer slower to its headers fails its run; 0: none
	randMu    sync.Mutex
	rnd       *rand.Rand // nil: the runtime's generator
}

// New returns a Gateway. It panics without a Ledger or Holds when a plan is
// not Open (a wiring bug).
func New(cfg Config) *Gateway {
	governed := false
	for _, p := range cfg.Upstream.Plans {
		governed = governed || !p.Open
	}
	if governed && (cfg.Ledger == nil || cfg.Holds == nil) {
		panic("gateway: Config.Ledger and Config.Holds are required")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: Transport(0)}
	}
	if cfg.HeaderTimeout <= 0 {
		cfg.HeaderTimeout = 120 * time.Second
	}
	if cfg.MaxHold <= 0 {
		cfg.MaxHold = time.Minute
	}
	if cfg.MaxAnswer <= 0 {
		cfg.MaxAnswer = 64 << 20
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	g := &Gateway{cfg: cfg, health: map[string]*atomic.Int32{}, streaks: map[string]int{}, timeouts: map[string]time.Duration{},
		balanced: map[string]bool{}, probing: map[string]*atomic.Bool{}, rh: cfg.Health, threshold: cfg.Upstream.RouteHealth.Threshold()}
	for name, r := range cfg.Upstream.Routes {
		g.health[name] = new(atomic.Int32)
		g.timeouts[name] = r.Wait()
	}
	for _, p := range cfg.Upstream.Plans {
		for _, steps := range p.Models {
			for _, st := range steps {
				for _, m := range st.Balance {
					g.balanced[m.Route] = true
					g.probing[m.Route] = new(atomic.Bool)
				}
			}
		}
	}
	if g.rh == nil {
		if h, ok := cfg.Holds.(upstream.RouteHealth); ok {
			g.rh = h
		} else {
			g.rh = &memHealth{runs: map[string]*healthRun{}}
		}
	}
	var err error
	if g.cooldown, err = cfg.Upstream.RouteHealth.Rest(); err != nil {
		g.cooldown = 30 * time.Second // Validate refuses it
	}
	g.slow, _ = cfg.Upstream.RouteHealth.Slow() // checked by Validate
	if cfg.Rand != nil {
		g.rnd = rand.New(cfg.Rand)
	}
	return g
}

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

// Request is one LLM request to forward.
type Request struct {
	Protocol wire.Protocol
	Caller   contract.Caller
	// Body is what goes upstream (after any shim); Header and RawQuery are
	// the client's.
	Body     []byte
	Header   http.Header
	RawQuery string
	// ID names the request's reservations: ID-0, ID-1, ... per attempt.
	ID string
	// Method is the upstream request's method ("": POST).
	Method string
	// Model is the model Body asks for, when the caller has parsed it
	// already ("": read from Body).
	Model string
	// Scope is whose cache the request reads and fills: its tenant, or
	// its tenant's key under key isolation ("": the caller's tenant).
	Scope string
}

// Attempt is one try of a plan step, as a receipt records it.
type Attempt struct {
	Route string `json:"route"`
	Model string `json:"model"` // provider/model
	// Outcome: answered, broken (a stream the upstream broke off after
	// the client began receiving it), definite, uncertain, auth_failed
	// (the upstream refused the route's credential), rate_limited, held,
	// not_granted, budget_exceeded, canceled.
	Outcome     string `json:"outcome"`
	Status      int    `json:"status,omitempty"`
	Reservation string `json:"reservation,omitempty"`
	Reserved    int64  `json:"reserved_microdollars"`
	Settled     int64  `json:"settled_microdollars"`
	// Estimated: Settled is an estimate, not the provider's usage — a
	// stream cut short (the client went away, the upstream broke it off)
	// before its usage came, or a call the client left while waiting (see
	// meter.estimate).
	Estimated bool `json:"estimated,omitempty"`
	// Wire is the wire the upstream spoke when the attempt was translated
	// from the client's ("": the client's own).
	Wire wire.Protocol `json:"wire,omitempty"`
	// Closing is what is left to do with the reservation when the gateway
	// defers it (Config.DeferClose): CloseSettle at Settled, CloseRelease,
	// or "" (nothing).
	Closing string `json:"-"`
	// Ticket is what the ledger reserved, as closing it needs it.
	Ticket upstream.Ticket `json:"-"`
}

// MayHaveRun reports whether the upstream may have run the attempt: it
// answered (whole or broken off), its failure was uncertain, or the client
// left while it was in flight. A definite failure, a refused credential, a
// 429 and the attempts refused before sending (held, not_granted,
// budget_exceeded) did not run.
func (a Attempt) MayHaveRun() bool {
	switch a.Outcome {
	case "answered", "broken", "uncertain", "canceled":
		return true
	}
	return false
}

// What a deferred reservation is closed with.
const (
	CloseSettle  = "settle"
	CloseRelease = "release"
)

// Close settles or releases the reservations of attempts still to close,
// logging what the ledger refused. A caller of a gateway with DeferClose
// calls it when it could not close them in its own transaction.
func (g *Gateway) Close(ctx context.Context, attempts []Attempt) {
	for _, a := range attempts {
		var err error
		switch a.Closing {
		case CloseSettle:
			err = g.cfg.Ledger.Settle(ctx, a.Ticket, upstream.Microdollars(a.Settled))
		case CloseRelease:
			err = g.cfg.Ledger.Release(ctx, a.Ticket)
		default:
			continue
		}
		if err != nil {
			g.cfg.Logger.Error("gateway: reservation not closed", "reservation", a.Reservation, "close", a.Closing, "err", err)
		}
	}
}

// DefersClose reports whether the caller closes the reservations
// (Config.DeferClose).
func (g *Gateway) DefersClose() bool { return g.cfg.DeferClose }

// ProviderClass is the HUX provider class of model served by route
// (upstream.Config.ProviderClass).
func (g *Gateway) ProviderClass(route, model string) contract.Provider {
	return g.cfg.Upstream.ProviderClass(route, model)
}

// Refusal is an answer the gateway did not get from an upstream: the caller
// writes it in the protocol's envelope.
type Refusal struct {
	Status  int
	Code    string
	Message string
	// Retry says whether an SDK may retry (x-should-retry); RetryAfter is
	// the Retry-After value in seconds, when there is one.
	Retry      bool
	RetryAfter string
	// Header is set on the refusal's answer (a rate limit's headers).
	Header http.Header
}

// Result is what happened to a request.
type Result struct {
	Plan     string
	Attempts []Attempt
	// Route answered (its answer went to the client) unless Refusal is set.
	Route   string
	Status  int
	Refusal *Refusal
	// Reserved and Settled sum the attempts, in microdollars.
	Reserved, Settled int64
	// Err is a failure of the gateway itself (the ledger); Refusal then
	// says 500.
	Err error
	// Final is a stream's terminal event ([DONE], message_stop,
	// response.completed), held back and already hashed: the caller writes
	// it once the request's receipt is stored, so a client never holds a
	// finished stream whose receipt is missing. Nil when nothing was held.
	Final []byte
	// CacheHit is the receipt of the request whose answer the plan's
	// cache replayed ("": not from the cache).
	CacheHit string
	// Open: the request went along an Open plan (the ungoverned
	// pass-through): nothing was granted, reserved or settled.
	Open bool
	// ResponseID is the id of the Responses API answer the client got
	// ("resp_..."), for its later retrieval from the route that served it.
	ResponseID string
	// Broken: the upstream broke its stream off after the client began
	// receiving it. The caller ends the client's response abnormally too
	// (no terminating chunk, a reset stream), once the receipt is stored,
	// so that the client's SDK raises as it would against the provider.
	Broken bool
	// UpstreamWire is the wire of the upstream that answered when its
	// answer was translated into the client's ("": the client's own).
	UpstreamWire wire.Protocol
}

// Writer is where the answer goes: the client's response, plus a hook the
// shim uses to add its own headers (the receipt) just before the status
// line, and a hash of every byte sent.
type Writer struct {
	http.ResponseWriter
	BeforeHeader func(http.Header)
	Hash         io.Writer
	// Hold, when set, takes a whole (not streamed) answer instead of the
	// response: its headers are set on the response (BeforeHeader run),
	// and its status and body go to Hold for the caller to send — the
	// shim sends them once the turn's receipt is recorded. A stream is
	// written as it comes whatever Hold is.
	Hold func(status int, body []byte)
}

// kindOf is the wire a protocol needs.
func kindOf(p wire.Protocol) upstream.Kind {
	if p == wire.Messages {
		return upstream.KindAnthropic
	}
	return upstream.KindOpenAI
}

func refused(res Result, status int, code, msg string, retry bool) Result {
	res.Refusal = &Refusal{Status: status, Code: code, Message: msg, Retry: retry}
	return res
}

// Forward sends req along its tenant's plan and writes the answer to w, or
// returns a Refusal for the caller to write (nothing was written then).
func (g *Gateway) Forward(ctx context.Context, w Writer, req Request) Result {
	f, refusal := g.route(req)
	if refusal != nil {
		f.res.Refusal = refusal
		return f.res
	}
	if g.fromCache(ctx, w, f) {
		return f.res
	}
	windows, refusal := g.admit(ctx, f)
	if refusal != nil {
		f.res.Refusal = refusal
		return f.res
	}
	if len(windows) > 0 {
		defer g.used(ctx, windows, f)
	}
	if len(f.groups) > 0 {
		g.choose(ctx, f)
		defer g.endProbes(f)
	}
steps:
	for i := range f.steps {
		switch f.step(ctx, g, w, i) {
		case stepDone:
			return f.res
		case stepStop:
			break steps
		}
	}
	if f.last == nil {
		f.last = &Refusal{Status: http.StatusBadGateway, Code: CodeUpstreamFailed, Retry: true, Message: "shim: no route of the plan could answer"}
	}
	if f.sent && f.last.Status >= 500 && f.last.Retry {
		// An earlier attempt may have run: the client must not send the
		// request again.
		f.last = &Refusal{Status: http.StatusBadGateway, Code: CodeUpstreamIncomplete,
			Message: "shim: the upstream may have run the request but its answer did not arrive whole; not retried, as that may run it twice"}
	}
	if f.retried && f.last.Retry {
		// Caduceus retried already, as the plan says: another retry by the
		// client would only repeat them.
		last := *f.last
		last.Retry = false
		f.last = &last
	}
	f.res.Refusal = f.last
	return f.res
}

// forwarding is one request on its way along its plan's steps.
type forwarding struct {
	req   Request
	cfg   upstream.Config
	model string
	plan  upstream.Plan
	steps []upstream.Step
	ids   []string // each step's model identity
	// groups are the balanced steps' members among steps, [from, to),
	// with each step's weight (weights: only when there are groups);
	// probes are the routes this request tries after their cool-down.
	groups  [][2]int
	weights []int
	probes  []string
	meta    meta
	body    []byte // what goes upstream (include_usage added when strip)
	strip   bool   // the client did not ask for the usage chunk: strip it
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
	model := req.Model
	if model == "" {
		model = wire.PeekModel(req.Body)
	}
	f := &forwarding{req: req, cfg: c, model: model}
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
	kept, translated := servable(c, req.Protocol, steps)
	if len(kept) == 0 {
		return f, &Refusal{Status: http.StatusBadRequest, Code: CodeWrongWire, Message: fmt.Sprintf("shim: %q is served over the %s API, not %s", f.model, c.Routes[steps[0].Members()[0].Route].Kind, req.Protocol)}
	}
	f.flatten(kept)
	if !f.grantedFrom(0) {
		return f, &Refusal{Status: http.StatusForbidden, Code: CodeNotGranted, Message: fmt.Sprintf("shim: this key is not granted %s", f.ids[0])}
	}
	m, err := readMeta(req.Body)
	if err != nil {
		return f, &Refusal{Status: http.StatusBadRequest, Code: CodeInvalidRequest, Message: "shim: " + err.Error()}
	}
	f.meta, f.body = m, req.Body
	if translated {
		if r := f.translation(); r != nil {
			return f, r
		}
	}
	if req.Protocol == wire.ChatCompletions && m.stream && !m.includeUsage {
		f.body, f.strip = withIncludeUsage(req.Body), true
	}
	return f, nil
}

// CodeNoUpstream refuses a request whose wire the Open plan has no route
// for.
const CodeNoUpstream = "upstream_not_configured"

// routeOpen routes a request of an Open plan to its wire's route, whatever
// the model; its body goes as it came.
func (g *Gateway) routeOpen(f *forwarding) (*forwarding, *Refusal) {
	kind := kindOf(f.req.Protocol)
	name, ok := f.cfg.OpenRoute(kind)
	if !ok {
		return f, &Refusal{Status: http.StatusServiceUnavailable, Code: CodeNoUpstream, Message: fmt.Sprintf("shim: no %s upstream is configured", kind)}
	}
	f.open, f.body, f.res.Open = true, f.req.Body, true
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
		amount = price.MaxCost(int64(len(ubody)), f.meta.maxOut)
		if f.req.Protocol == wire.Embeddings {
			amount = price.Cost(upstream.Usage{Input: int64(len(f.body))}) // an embedding has no output
		}
	}
	if x == nil && st.Model != "" && st.Model != f.model {
		ubody = withModel(f.body, st.Model)
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
		out := g.attempt(ctx, w, f.req, st.Route, id, price, ubody, wait, f.meta.stream && canMove, strip, f.capture, x)
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

// held checks the step's model identity for a rate-limit hold; a held step
// is skipped when a later one may take over.
func (f *forwarding) held(ctx context.Context, g *Gateway, i int, att Attempt, now time.Time) (stepVerdict, bool) {
	id := f.ids[i]
	until, err := g.cfg.Holds.HeldUntil(ctx, id)
	if err != nil {
		f.res.Err = err
		f.res.Refusal = &Refusal{Status: http.StatusInternalServerError, Code: CodeLedgerUnhealthy, Message: "internal error", Retry: true}
		return stepDone, true
	}
	if until.IsZero() {
		return stepNext, false
	}
	att.Outcome = "held"
	f.res.Attempts = append(f.res.Attempts, att)
	secs := upstream.Seconds(until.Sub(now))
	f.last = &Refusal{Status: http.StatusTooManyRequests, Code: CodeRateLimited, Retry: true, RetryAfter: secs,
		Message: fmt.Sprintf("shim: %s is rate-limited upstream; retry after %s seconds", id, secs)}
	if f.mayMove(i, upstream.Definite) {
		return stepNext, true
	}
	return stepStop, true
}

// reserve reserves the step's maximum cost; false when the request ends here
// (budget exceeded, or the ledger failed).
func (f *forwarding) reserve(ctx context.Context, g *Gateway, i int, att *Attempt, amount upstream.Microdollars) (stepVerdict, bool) {
	id, caller := f.ids[i], f.req.Caller
	rid := f.req.ID + "-" + strconv.Itoa(len(f.res.Attempts)) // the attempt's number: a retry is another

	keyLim, tenLim := f.cfg.Budgets.For(string(caller.Identity.TenantSlot), caller.KeyID)
	ticket, err := g.cfg.Ledger.Reserve(ctx, upstream.Reservation{ID: rid, Tenant: caller.Identity.TenantSlot, KeyID: caller.KeyID,
		Identity: id, Amount: amount, KeyLimit: keyLim, TenantLimit: tenLim})
	if errors.Is(err, upstream.ErrBudgetExceeded) {
		att.Outcome = "budget_exceeded"
		f.res.Attempts = append(f.res.Attempts, *att)
		f.res.Refusal = &Refusal{Status: http.StatusTooManyRequests, Code: CodeBudgetExceeded,
			Message: fmt.Sprintf("shim: budget exceeded: this request may cost up to %s dollars on %s, more than the key's or tenant's budget has left", amount, id)}
		return stepDone, false
	}
	if err != nil {
		f.res.Err = err
		f.res.Refusal = &Refusal{Status: http.StatusInternalServerError, Code: CodeLedgerUnhealthy, Message: "internal error", Retry: true}
		return stepDone, false
	}
	att.Reservation, att.Reserved, att.Ticket = rid, int64(amount), ticket
	f.res.Reserved += int64(amount)
	return stepNext, true
}

// close settles the attempt's reservation to what the upstream reported, or
// releases it, now or (DeferClose) in the caller's receipt transaction.
func (f *forwarding) close(ctx context.Context, g *Gateway, att *Attempt, out outcome, amount int64) {
	if out.settle {
		if out.cost < 0 {
			// The upstream reported no usage (or the attempt may have run
			// without an answer): the reservation is the honest upper
			// bound of what it cost.
			if out.answered {
				g.cfg.Logger.Warn("gateway: answer without usage; settled at the reservation", "route", att.Route, "model", att.Model)
			}
			out.cost = amount
		}
		if out.estimated {
			out.cost = min(out.cost, amount)
			att.Estimated, att.Ticket.Estimated = true, true
		}
		att.Settled = out.cost
		f.res.Settled += out.cost
		att.Closing = CloseSettle
	} else {
		att.Closing = CloseRelease
	}
	if !g.cfg.DeferClose {
		g.Close(context.WithoutCancel(ctx), []Attempt{*att})
		att.Closing = ""
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

// terminal reports whether ev ends its stream: chat's [DONE], Anthropic's
// message_stop, the Responses API's response.completed.
func terminal(ev wire.SSE) bool {
	switch ev.Name {
	case "message_stop", "response.completed":
		return true
	}
	return bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]"))
}

// forwardRequestHeaders are passed upstream as they came; credentials are
// the route's, never the caller's. The W3C trace context (traceparent,
// tracestate) passes as it came; when serve traces, send replaces it with
// the attempt span's.
var forwardRequestHeaders = []string{"Accept", "User-Agent", "OpenAI-Beta", "OpenAI-Organization", "OpenAI-Project",
	"Anthropic-Version", "Anthropic-Beta", "Idempotency-Key", "Traceparent", "Tracestate"}

// dropResponseHeaders are not passed back to the caller.
var dropResponseHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Authenticate": true, "Proxy-Authorization": true,
	"Te": true, "Trailer": true, "Transfer-Encoding": true, "Upgrade": true, "Content-Length": true, "Set-Cookie": true,
}

func endpoint(base, path string) string {
	base = strings.TrimRight(base, "/")
	return strings.TrimSuffix(base, "/v1") + path
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
func (g *Gateway) send(ctx context.Context, req Request, routeName, path string, body []byte, wait time.Duration) (resp *http.Response, wrote bool, err error) {
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
	url := endpoint(r.BaseURL, path)
	if req.RawQuery != "" {
		url += "?" + req.RawQuery
	}
	method := req.Method
	if method == "" {
		method = http.MethodPost
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	ureq, err := http.NewRequestWithContext(httptrace.WithClientTrace(actx, trace), method, url, rd)
	if err != nil {
		stop()
		cancel()
		return nil, false, err
	}
	foreign := r.Kind != kindOf(req.Protocol) // a translated request
	for _, k := range forwardRequestHeaders {
		if foreign && foreignHeader(http.CanonicalHeaderKey(k), r.Kind) {
			continue
		}
		if v := req.Header.Values(k); len(v) > 0 {
			ureq.Header[http.CanonicalHeaderKey(k)] = v
		}
	}
	telemetry.Inject(actx, ureq.Header) // the attempt's traceparent, when traced
	if body != nil {
		ureq.Header.Set("Content-Type", "application/json")
	}
	key := g.cfg.Keys[routeName]
	if r.Kind == upstream.KindAnthropic {
		if ureq.Header.Get("Anthropic-Version") == "" {
			ureq.Header.Set("Anthropic-Version", "2023-06-01")
		}
		if key != "" {
			ureq.Header.Set("X-Api-Key", key)
		}
	} else if key != "" {
		ureq.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err = g.cfg.Client.Do(ureq)
	stop()
	if err != nil {
		cancel()
		return nil, sent.Load(), err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, true, nil
}

// attempt is call observed: in a traced request, a "shim.attempt" span
// (whose traceparent goes upstream) with the route, the model identity,
// the outcome and the status; and OnAttempt told.
func (g *Gateway) attempt(ctx context.Context, w Writer, req Request, routeName, id string, price upstream.Price, body []byte, wait time.Duration, holdFirst, strip bool, capture int, x *leg) outcome {
	actx, span := telemetry.Child(ctx, "shim.attempt", telemetry.SpanKindClient) // nil: not traced
	began := time.Now()
	out := g.call(actx, w, req, routeName, id, price, body, wait, holdFirst, strip, capture, x)
	if span != nil {
		span.SetAttributes(telemetry.KeyRoute.String(routeName), telemetry.KeyModelIdentity.String(id), telemetry.KeyOutcome.String(out.outcome))
		if out.status != 0 {
			span.SetAttributes(telemetry.KeyStatus.Int(out.status))
		}
		if !out.answered {
			telemetry.Fail(span, out.outcome)
		}
		span.End()
	}
	if g.cfg.OnAttempt != nil {
		g.cfg.OnAttempt(routeName, out.outcome, time.Since(began))
	}
	return out
}

// call makes one call and, when it answers, writes the answer to w.
// holdFirst: a stream's headers wait for its first event, so a stream that
// breaks before it can still move to another step.
// x, when set, translates the answer from the upstream's wire.
func (g *Gateway) call(ctx context.Context, w Writer, req Request, routeName, id string, price upstream.Price, body []byte, wait time.Duration, holdFirst, strip bool, capture int, x *leg) (out outcome) {
	up := req.Protocol // the wire the upstream speaks
	if x != nil {
		up = x.up
	}
	mt := &meter{p: up}
	sent := time.Now()
	resp, wrote, err := g.send(ctx, req, routeName, up.Path(), body, wait)
	if err != nil {
		if ctx.Err() != nil {
			return g.canceled(mt, wrote, price, body)
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
	if f, ok := upstream.FailureOfStatus(resp.StatusCode); ok {
		b, _ := readAll(resp.Body, 1<<20)
		name := "definite"
		if resp.StatusCode == http.StatusTooManyRequests {
			name = "rate_limited"
		}
		b, hdr := x.errorAnswer(req.Protocol, resp.StatusCode, b, resp.Header)
		return outcome{outcome: name, status: resp.StatusCode, failure: f, errAnswer: b, errHeader: hdr, retryAfter: resp.Header.Get("Retry-After")}
	}
	a := &answerCall{g: g, w: w, req: req, route: routeName, id: id, price: price, body: body, capture: capture, x: x, mt: mt, up: up, resp: resp}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return a.whole(ctx)
	}
	return a.stream(ctx, holdFirst, strip)
}

// answerCall is a call whose upstream answered with a success: what its
// whole answer (whole) or its stream (stream) is passed on with.
type answerCall struct {
	g         *Gateway
	w         Writer
	req       Request
	route, id string
	price     upstream.Price
	body      []byte
	capture   int
	x         *leg
	mt        *meter
	up        wire.Protocol // the wire the upstream speaks
	resp      *http.Response
}

// whole passes on a whole (JSON) answer, translated when the call is.
func (a *answerCall) whole(ctx context.Context) outcome {
	g, w, req, routeName, id, price, body, capture, x, mt, resp := a.g, a.w, a.req, a.route, a.id, a.price, a.body, a.capture, a.x, a.mt, a.resp
	b, err := readAll(resp.Body, g.cfg.MaxAnswer)
	if err != nil {
		if ctx.Err() != nil {
			return g.canceled(mt, true, price, body)
		}
		g.cfg.Logger.Warn("gateway: upstream answer broke off", "route", routeName, "model", id, "err", err)
		return uncertain(resp.StatusCode)
	}
	answer, hdr := b, resp.Header
	if x != nil {
		if answer, hdr, err = x.answer(req.Protocol, resp.StatusCode, b, resp.Header); err != nil {
			g.cfg.Logger.Warn("gateway: upstream answer not translatable", "route", routeName, "model", id, "err", err)
			return uncertain(resp.StatusCode)
		}
	}
	writeAnswer(w, hdr, resp.StatusCode, answer)
	o := g.charged(resp.StatusCode, mt, b, price, id)
	if req.Protocol == wire.Responses {
		o.responseID = responseID(b)
	}
	if capture > 0 && len(answer) <= capture {
		o.captured, o.contentType = answer, resp.Header.Get("Content-Type")
	}
	return o
}

// stream passes on a stream event by event (translated when the call is),
// holding back its terminal event; holdFirst: the headers wait for the
// first event; strip: the usage chunk the client did not ask for is left
// out.
func (a *answerCall) stream(ctx context.Context, holdFirst, strip bool) outcome {
	g, w, req, routeName, id, price, body, x, mt, up, resp := a.g, a.w, a.req, a.route, a.id, a.price, a.body, a.x, a.mt, a.up, a.resp
	sr := wire.NewSSEReader(resp.Body)
	var first *wire.SSE
	if holdFirst {
		ev, err := sr.Next()
		if err != nil || ev.Incomplete {
			if ctx.Err() != nil {
				return g.canceled(mt, true, price, body)
			}
			return uncertain(resp.StatusCode)
		}
		first = &ev
	}
	writeHeader(w, resp.Header, resp.StatusCode)
	fl, _ := w.ResponseWriter.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	out := &streamOut{w: w, fl: fl, capture: a.capture}
	broken := false
	respID := ""
	for {
		var ev wire.SSE
		if first != nil {
			ev, first = *first, nil
		} else {
			var err error
			if ev, err = sr.Next(); err != nil || ev.Incomplete {
				switch {
				case ctx.Err() != nil:
					out.gone = true // the client went away: the call is stopped
				case err == nil || !errors.Is(err, io.EOF):
					// Cut off: the client's stream is cut as well.
					g.cfg.Logger.Warn("gateway: upstream stream broke off", "route", routeName, "model", id, "err", err)
					broken = true
				case x != nil:
					out.emit(x.stream.End()) // ended cleanly without its terminal event
				}
				break
			}
		}
		mt.delta += deltaBytes(up, ev.Data)
		if req.Protocol == wire.Responses && respID == "" {
			respID = responseID(ev.Data)
		}
		if mt.observe(ev.Data) && strip {
			continue // the usage chunk the client did not ask for
		}
		if strip && ev.Name == "" && ev.ID == "" && bytes.Contains(ev.Data, []byte(`"usage"`)) {
			if data, ok := withoutNullUsage(ev.Data); ok {
				ev.Raw = wire.Event("", data)
			}
		}
		if !out.emit(x.events(ev)) {
			break
		}
	}
	o := g.charged(resp.StatusCode, mt, nil, price, id)
	o.final, o.responseID = out.final, respID
	if out.capture > 0 && out.final != nil && !broken && !out.gone {
		o.captured, o.contentType = append([]byte{}, out.captured...), resp.Header.Get("Content-Type")
	}
	switch {
	case broken:
		o.outcome, o.broken = "broken", true
	case out.gone:
		o.outcome = "canceled"
	}
	if (broken || out.gone) && o.settle && !mt.final {
		// Cut short before its usage came: what was generated, estimated.
		o.cost, o.estimated = int64(price.Cost(mt.estimate(len(body)))), true
	}
	return o
}

// streamOut is a stream on its way to the client: what emit wrote of it.
type streamOut struct {
	w        Writer
	fl       http.Flusher // nil: the writer does not flush
	capture  int          // the most kept for the cache; -1: too long to keep
	captured []byte       // the events kept
	final    []byte       // the terminal event, held back
	gone     bool         // the client went away
}

// emit writes the client's events, holding the terminal one back; false
// once the stream is over for the client.
func (o *streamOut) emit(evs []wire.SSE) bool {
	for _, ev := range evs {
		if o.w.Hash != nil {
			o.w.Hash.Write(ev.Raw)
		}
		if terminal(ev) {
			o.final = ev.Raw
			return false
		}
		if o.capture > 0 {
			if len(o.captured)+len(ev.Raw) > o.capture {
				o.capture = -1 // too long to keep
			} else {
				o.captured = append(o.captured, ev.Raw...)
			}
		}
		if _, err := o.w.Write(ev.Raw); err != nil {
			o.gone = true // the client went away: closing the body stops the call
			return false
		}
	}
	if o.fl != nil && len(evs) > 0 {
		o.fl.Flush()
	}
	return true
}

// canceled is an attempt the client left before its answer began: one
// that was sent may have run, so it settles at the estimate of what was
// generated (its input, and any deltas read); one that was not is
// released.
func (g *Gateway) canceled(mt *meter, sent bool, price upstream.Price, body []byte) outcome {
	if !sent {
		return outcome{outcome: "canceled"}
	}
	return outcome{outcome: "canceled", settle: true, cost: int64(price.Cost(mt.estimate(len(body)))), estimated: true}
}

// uncertain is an attempt that was sent and failed before its answer
// reached the client: it may have run, so it is settled at its
// reservation.
func uncertain(status int) outcome {
	return outcome{outcome: "uncertain", status: status, failure: upstream.Uncertain, settle: true, cost: -1}
}

// charged settles an answered attempt: a 2xx at the cost of its usage (at
// the reservation when the upstream reported none), anything else released.
func (g *Gateway) charged(status int, mt *meter, body []byte, price upstream.Price, id string) outcome {
	o := outcome{outcome: "answered", status: status, answered: true}
	if status < 200 || status > 299 {
		return o
	}
	if body != nil {
		mt.observe(body)
	}
	o.settle = true
	if mt.seen {
		o.cost = int64(price.Cost(mt.u))
		o.tokens = mt.u.Input + mt.u.CachedInput + mt.u.CacheWrite + mt.u.Output
	} else {
		o.cost = -1 // the reservation stands
	}
	return o
}

// writeHeader writes status with the upstream's header from (less
// dropResponseHeaders), after w.BeforeHeader has seen it.
func writeHeader(w Writer, from http.Header, status int) {
	setHeader(w, from)
	w.WriteHeader(status)
}

// setHeader sets the answer's headers on w: from's, less the hop-by-hop
// ones, then w.BeforeHeader's.
func setHeader(w Writer, from http.Header) {
	hdr := w.Header()
	for k, v := range from {
		if !dropResponseHeaders[k] {
			hdr[k] = v
		}
	}
	if w.BeforeHeader != nil {
		w.BeforeHeader(hdr)
	}
}

// passOn writes an upstream answer (an error, a token count) as it came.
func (g *Gateway) passOn(w Writer, o outcome) {
	writeAnswer(w, o.errHeader, o.status, o.errAnswer)
}

// writeAnswer writes a whole answer: writeHeader, then body, which w.Hash
// also reads; or, with w.Hold, sets its headers and hands it to Hold.
func writeAnswer(w Writer, from http.Header, status int, body []byte) {
	if w.Hash != nil {
		w.Hash.Write(body)
	}
	if w.Hold != nil {
		setHeader(w, from)
		w.Hold(status, body)
		return
	}
	writeHeader(w, from, status)
	_, _ = w.Write(body)
}

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
	model := wire.PeekModel(req.Body)
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
			body = withModel(body, st.Model)
		}
		resp, _, err := g.send(ctx, req, st.Route, path, body, g.cfg.HeaderTimeout)
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
	resp, _, err := g.send(ctx, req, route, path, req.Body, g.cfg.HeaderTimeout)
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
		resp, _, err := g.send(ctx, Request{Method: http.MethodGet, Header: http.Header{}}, name, ModelsPath, nil, 10*time.Second)
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

// Transport is the transport the shim forwards with when it is given no
// client: an idle pool of maxIdlePerHost connections per upstream (0: 256,
// enough for the concurrency one process serves, so connections are reused
// rather than dialled anew under load; Go's default keeps 2), HTTP/2 where
// the upstream offers it, and bounds on the phases that have a natural one —
// dial 10s, TLS handshake 10s — but none on the wait for the answer: a
// provider may think for minutes before its first byte, and a stream lasts
// as long as the answer. The gateway bounds that wait where a plan allows a
// failover (attempt_timeout) or a route asks (timeout); otherwise the
// caller's hang-up cancels it.
func Transport(maxIdlePerHost int) *http.Transport {
	if maxIdlePerHost <= 0 {
		maxIdlePerHost = 256
	}
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

// CodeRateLimitedHere refuses a request past a key's or tenant's rpm or
// tpm (not the upstream's 429, which is rate_limited).
const CodeRateLimitedHere = "rate_limit_exceeded"

// admit counts the request in its key's and tenant's rate windows (the
// budgets' rpm and tpm), or refuses it with 429, Retry-After (the rest of
// the minute) and the provider's rate-limit headers. An Open plan has no
// rate limits.
func (g *Gateway) admit(ctx context.Context, f *forwarding) ([]upstream.RateWindow, *Refusal) {
	if g.cfg.Rates == nil || f.open {
		return nil, nil
	}
	caller := f.req.Caller
	keyLim, tenLim := f.cfg.Budgets.For(string(caller.Identity.TenantSlot), caller.KeyID)
	now := g.cfg.Now()
	minute := now.Unix() / 60
	var ws []upstream.RateWindow
	if keyLim.RPM > 0 || keyLim.TPM > 0 {
		ws = append(ws, upstream.RateWindow{Scope: "key:" + string(caller.Identity.TenantSlot) + ":" + caller.KeyID, Minute: minute, RPM: keyLim.RPM, TPM: keyLim.TPM})
	}
	if tenLim.RPM > 0 || tenLim.TPM > 0 {
		ws = append(ws, upstream.RateWindow{Scope: "tenant:" + string(caller.Identity.TenantSlot), Minute: minute, RPM: tenLim.RPM, TPM: tenLim.TPM})
	}
	if len(ws) == 0 {
		return nil, nil
	}
	got, refused, err := g.cfg.Rates.Admit(ctx, ws)
	if refused != nil {
		reset := time.Unix((minute+1)*60, 0).Sub(now)
		secs := upstream.Seconds(reset)
		what := "requests"
		if refused.RPM == 0 || refused.Requests < refused.RPM {
			what = "tokens"
		}
		return nil, &Refusal{Status: http.StatusTooManyRequests, Code: CodeRateLimitedHere, RetryAfter: secs, Retry: true,
			Header:  rateHeaders(f.req.Protocol, *refused, now, reset),
			Message: fmt.Sprintf("shim: %s per minute of %s used up; retry after %s seconds", what, refused.Scope[:strings.IndexByte(refused.Scope, ':')], secs)}
	}
	if err != nil {
		f.res.Err = err
		return nil, &Refusal{Status: http.StatusInternalServerError, Code: CodeLedgerUnhealthy, Message: "internal error", Retry: true}
	}
	return got, nil
}

// used adds the tokens the answered attempt reported to the request's
// rate windows.
func (g *Gateway) used(ctx context.Context, ws []upstream.RateWindow, f *forwarding) {
	if f.tokens <= 0 {
		return
	}
	if err := g.cfg.Rates.Used(context.WithoutCancel(ctx), ws, f.tokens); err != nil {
		g.cfg.Logger.Error("gateway: rate window tokens not counted", "err", err)
	}
}

// rateHeaders are the rate-limit headers of a refusal in the provider's
// own names: OpenAI's x-ratelimit-*, Anthropic's anthropic-ratelimit-*.
func rateHeaders(p wire.Protocol, w upstream.RateWindow, now time.Time, reset time.Duration) http.Header {
	// name gives the header of a kind ("requests", "tokens") and a field
	// ("limit", "remaining", "reset") in the provider's spelling.
	name := func(kind, field string) string { return "X-Ratelimit-" + field + "-" + kind }
	at := strconv.FormatFloat(reset.Seconds(), 'f', 0, 64) + "s"
	if p == wire.Messages {
		name = func(kind, field string) string { return "Anthropic-Ratelimit-" + kind + "-" + field }
		at = now.Add(reset).UTC().Format(time.RFC3339)
	}
	h := http.Header{}
	for _, k := range []struct {
		kind        string
		limit, used int64
	}{{"Requests", w.RPM, w.Requests}, {"Tokens", w.TPM, w.Tokens}} {
		if k.limit <= 0 {
			continue
		}
		h.Set(name(k.kind, "Limit"), strconv.FormatInt(k.limit, 10))
		h.Set(name(k.kind, "Remaining"), strconv.FormatInt(max(0, k.limit-k.used), 10))
		h.Set(name(k.kind, "Reset"), at)
	}
	return h
}

// HeaderCache says an answer came from the plan's cache ("hit").
const HeaderCache = "X-Caduceus-Cache"

// cacheKey is a request's key in a cache: the sha256 of its wire and its
// canonical body, so key order and white space do not matter.
func cacheKey(p wire.Protocol, body []byte) (string, bool) {
	canon, err := contract.CanonicalJSON(body)
	if err != nil {
		return "", false
	}
	h := sha256.New()
	h.Write([]byte(p))
	h.Write([]byte{0})
	h.Write(canon)
	return hex.EncodeToString(h.Sum(nil)), true
}

// fromCache answers f from its plan's cache when the answer is there and
// fresh (and the client did not send Cache-Control: no-cache): the same
// status, content type and bytes — a stream as the same events, its last
// held for the caller as any stream's is — and reports true. Otherwise it
// notes the key, for the answer to come, and reports false.
func (g *Gateway) fromCache(ctx context.Context, w Writer, f *forwarding) bool {
	c := f.plan.Cache
	if c == nil || g.cfg.Cache == nil || f.open {
		return false
	}
	key, ok := cacheKey(f.req.Protocol, f.body)
	if !ok {
		return false
	}
	f.cacheKey, f.capture = key, c.Bound()
	if strings.Contains(strings.ToLower(f.req.Header.Get("Cache-Control")), "no-cache") {
		return false // bypassed, but the fresh answer is kept
	}
	a, found, err := g.cfg.Cache.CacheGet(ctx, f.scope(), key, g.cfg.Now())
	if err != nil {
		g.cfg.Logger.Warn("gateway: cache not read", "err", err)
		return false
	}
	if !found {
		return false
	}
	hdr := http.Header{"Content-Type": {a.ContentType}, HeaderCache: {"hit"}}
	if a.Final == nil {
		writeAnswer(w, hdr, a.Status, a.Body)
	} else {
		writeHeader(w, hdr, a.Status)
		if w.Hash != nil {
			w.Hash.Write(a.Body)
			w.Hash.Write(a.Final)
		}
		_, _ = w.Write(a.Body)
		if fl, ok := w.ResponseWriter.(http.Flusher); ok {
			fl.Flush()
		}
		f.res.Final = a.Final
	}
	f.res.CacheHit, f.res.Route, f.res.Status = a.Receipt, "cache", a.Status
	return true
}

// keep puts an answered attempt's answer in the plan's cache.
func (g *Gateway) keep(ctx context.Context, f *forwarding, out outcome) {
	ttl, _ := f.plan.Cache.Fresh() // checked by Validate
	a := upstream.CachedAnswer{Receipt: f.req.ID, Status: out.status, ContentType: out.contentType, Body: out.captured, Final: out.final}
	if err := g.cfg.Cache.CachePut(context.WithoutCancel(ctx), f.scope(), f.cacheKey, a, g.cfg.Now().Add(ttl)); err != nil {
		g.cfg.Logger.Warn("gateway: answer not cached", "err", err)
	}
}

// scope is whose cache the request uses.
func (f *forwarding) scope() string {
	if f.req.Scope != "" {
		return f.req.Scope
	}
	return string(f.req.Caller.Identity.TenantSlot)
}
