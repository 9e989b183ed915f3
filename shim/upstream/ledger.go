package upstream

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// CodeBudgetExceeded is the refusal code of a request that cannot reserve
// its maximum cost within a budget.
const CodeBudgetExceeded = "budget_exceeded"

// ErrBudgetExceeded is returned by Ledger.Reserve when the reservation
// would take a key or tenant past a budget. Nothing was reserved.
var ErrBudgetExceeded = errors.New("upstream: budget exceeded")

// Reservation is one attempt's hold on spend, taken before the call.
type Reservation struct {
	// ID is unique per attempt (the receipt id and the attempt number).
	ID       string
	Tenant   contract.TenantSlot
	KeyID    string
	Identity string // provider/model
	Amount   Microdollars
	// KeyLimit and TenantLimit are the limits that bind this attempt (zero: none).
	KeyLimit, TenantLimit Limit
}

// Ticket is what Reserve took for one attempt; Settle and Release close
// it. Only the Ledger that issued it reads its fields beyond the
// Reservation.
type Ticket struct {
	Reservation
	// Day and Month are the periods (2026-11-30, 2026-11) the attempt
	// counts in: those of its reservation, even when it settles later.
	Day, Month string
	// Stored: the reservation is a row of its own in the store (the
	// attempt reserved there, before the call).
	Stored bool
	// Leases names, per running total (key day, key month, tenant day,
	// tenant month), the lease the amount was carved from; "" where the
	// total has no budget and nothing was reserved in it.
	Leases [4]string
	// Estimated, set by the caller before Settle, says the actual cost is
	// an estimate rather than the upstream's usage; the ledger records it
	// with the settlement.
	Estimated bool
}

// Ledger keeps reservations and settlements. Implementations keep every
// budget in one store so several processes share it, and must never accept
// reservations that together exceed a budget, however many run at once.
type Ledger interface {
	// Reserve holds r against the key's and tenant's spend for the
	// current UTC day and month. It returns ErrBudgetExceeded when any
	// bound would be passed (and reserves nothing), or another error when
	// the store failed. A total without a budget needs no reservation:
	// with no budget at all, Reserve may write nothing.
	Reserve(ctx context.Context, r Reservation) (Ticket, error)
	// Settle closes t at actual, the cost of the usage the upstream
	// reported. Settling twice, or after Release, is an error.
	Settle(ctx context.Context, t Ticket, actual Microdollars) error
	// Release cancels t (the attempt failed before it cost anything): its
	// amount stops counting against the budgets.
	Release(ctx context.Context, t Ticket) error
}

// Holds keeps, across processes, the model identities an upstream told to
// wait (429, quota): while held, no route of any plan sends to them.
type Holds interface {
	// Hold holds identity until the given time; a later hold extends it,
	// an earlier one never shortens it.
	Hold(ctx context.Context, identity string, until time.Time) error
	// HeldUntil reports until when identity is held (the zero time when it
	// is not held, or the hold has passed).
	HeldUntil(ctx context.Context, identity string) (time.Time, error)
}

// RouteHealth keeps, across processes, each route's run of failures in a
// row, and whether that run made it unhealthy: the gateway skips an
// unhealthy route of a balanced step while another member is healthy.
type RouteHealth interface {
	// RouteFailed counts one more failure in route's run; once the run
	// reaches threshold, the route is unhealthy until the given time.
	RouteFailed(ctx context.Context, route string, threshold int, until time.Time) error
	// RouteAnswered ends route's run, and any unhealthy spell with it.
	// It should cost nothing when no run is known.
	RouteAnswered(ctx context.Context, route string) error
	// UnhealthyUntil reports until when route is (or, past that time,
	// was last) unhealthy: the zero time when its run has not reached the
	// threshold since it last answered.
	UnhealthyUntil(ctx context.Context, route string) (time.Time, error)
}

// Failure classifies an attempt that did not produce an answer.
type Failure int

// Failures.
const (
	// Definite: the upstream certainly did not run the request —
	// connection refused, a 5xx or 429 status before any byte of body.
	Definite Failure = iota + 1
	// Uncertain: it may have — a timeout after the request was sent, a
	// connection or stream broken before the first byte reached the client.
	Uncertain
)

// MayFailOver is the failover rule: after an attempt failed with f, may the
// request move to the next step? Never once a byte reached the client (the
// answer has begun); never without the caller's own grant for the next
// step's model (granted); after a definite failure when the plan says
// definite or uncertain; after an uncertain one only when it says uncertain
// — a plan's opt-in never stands in for the caller's grant.
func MayFailOver(policy Failover, f Failure, clientSawBytes, granted bool) bool {
	if clientSawBytes || !granted {
		return false
	}
	switch f {
	case Definite:
		return policy == FailoverDefinite || policy == FailoverUncertain
	case Uncertain:
		return policy == FailoverUncertain
	}
	return false
}

// FailureOfStatus classifies an upstream status received before any body
// byte: a 5xx or 429 is a definite failure (the provider says it did not
// run the request); everything else is an answer to pass to the client.
func FailureOfStatus(status int) (Failure, bool) {
	if status == 429 || status >= 500 {
		return Definite, true
	}
	return 0, false
}

// RetryAfter reads a Retry-After header value (delay seconds or an HTTP
// date) relative to now, and falls back to def when it is absent or
// unreadable. The result is capped at a day.
func RetryAfter(v string, now time.Time, def time.Duration) time.Duration {
	if d, ok := ParseRetryAfter(v, now); ok {
		return d
	}
	return min(max(def, 0), 24*time.Hour)
}

// ParseRetryAfter reads a Retry-After header value (delay seconds or an
// HTTP date) relative to now, between zero and a day; false when it is
// absent or unreadable.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	var d time.Duration
	if secs, err := parseSeconds(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if t, err := time.Parse(time.RFC1123, v); err == nil {
		d = t.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), 24*time.Hour), true
}

// Backoff is the hold after the n-th consecutive 429 without Retry-After
// (n from 1): 1 s, doubling with each, at most limit.
func Backoff(n int, limit time.Duration) time.Duration {
	if n < 1 {
		n = 1
	}
	if n > 30 {
		return limit
	}
	return min(time.Second<<(n-1), limit)
}

// Seconds is d as a Retry-After value: whole seconds rounded up, so a
// client that waits that long finds the hold over, and never a second
// more (at least 1).
func Seconds(d time.Duration) string {
	return strconv.FormatInt(max(1, int64((d+time.Second-1)/time.Second)), 10)
}

func parseSeconds(v string) (int64, error) {
	var n int64
	if v == "" || len(v) > 9 {
		return 0, errors.New("not seconds")
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, errors.New("not seconds")
		}
		n = n*10 + int64(v[i]-'0')
	}
	return n, nil
}

// RateWindow is one scope's rate limits for one UTC minute: a key
// ("key:slot-1:3f9a…") or a tenant ("tenant:slot-1").
type RateWindow struct {
	Scope    string
	Minute   int64 // Unix minutes
	RPM, TPM int64 // 0: no bound
	// Requests and Tokens are the window's counts once Admit has counted
	// this request (or, refused, as they stood).
	Requests, Tokens int64
}

// ErrRateLimited is the error of an Admit that a window refused.
var ErrRateLimited = errors.New("upstream: rate limited")

// Rates counts requests and tokens per scope and UTC minute, in the store
// every process shares.
type Rates interface {
	// Admit counts one request in every window, when each has room: fewer
	// requests than its RPM and fewer tokens than its TPM. Otherwise it
	// counts nothing and returns ErrRateLimited with the window that
	// refused (its counts as they stood). The windows come back with
	// their counts.
	Admit(ctx context.Context, ws []RateWindow) ([]RateWindow, *RateWindow, error)
	// Used adds tokens to the windows a request was admitted in.
	Used(ctx context.Context, ws []RateWindow, tokens int64) error
}

// CachedAnswer is an answer a plan's cache keeps: what the client got.
type CachedAnswer struct {
	Receipt     string // the receipt of the request that got it first
	Status      int
	ContentType string
	Body        []byte // a whole answer, or a stream's events but the last
	Final       []byte // a stream's terminal event (nil: not a stream)
}

// Cache keeps answers by scope (a tenant, or a tenant's key) and key, in
// the store every process shares.
type Cache interface {
	// CacheGet returns the fresh answer kept under key (found false when
	// there is none or it expired by now).
	CacheGet(ctx context.Context, scope, key string, now time.Time) (a CachedAnswer, found bool, err error)
	// CachePut keeps a until expires (replacing an older one).
	CachePut(ctx context.Context, scope, key string, a CachedAnswer, expires time.Time) error
}
