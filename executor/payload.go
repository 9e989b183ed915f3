package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Payload is what a strategist hands the executor. Only Strategy identifies
// anything; Mode and ContextHint are advisory and never trusted.
type Payload struct {
	Strategy    string   `json:"strategy"`
	Mode        string   `json:"mode,omitempty"`
	ContextHint string   `json:"context_hint,omitempty"`
	Intents     []Intent `json:"intents"`
}

// Intent is one order the strategist wants, or a cancel (Side "cancel" with
// OrderID).
type Intent struct {
	Symbol           string          `json:"symbol,omitempty"`
	Side             string          `json:"side"`
	QuantityType     string          `json:"quantity_type,omitempty"`
	Qty              float64         `json:"qty,omitempty"`
	NotionalUSD      float64         `json:"notional_usd,omitempty"`
	OrderType        string          `json:"order_type,omitempty"`
	LimitPrice       float64         `json:"limit_price,omitempty"`
	IntentPrice      float64         `json:"intent_price,omitempty"`
	MaxSlippagePct   float64         `json:"max_slippage_pct,omitempty"`
	TimeInForce      string          `json:"time_in_force,omitempty"`
	Reason           string          `json:"reason,omitempty"`
	ExpiresAt        string          `json:"expires_at,omitempty"`
	AssetClass       string          `json:"asset_class,omitempty"`
	OptionLeg        json.RawMessage `json:"option_leg,omitempty"`
	AllowCapDownsize bool            `json:"allow_cap_downsize,omitempty"`
	OrderID          string          `json:"order_id,omitempty"`

	expires time.Time // parsed ExpiresAt, zero when unset
}

// Values of intent fields.
const (
	SideBuy    = "buy"
	SideSell   = "sell"
	SideCancel = "cancel"

	QuantityShares   = "shares"
	QuantityNotional = "notional"

	AssetEquity   = "equity"
	AssetOptionL2 = "option-l2"

	ModeLive   = "live"
	ModeReview = "review"
)

// Limits on a payload.
const (
	MaxPayloadBytes = 1 << 20
	MaxIntents      = 100
)

var (
	symbolRE   = regexp.MustCompile(`^[A-Z][A-Z0-9.\-]{0,9}$`)
	strategyRE = regexp.MustCompile(`^[A-Za-z0-9_\-.]{1,100}$`)
	orderIDRE  = regexp.MustCompile(`^[A-Za-z0-9_\-]{1,100}$`)
)

var timesInForce = map[string]bool{"gfd": true, "gtc": true, "ioc": true, "fok": true}

// ParsePayload decodes and checks a payload. It returns an invalid
// *contract.Error naming the offending field when the bytes are not a
// payload at all: not JSON, unknown fields, a missing or ill-typed field, an
// intent that cannot be executed as written. It never touches a broker.
//
// The strategy name's path safety is NOT checked here: an unsafe name is a
// pre-flight abort (manifest_path_invalid), a recorded outcome.
func ParsePayload(b []byte) (*Payload, error) {
	if len(b) > MaxPayloadBytes {
		return nil, contract.Invalidf("payload_too_large", "executor: payload is %d bytes, the limit is %d", len(b), MaxPayloadBytes)
	}
	var p Payload
	switch err := contract.DecodeStrict(b, &p); {
	case errors.Is(err, contract.ErrTrailingData):
		return nil, contract.Invalidf("bad_json", "executor: payload has data after the JSON object")
	case err != nil:
		return nil, decodeError(err)
	}
	if p.Mode != "" && p.Mode != ModeLive && p.Mode != ModeReview {
		return nil, contract.FieldError("/mode", "bad_value", "executor: mode %q is not live or review", p.Mode)
	}
	if p.Intents == nil {
		return nil, contract.FieldError("/intents", "missing_field", "executor: intents is required (an array, may be empty)")
	}
	if len(p.Intents) > MaxIntents {
		return nil, contract.FieldError("/intents", "too_many", "executor: %d intents, the limit is %d", len(p.Intents), MaxIntents)
	}
	for i := range p.Intents {
		if err := p.Intents[i].check(); err != nil {
			err.Field = fmt.Sprintf("/intents/%d%s", i, err.Field)
			err.Message = fmt.Sprintf("executor: intents[%d]: %s", i, err.Message)
			return nil, err
		}
	}
	return &p, nil
}

func decodeError(err error) *contract.Error {
	if te, ok := err.(*json.UnmarshalTypeError); ok {
		f := "/" + strings.ReplaceAll(te.Field, ".", "/")
		return contract.FieldError(f, "bad_type", "executor: payload field %q must be %s, not %s", te.Field, te.Type, te.Value)
	}
	return &contract.Error{Kind: contract.KindInvalid, Code: "bad_json", Message: "executor: payload is not a valid JSON payload object: " + err.Error()}
}

func fieldErr(field, code, format string, args ...any) *contract.Error {
	return contract.FieldError(field, code, format, args...)
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// check validates one intent in place (filling the defaults asset_class
// "equity" and time_in_force "gfd" when omitted).
func (in *Intent) check() *contract.Error {
	if !finite(in.Qty, in.NotionalUSD, in.LimitPrice, in.IntentPrice, in.MaxSlippagePct) {
		return fieldErr("", "bad_number", "numbers must be finite")
	}
	switch in.Side {
	case SideCancel:
		if !orderIDRE.MatchString(in.OrderID) {
			return fieldErr("/order_id", "missing_field", "a cancel needs an order_id (letters, digits, - and _)")
		}
		if in.Symbol != "" && !symbolRE.MatchString(in.Symbol) {
			return fieldErr("/symbol", "bad_value", "symbol %q is not an upper-case ticker", in.Symbol)
		}
		return nil
	case SideBuy, SideSell:
	case "":
		return fieldErr("/side", "missing_field", "side is required (buy, sell or cancel)")
	default:
		return fieldErr("/side", "bad_value", "side %q is not buy, sell or cancel", in.Side)
	}
	if in.OrderID != "" {
		return fieldErr("/order_id", "bad_value", "order_id is only for side cancel")
	}
	if !symbolRE.MatchString(in.Symbol) {
		return fieldErr("/symbol", "bad_value", "symbol %q is not an upper-case ticker", in.Symbol)
	}
	switch in.AssetClass {
	case "":
		in.AssetClass = AssetEquity
	case AssetEquity, AssetOptionL2:
	default:
		return fieldErr("/asset_class", "bad_value", "asset_class %q is not equity or option-l2", in.AssetClass)
	}
	switch in.QuantityType {
	case QuantityShares:
		if in.Qty <= 0 {
			return fieldErr("/qty", "bad_value", "qty must be > 0 for quantity_type shares")
		}
	case QuantityNotional:
		if in.NotionalUSD <= 0 {
			return fieldErr("/notional_usd", "bad_value", "notional_usd must be > 0 for quantity_type notional")
		}
	case "":
		return fieldErr("/quantity_type", "missing_field", "quantity_type is required (shares or notional)")
	default:
		return fieldErr("/quantity_type", "bad_value", "quantity_type %q is not shares or notional", in.QuantityType)
	}
	switch in.OrderType {
	case "market":
	case "limit":
		if in.LimitPrice <= 0 {
			return fieldErr("/limit_price", "bad_value", "a limit order needs limit_price > 0")
		}
	case "":
		return fieldErr("/order_type", "missing_field", "order_type is required (market or limit)")
	default:
		return fieldErr("/order_type", "bad_value", "order_type %q is not market or limit", in.OrderType)
	}
	if in.IntentPrice <= 0 {
		return fieldErr("/intent_price", "bad_value", "intent_price must be > 0 (slippage and drift are measured from it)")
	}
	if in.MaxSlippagePct < 0 {
		return fieldErr("/max_slippage_pct", "bad_value", "max_slippage_pct must be >= 0")
	}
	switch {
	case in.TimeInForce == "":
		in.TimeInForce = "gfd"
	case !timesInForce[in.TimeInForce]:
		return fieldErr("/time_in_force", "bad_value", "time_in_force %q is not gfd, gtc, ioc or fok", in.TimeInForce)
	}
	if in.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, in.ExpiresAt)
		if err != nil {
			return fieldErr("/expires_at", "bad_value", "expires_at %q is not RFC 3339", in.ExpiresAt)
		}
		in.expires = t
	}
	return nil
}
