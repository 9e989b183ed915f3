package executor

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/broker"
)

// alertTypes maps the broker's review alert types to whether they block
// placement. A type not in the table blocks (fail closed); a type or message
// containing one of the seed's keywords blocks whatever the table says.
var alertTypes = map[string]bool{
	"PATTERN_DAY_TRADE_PROTECTION": true,
	"PATTERN_DAY_TRADER":           true,
	"PRICE_COLLAR":                 true,
	"TRADING_HALT":                 true,
	"HALTED":                       true,
	"RESTRICTED_SECURITY":          true,
	"ACCOUNT_RESTRICTED":           true,
	"MARGIN_CALL":                  true,
	"INSUFFICIENT_MARGIN":          true,
	"UNSUPPORTED_SECURITY":         true,
	"UNSUPPORTED_ORDER_TYPE":       true,
	"INSUFFICIENT_BUYING_POWER":    true,
	"FRACTIONAL_SHARES_NOTICE":     false, // informational
	"MARKET_ORDER_COLLARED_NOTICE": false, // informational (no "price collar" wording)
}

// anomalyKeywords are the seed's words (3.4), matched case-insensitively
// against the alert type and message.
var anomalyKeywords = []string{"price collar", "restriction", "margin", "pdt", "halt", "unsupported"}

// Blocking reports whether a review alert blocks placement.
func Blocking(a broker.Alert) bool {
	block, known := alertTypes[strings.ToUpper(a.Type)]
	if !known || block {
		return true
	}
	text := strings.ToLower(a.Type + " " + a.Message)
	text = strings.ReplaceAll(text, "_", " ")
	for _, k := range anomalyKeywords {
		if strings.Contains(text, k) {
			return true
		}
	}
	return false
}

func money(x float64) string { return "$" + strconv.FormatFloat(x, 'f', 2, 64) }

// pyFloat renders a float the way the seed's Python f-string would.
func pyFloat(x float64) string {
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// orderRequest is phase 3.1.
func (t *tick) orderRequest(in *Intent) broker.OrderRequest {
	o := broker.OrderRequest{
		AccountNumber: t.acct.AccountNumber,
		Symbol:        in.Symbol,
		Side:          in.Side,
		Type:          in.OrderType,
		TimeInForce:   in.TimeInForce,
		MarketHours:   broker.RegularHours, // never extended
	}
	if in.QuantityType == QuantityShares {
		o.Quantity = in.Qty
	} else {
		o.DollarAmount = in.NotionalUSD
		o.Type = broker.TypeMarket // dollar_amount requires type=market
	}
	if o.Type == broker.TypeLimit {
		o.LimitPrice = in.LimitPrice
	}
	return o
}

// anomaly tags the action review_anomaly and, on cron ticks, counts it.
func (t *tick) anomaly(ctx context.Context, a *Action) error {
	a.Status = StatusReviewAnomaly
	if t.req.Context != ContextCron {
		return nil // chat and analyst ticks only read the counter
	}
	n, err := t.e.Store.AddAnomaly(ctx, t.tenant(), t.acct.AccountNumber, t.day)
	if err != nil {
		return fmt.Errorf("executor: count anomaly: %w", err)
	}
	t.anomalies = n
	return nil
}

// reviewAndPlace is phases 3 and 4 for one candidate.
func (t *tick) reviewAndPlace(ctx context.Context, c *candidate) error {
	in, a := &c.in, c.act
	args := t.orderRequest(in)

	// 3.2 Review (one retry on 5xx; a refusal is an anomaly, not placed).
	rev, err := retry(func() (broker.Review, error) { return t.b.review(ctx, args) })
	if err != nil {
		kind := "REVIEW_REFUSED"
		if broker.Retryable(err) {
			kind = "REVIEW_UNAVAILABLE"
		}
		a.Alerts = []broker.Alert{{Type: kind, Message: err.Error()}}
		a.Reason = "review failed: " + err.Error()
		return t.anomaly(ctx, a)
	}
	a.Alerts = rev.Alerts
	price := rev.Quote.AskPrice
	if in.Side == SideSell {
		price = rev.Quote.BidPrice
	}
	if price <= 0 || !finite(price) {
		a.Alerts = append(a.Alerts, broker.Alert{Type: "NO_REVIEW_QUOTE", Message: "review returned no " + in.Side + " price"})
		a.Reason = "review returned no usable quote"
		return t.anomaly(ctx, a)
	}
	a.ReviewPrice = price

	// 3.3 Slippage, two-sided.
	slip := math.Abs(price-in.IntentPrice) / in.IntentPrice * 100
	a.SlippagePct = &slip
	if slip > in.MaxSlippagePct {
		a.Status = StatusSlippageAborted
		a.Reason = fmt.Sprintf("realized %.2f vs intent %.2f = %.2f%% (cap %s%%)", price, in.IntentPrice, slip, pyFloat(in.MaxSlippagePct))
		return nil
	}

	// 3.4 Anomalies.
	for _, al := range rev.Alerts {
		if Blocking(al) {
			a.Reason = "review alert " + al.Type
			return t.anomaly(ctx, a)
		}
	}

	// 3.5 Intent drift (SOUL 1% rule).
	var final, original float64
	if in.QuantityType == QuantityShares {
		final, original = in.Qty*price, a.OriginalQty*in.IntentPrice
	} else {
		final, original = in.NotionalUSD, a.OriginalNotional
	}
	if reason, ok := driftCheck(final, original, in.AllowCapDownsize, a); !ok {
		a.Status, a.Reason = StatusIntentDriftAborted, reason
		return nil
	}

	// 4 Place, only where the routing table says yes.
	if !t.routes(in) {
		a.Status = StatusReviewed
		t.explainNotRouted(in, a)
		return nil
	}
	if t.anomalies >= AnomalyHaltThreshold {
		a.Status, a.Reason = StatusReviewed, ReasonAnomalyHalt
		a.Notes = append(a.Notes, fmt.Sprintf("%d review anomalies today (%s New York): placement halted until midnight", t.anomalies, t.day))
		return nil
	}
	t.place(ctx, args, a)
	return nil
}

// driftCheck is phase 3.5. It returns the abort reason and false when the
// drift is not allowed.
func driftCheck(final, original float64, consent bool, a *Action) (string, bool) {
	if original == 0 {
		return ReasonOriginalNotionalZero, false
	}
	drift := math.Abs(final-original) / original * 100
	a.DriftPct = &drift
	if drift <= 1.0 {
		return "", true
	}
	if consent && final < original {
		a.Notes = append(a.Notes, fmt.Sprintf("drift_within_downsize_consent: %.2f%%", drift))
		return "", true
	}
	return fmt.Sprintf("drift %.2f%% > 1%% (original=$%.2f, final=$%.2f)", drift, original, final), false
}

func (t *tick) explainNotRouted(in *Intent, a *Action) {
	switch {
	case t.m.Strategist.Mode != ModeLive:
		a.Notes = append(a.Notes, "manifest mode "+t.m.Strategist.Mode+": review only")
	case t.req.Context == ContextClaudeCode:
		t.heldByContext++
		a.Notes = append(a.Notes, "claude-code context never places")
	case t.req.Context == ContextChat:
		t.heldByContext++
		a.Reason = ReasonExecuteMismatch
		a.Notes = append(a.Notes, "chat places only when the latest message says exactly: EXECUTE: "+directiveFor(in))
	}
}

// directiveFor spells the EXECUTE: directive that would authorize in.
func directiveFor(in *Intent) string {
	if in.Side == SideCancel {
		return "cancel " + in.OrderID
	}
	amt := strconv.FormatFloat(in.Qty, 'f', -1, 64)
	if in.QuantityType == QuantityNotional {
		amt = "$" + strconv.FormatFloat(in.NotionalUSD, 'f', -1, 64)
	}
	return in.Side + " " + in.Symbol + " " + amt
}

// place is phase 4: one retry of a 5xx or timed-out placement with the SAME
// ref_id, so the broker can never fill the order twice; after a timeout
// whose retry also failed, the account's orders are searched for the ref_id.
//
// An order the broker already held for the ref_id is never reported placed:
// a run that took over a keyed tick's claim first looks its ref_ids up in
// the account's orders (the first run may have placed them), and a first
// attempt the broker answers with an existing order (Order.Existing) is
// already_placed. A retry answered with an existing order is placed: the
// first attempt of this placement created it.
func (t *tick) place(ctx context.Context, args broker.OrderRequest, a *Action) {
	args.RefID = t.refFor(a.IntentIndex)
	a.RefID = args.RefID
	if t.refsReused {
		if o, ok := t.placedEarlier(ctx, args); ok {
			t.alreadyPlaced(a, o, "an earlier run of idempotency key "+t.req.IdempotencyKey+" placed it; found in the account's orders")
			return
		}
	}
	timedOut := false
	ord, err := t.b.place(ctx, args)
	if err == nil && ord.Existing {
		t.alreadyPlaced(a, ord, "the broker answered with the order it already held for this ref_id")
		return
	}
	if err != nil && broker.Retryable(err) {
		timedOut = broker.IsTimeout(err)
		ord, err = t.b.place(ctx, args)
		timedOut = timedOut || broker.IsTimeout(err)
		if err == nil && ord.Existing {
			a.Notes = append(a.Notes, "placement retried; the broker answered with the order the first attempt created")
		}
	}
	if err != nil && timedOut {
		os, lerr := t.b.orders(ctx, args.AccountNumber)
		if lerr != nil {
			a.Notes = append(a.Notes, "placement timed out and the order lookup failed: "+lerr.Error())
		}
		if lerr == nil {
			for _, o := range os {
				if o.RefID == args.RefID {
					ord, err = o, nil
					a.Notes = append(a.Notes, "placement timed out; order found by ref_id")
					break
				}
			}
		}
	}
	if err != nil {
		a.Status = StatusPlaceFailed
		a.Reason = err.Error()
		return
	}
	a.Status = StatusPlaced
	id := ord.ID
	a.OrderID = &id
	a.OrderState = ord.State
}

// placedEarlier looks args.RefID up in the account's orders (read once per
// tick, with one retry on 5xx). A failed read is noted and answers false:
// the placement goes ahead, and the broker's ref_id duplicate search
// still keeps it from doubling.
func (t *tick) placedEarlier(ctx context.Context, args broker.OrderRequest) (broker.Order, bool) {
	if !t.refOrdersLoaded {
		os, err := retry(func() ([]broker.Order, error) { return t.b.orders(ctx, args.AccountNumber) })
		if err != nil {
			t.note("ref_ids reused from an earlier run of idempotency key %s; the order lookup failed: %v", t.req.IdempotencyKey, err)
		}
		t.refOrders, t.refOrdersLoaded = os, true
	}
	for _, o := range t.refOrders {
		if o.RefID == args.RefID && o.RefID != "" {
			return o, true
		}
	}
	return broker.Order{}, false
}

// alreadyPlaced reports an order the broker held for the action's ref_id
// before this run placed anything under it.
func (t *tick) alreadyPlaced(a *Action, o broker.Order, why string) {
	a.Status, a.Reason = StatusAlreadyPlaced, ReasonRefIDExists
	id := o.ID
	a.OrderID = &id
	a.OrderState = o.State
	a.Notes = append(a.Notes, "not placed by this tick: "+why)
}

// cancel handles one cancel intent: it skips every sizing check and is sent
// only when the order exists in the account, is still open, and the routing
// table allows a mutation.
func (t *tick) cancel(ctx context.Context, i int) Action {
	in := &t.p.Intents[i]
	a := Action{IntentIndex: i, Symbol: in.Symbol, Side: SideCancel}
	id := in.OrderID
	a.OrderID = &id
	if !t.ordersLoaded {
		os, err := retry(func() ([]broker.Order, error) { return t.b.orders(ctx, t.acct.AccountNumber) })
		if err != nil {
			a.Status, a.Reason = StatusCancelFailed, "get_equity_orders failed: "+err.Error()
			return a
		}
		t.orderList, t.ordersLoaded = os, true
	}
	var found *broker.Order
	for j := range t.orderList {
		if t.orderList[j].ID == in.OrderID && t.orderList[j].AccountNumber == t.acct.AccountNumber {
			found = &t.orderList[j]
		}
	}
	if found == nil {
		a.Status, a.Reason = StatusSkipped, ReasonOrderNotFound
		return a
	}
	if a.Symbol == "" {
		a.Symbol = found.Symbol
	} else if a.Symbol != found.Symbol {
		a.Status, a.Reason = StatusSkipped, ReasonOrderNotFound
		a.Notes = append(a.Notes, "order "+found.ID+" is for "+found.Symbol+", not "+a.Symbol)
		return a
	}
	if !found.Open() {
		a.Status, a.Reason = StatusSkipped, ReasonOrderNotOpen
		a.OrderState = found.State
		return a
	}
	if !t.routes(in) {
		a.Status = StatusReviewed
		t.explainNotRouted(in, &a)
		return a
	}
	ord, err := retry(func() (broker.Order, error) { return t.b.cancel(ctx, t.acct.AccountNumber, in.OrderID) })
	if err != nil {
		a.Status, a.Reason = StatusCancelFailed, err.Error()
		return a
	}
	a.Status, a.OrderState = StatusCancelled, ord.State
	return a
}
