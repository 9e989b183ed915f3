package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

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

	keyLim, tenLim := f.keyLim, f.tenLim
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
	keyLim, tenLim := f.keyLim, f.tenLim
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
