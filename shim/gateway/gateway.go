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
//
// A request's way through the package, one file per stage:
//
//   - gateway.go: Forward, the request and its Result;
//   - plan.go: the plan and steps the request may take (route);
//   - cache.go: a plan's cached answer, replayed or kept;
//   - admission.go: rate limits (admit), holds, reservations and their
//     settlement (held, reserve, close);
//   - balance.go: a balanced step's choice of route;
//   - step.go: one step tried, retried, and what follows its failure;
//   - attempt.go: one upstream call (a call value: route, body, price,
//     waits) and its outcome;
//   - answer.go: the upstream's answer passed on, whole or streamed;
//   - translate.go: a step of another wire, carried by its provider's
//     translator.
//
// What differs between upstream kinds (the request and its credential,
// the answer's events, its usage, what a failed status means, the
// translation) is asked of the route's shim/provider.Provider: no file
// here names a kind.
//   - health.go: 429 holds, route health and the routes' check;
//   - models.go: /v1/models, token counts and plain pass-through.
package gateway

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
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

// Request is one LLM request to forward.
type Request struct {
	Protocol wire.Protocol
	Caller   contract.Caller
	// Parsed is the client's request as the shim parsed it, once: its
	// model, stream, token bounds and include_usage. Forward needs it;
	// Pass and the token counts, which send Body as it came, do not.
	Parsed *wire.Request
	// Body is what goes upstream (after any shim), with the positions of
	// its top-level members: a step's edits (its own model,
	// include_usage) splice by them. Header and RawQuery are the
	// client's.
	Body     wire.Body
	Header   http.Header
	RawQuery string
	// ID names the request's reservations: ID-0, ID-1, ... per attempt.
	ID string
	// Method is the upstream request's method ("": POST).
	Method string
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

// PlanName is the name of the plan serving tenant ("" when none does).
func (g *Gateway) PlanName(tenant contract.TenantSlot) string {
	name, _, ok := g.cfg.Upstream.PlanFor(tenant)
	if !ok {
		return ""
	}
	return name
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
	// Filter, when set, rewrites what the client is sent of a successful
	// answer, in the client's wire: the guardrails' redaction.
	Filter AnswerFilter
}

// AnswerFilter rewrites a successful answer on its way to the client (in
// the client's wire, after any translation): a whole answer's body, and a
// stream's events as they pass. Events may keep text back and add events
// of the same wire; it sees the terminal event last and gives back
// whatever it kept before it. One filter serves one request.
type AnswerFilter interface {
	Whole(body []byte) []byte
	Events(evs []wire.SSE) []wire.SSE
}

// filtered is evs through w's Filter, if any.
func (w Writer) filtered(evs []wire.SSE) []wire.SSE {
	if w.Filter == nil {
		return evs
	}
	return w.Filter.Events(evs)
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
