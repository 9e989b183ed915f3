package executor

import (
	"context"
	"math"
	"slices"
)

// candidate is an intent that survived phase 2, on its way to review.
type candidate struct {
	in       Intent // the working copy (qty or notional may be trimmed)
	act      *Action
	price    float64 // live last-trade price
	notional float64 // post-cap notional at the live price
}

// run is phases 2-4 for a tick that passed pre-flight.
func (t *tick) run(ctx context.Context) error {
	cands, cancels := t.validate()
	for _, c := range cands {
		if err := t.reviewAndPlace(ctx, c); err != nil {
			t.actions = append(t.actions, *c.act)
			sortActions(t.actions)
			t.env.Actions = t.actions
			return err
		}
		t.actions = append(t.actions, *c.act)
	}
	for _, i := range cancels {
		t.actions = append(t.actions, t.cancel(ctx, i))
	}
	sortActions(t.actions)
	if t.actions == nil {
		t.actions = []Action{}
	}
	t.env.Actions = t.actions
	return nil
}

func newAction(i int, in *Intent) *Action {
	a := &Action{IntentIndex: i, Symbol: in.Symbol, Side: in.Side, QuantityType: in.QuantityType}
	if in.QuantityType == QuantityShares {
		a.Qty = in.Qty
	} else {
		a.NotionalUSD = in.NotionalUSD
	}
	return a
}

func (t *tick) skip(a *Action, reason string) {
	a.Status, a.Reason = StatusSkipped, reason
	t.actions = append(t.actions, *a)
}

// validate is phase 2 (2.0-2.7), plus the breaker and no-buying-power drops
// that pre-flight decided: each intent passes the rules below in the seed's
// order, one function each; the first that names a reason skips it. It
// returns the surviving candidates in order and the indexes of cancel
// intents.
func (t *tick) validate() (cands []*candidate, cancels []int) {
	p := t.newPhase2()
	rules := []func(*candidate) string{
		p.duplicateSymbol, // 2.0
		p.breaker,         // 1.6
		p.noBuyingPower,   // 1.2
		p.assetClass,      // 2.1
		p.allowlist,       // 2.2
		p.sellableShares,  // 2.3
		p.perNameCap,      // 2.4
		p.concurrentCap,   // 2.5
		p.expiry,          // 2.6
		p.buyingPower,     // 2.7
	}
	for i := range t.p.Intents {
		in := t.p.Intents[i] // a copy: the payload is never modified
		if in.Side == SideCancel {
			if p.noBP { // 1.2: every action, not only those that size
				a := &Action{IntentIndex: i, Symbol: in.Symbol, Side: SideCancel}
				id := in.OrderID
				a.OrderID = &id
				t.skip(a, ReasonNoBuyingPower)
				continue
			}
			cancels = append(cancels, i)
			continue
		}
		c := &candidate{in: in, act: newAction(i, &in)}
		skipped := false
		for _, rule := range rules {
			if reason := rule(c); reason != "" {
				t.skip(c.act, reason)
				skipped = true
				break
			}
		}
		if !skipped {
			p.held[c.in.Symbol] = true
			cands = append(cands, c)
		}
	}
	return cands, cancels
}

// phase2 is what the rules of phase 2 keep across a tick's intents.
type phase2 struct {
	t         *tick
	s         *Strategist
	seen      map[string]int  // symbol: index of its first intent
	held      map[string]bool // symbols held or taken by an earlier candidate
	running   float64         // the tick's buys so far, in dollars
	exhausted bool            // buying power ran out at an earlier buy
	noBP      bool            // the portfolio has nothing to buy with
	capUSD    float64         // the per-name cap
}

func (t *tick) newPhase2() *phase2 {
	s := &t.m.Strategist
	p := &phase2{t: t, s: s, seen: map[string]int{}, held: map[string]bool{},
		noBP:   t.port.TotalValue <= 0 || t.port.BuyingPower <= 0 || t.port.Cash <= 0,
		capUSD: t.port.BuyingPower * s.MaxPositionPct / 100.0}
	for sym := range t.positions {
		p.held[sym] = true
	}
	return p
}

// duplicateSymbol is 2.0, the duplicate-symbol guard: the first wins.
func (p *phase2) duplicateSymbol(c *candidate) string {
	if first, dup := p.seen[c.in.Symbol]; dup {
		c.act.FirstSeenAtIndex = &first
		return ReasonDuplicateSymbol
	}
	p.seen[c.in.Symbol] = c.act.IntentIndex
	return ""
}

// breaker applies 1.6's tripped breaker: buys are dropped, sells (closes)
// go on.
func (p *phase2) breaker(c *candidate) string {
	if c.in.Side == SideBuy && p.t.env.CircuitBreakerTripped {
		return ReasonCircuitBreaker
	}
	return ""
}

// noBuyingPower applies 1.2's portfolio: with no buying power the tick
// proceeds but every action is skipped (cancels too: validate skips them).
func (p *phase2) noBuyingPower(c *candidate) string {
	if p.noBP {
		return ReasonNoBuyingPower
	}
	return ""
}

// assetClass is 2.1: options are not traded here (and belong to the
// options-trader profile).
func (p *phase2) assetClass(c *candidate) string {
	if c.in.AssetClass != AssetOptionL2 {
		return ""
	}
	if slices.Contains(p.s.ProfileCompatibility, "options-trader") && p.t.req.Profile == "options-trader" {
		return ReasonOptionsUnsupported
	}
	return ReasonOptionsInWrongProfile
}

// allowlist is 2.2: the symbol is on the manifest's allowlist.
func (p *phase2) allowlist(c *candidate) string {
	if !slices.Contains(p.s.Allowlist, c.in.Symbol) {
		return ReasonOffAllowlist
	}
	return ""
}

// sellableShares is 2.3, the position constraint: a sell needs that many
// shares available for sells.
func (p *phase2) sellableShares(c *candidate) string {
	in := &c.in
	if in.Side != SideSell {
		return ""
	}
	pos, ok := p.t.positions[in.Symbol]
	need := in.Qty
	if q, quoted := p.t.quotes[in.Symbol]; in.QuantityType == QuantityNotional && quoted {
		need = in.NotionalUSD / q.LastTradePrice
	}
	if !ok || pos.SharesAvailableForSells < need {
		return ReasonNoSellableShares
	}
	return ""
}

// perNameCap is 2.4: the intent is priced at the live quote (none:
// skipped), and a buy over max_position_pct of buying power is trimmed to
// it (to nothing: skipped); a sell reduces the position.
func (p *phase2) perNameCap(c *candidate) string {
	in, a := &c.in, c.act
	q, quoted := p.t.quotes[in.Symbol]
	if !quoted {
		return ReasonQuoteUnavailable
	}
	a.OriginalQty, a.OriginalNotional = in.Qty, in.NotionalUSD
	c.price = q.LastTradePrice
	c.notional = in.NotionalUSD
	if in.QuantityType == QuantityShares {
		c.notional = in.Qty * c.price
	}
	if in.Side != SideBuy || c.notional <= p.capUSD {
		return ""
	}
	if in.QuantityType == QuantityShares {
		in.Qty = math.Floor(p.capUSD / c.price)
		a.Qty = in.Qty
		if in.Qty == 0 {
			return ReasonBelowMinSizeAfterCap
		}
		c.notional = in.Qty * c.price
	} else {
		in.NotionalUSD = p.capUSD
		a.NotionalUSD = p.capUSD
		c.notional = p.capUSD
	}
	a.Notes = append(a.Notes, "trimmed to max_position_pct cap "+money(p.capUSD))
	return ""
}

// concurrentCap is 2.5: a new name may not take the positions over
// max_concurrent_positions.
func (p *phase2) concurrentCap(c *candidate) string {
	if !p.held[c.in.Symbol] && len(p.held)+1 > p.s.MaxConcurrentPositions {
		return ReasonConcurrentCap
	}
	return ""
}

// expiry is 2.6: an intent past its expiry is not acted on.
func (p *phase2) expiry(c *candidate) string {
	if !c.in.expires.IsZero() && p.t.now.After(c.in.expires) {
		return ReasonExpired
	}
	return ""
}

// buyingPower is 2.7: the tick's buys, in order, fit the buying power; from
// the first that does not, every later buy is skipped too.
func (p *phase2) buyingPower(c *candidate) string {
	if c.in.Side != SideBuy {
		return ""
	}
	if !p.exhausted {
		p.running += c.notional
		p.exhausted = p.running > p.t.port.BuyingPower
	}
	if p.exhausted {
		return ReasonBuyingPowerExhausted
	}
	return ""
}
