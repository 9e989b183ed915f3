package executor

import (
	"strconv"
	"strings"
)

// Directive is one parsed "EXECUTE:" line of a user message:
//
//	EXECUTE: <buy|sell> <SYMBOL> <qty | $notional> [shares|notional]
//	EXECUTE: cancel <order_id>
type Directive struct {
	Side     string
	Symbol   string
	Qty      float64 // shares, when Notional is false
	Notional bool    // the amount was written $N
	Amount   float64 // the dollar amount when Notional
	OrderID  string  // cancel only
}

// ParseDirectives returns every well-formed EXECUTE: directive in a message,
// and a note for each malformed one. The marker is the literal upper-case
// "EXECUTE:"; a directive runs to the end of its line or to ";".
func ParseDirectives(msg string) (ds []Directive, bad []string) {
	for {
		i := strings.Index(msg, "EXECUTE:")
		if i < 0 {
			return ds, bad
		}
		msg = msg[i+len("EXECUTE:"):]
		spec := msg
		if j := strings.IndexAny(spec, "\n;"); j >= 0 {
			spec = spec[:j]
		}
		if d, ok := parseDirective(spec); ok {
			ds = append(ds, d)
		} else {
			bad = append(bad, strings.TrimSpace(spec))
		}
	}
}

func parseDirective(spec string) (Directive, bool) {
	f := strings.Fields(spec)
	if len(f) == 0 {
		return Directive{}, false
	}
	side := strings.ToLower(f[0])
	if side == SideCancel {
		if len(f) != 2 || !orderIDRE.MatchString(f[1]) {
			return Directive{}, false
		}
		return Directive{Side: SideCancel, OrderID: f[1]}, true
	}
	if side != SideBuy && side != SideSell || len(f) < 3 || len(f) > 4 {
		return Directive{}, false
	}
	d := Directive{Side: side, Symbol: strings.ToUpper(f[1])}
	if !symbolRE.MatchString(d.Symbol) {
		return Directive{}, false
	}
	amt, dollars := strings.CutPrefix(f[2], "$")
	n, err := strconv.ParseFloat(strings.ReplaceAll(amt, ",", ""), 64)
	if err != nil || n <= 0 || !finite(n) {
		return Directive{}, false
	}
	if len(f) == 4 {
		switch strings.ToLower(f[3]) {
		case "notional":
			if !dollars {
				return Directive{}, false
			}
		case "shares", "share":
			if dollars {
				return Directive{}, false
			}
		default:
			return Directive{}, false
		}
	}
	if dollars {
		d.Notional, d.Amount = true, n
	} else {
		d.Qty = n
	}
	return d, true
}

// Matches reports whether the directive authorizes the intent exactly: same
// side and symbol, and the same amount compared as numbers (shares against
// qty, $notional against notional_usd), so "1" never matches "10". A cancel
// directive matches a cancel of the same order id.
func (d Directive) Matches(in *Intent) bool {
	if d.Side != in.Side {
		return false
	}
	if d.Side == SideCancel {
		return d.OrderID == in.OrderID
	}
	if d.Symbol != in.Symbol {
		return false
	}
	if in.QuantityType == QuantityNotional {
		return d.Notional && d.Amount == in.NotionalUSD
	}
	return !d.Notional && d.Qty == in.Qty
}
