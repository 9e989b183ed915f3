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
// that pre-flight decided. It returns the surviving candidates in order and
// the indexes of cancel intents.
func (t *tick) validate() (cands []*candidate, cancels []int) {
	s := &t.m.Strategist
	seen := map[string]int{}
	held := map[string]bool{}
	for sym := range t.positions {
		held[sym] = true
	}
	var running float64
	exhausted := false
	noBP := t.port.TotalValue <= 0 || t.port.BuyingPower <= 0 || t.port.Cash <= 0
	capUSD := t.port.BuyingPower * s.MaxPositionPct / 100.0

	for i := range t.p.Intents {
		in := t.p.Intents[i] // a copy: the payload is never modified
		if in.Side == SideCancel {
			cancels = append(cancels, i)
			continue
		}
		a := newAction(i, &in)
		// 2.0 Duplicate-symbol guard, first wins.
		if first, dup := seen[in.Symbol]; dup {
			a.FirstSeenAtIndex = &first
			t.skip(a, ReasonDuplicateSymbol)
			continue
		}
		seen[in.Symbol] = i
		// 1.6 breaker: buys are dropped, sells (closes) go on.
		if in.Side == SideBuy && t.env.CircuitBreakerTripped {
			t.skip(a, ReasonCircuitBreaker)
			continue
		}
		// 1.2 no buying power: nothing can be sized.
		if in.Side == SideBuy && noBP {
			t.skip(a, ReasonNoBuyingPower)
			continue
		}
		// 2.1 Asset class.
		if in.AssetClass == AssetOptionL2 {
			if slices.Contains(s.ProfileCompatibility, "options-trader") && t.req.Profile == "options-trader" {
				t.skip(a, ReasonOptionsUnsupported)
			} else {
				t.skip(a, ReasonOptionsInWrongProfile)
			}
			continue
		}
		// 2.2 Allowlist.
		if !slices.Contains(s.Allowlist, in.Symbol) {
			t.skip(a, ReasonOffAllowlist)
			continue
		}
		q, quoted := t.quotes[in.Symbol]
		// 2.3 Position constraint for sells.
		if in.Side == SideSell {
			p := t.positions[in.Symbol]
			need := in.Qty
			if in.QuantityType == QuantityNotional && quoted {
				need = in.NotionalUSD / q.LastTradePrice
			}
			if _, ok := t.positions[in.Symbol]; !ok || p.SharesAvailableForSells < need {
				t.skip(a, ReasonNoSellableShares)
				continue
			}
		}
		// 2.4 Per-name cap (buys; a sell reduces the position).
		if !quoted {
			t.skip(a, ReasonQuoteUnavailable)
			continue
		}
		a.OriginalQty, a.OriginalNotional = in.Qty, in.NotionalUSD
		live := q.LastTradePrice
		notional := in.NotionalUSD
		if in.QuantityType == QuantityShares {
			notional = in.Qty * live
		}
		if in.Side == SideBuy && notional > capUSD {
			if in.QuantityType == QuantityShares {
				in.Qty = math.Floor(capUSD / live)
				a.Qty = in.Qty
				if in.Qty == 0 {
					t.skip(a, ReasonBelowMinSizeAfterCap)
					continue
				}
				notional = in.Qty * live
			} else {
				in.NotionalUSD = capUSD
				a.NotionalUSD = capUSD
				notional = capUSD
			}
			a.Notes = append(a.Notes, "trimmed to max_position_pct cap "+money(capUSD))
		}
		// 2.5 Concurrent positions.
		if !held[in.Symbol] && len(held)+1 > s.MaxConcurrentPositions {
			t.skip(a, ReasonConcurrentCap)
			continue
		}
		// 2.6 Expiry.
		if !in.expires.IsZero() && t.now.After(in.expires) {
			t.skip(a, ReasonExpired)
			continue
		}
		// 2.7 Buying power across the tick's buys.
		if in.Side == SideBuy {
			if !exhausted {
				running += notional
				exhausted = running > t.port.BuyingPower
			}
			if exhausted {
				t.skip(a, ReasonBuyingPowerExhausted)
				continue
			}
		}
		held[in.Symbol] = true
		cands = append(cands, &candidate{in: in, act: a, price: live, notional: notional})
	}
	return cands, cancels
}
