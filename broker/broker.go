// Package broker is the port between the executor and a brokerage: the
// Broker interface, the values it speaks in, and an Error that carries an
// HTTP-like status so callers can tell a refusal (4xx) from an outage (5xx)
// or a timeout.
//
// Implementations live below it: broker/paper (a deterministic simulator)
// and broker/robinhood (an MCP client of the Robinhood trading server).
package broker

import "context"

// Broker is what the executor needs from a brokerage. Every method returns an
// *Error (or an error wrapping one) on failure; see StatusOf.
type Broker interface {
	// Accounts lists the accounts the credential can see (get_accounts).
	Accounts(ctx context.Context) ([]Account, error)
	// Portfolio returns an account's live values (get_portfolio).
	Portfolio(ctx context.Context, account string) (Portfolio, error)
	// Positions lists an account's equity positions (get_equity_positions).
	Positions(ctx context.Context, account string) ([]Position, error)
	// Quotes returns quotes for the symbols it knows (get_equity_quotes). A
	// symbol without a quote is simply absent from the result.
	Quotes(ctx context.Context, symbols []string) ([]Quote, error)
	// Review previews an order without placing it (review_equity_order).
	Review(ctx context.Context, o OrderRequest) (Review, error)
	// Place submits an order (place_equity_order). A repeat with the same
	// RefID returns the order the first call created (Existing set when the
	// broker can tell): it never doubles.
	Place(ctx context.Context, o OrderRequest) (Order, error)
	// Cancel cancels an open order (cancel_equity_order).
	Cancel(ctx context.Context, account, orderID string) (Order, error)
	// Orders lists an account's equity orders (get_equity_orders).
	Orders(ctx context.Context, account string) ([]Order, error)
	// RealizedPnL returns realized profit and loss over span; the executor
	// asks for span "day" (get_realized_pnl).
	RealizedPnL(ctx context.Context, account, span string) (PnL, error)
}

// Account is one brokerage account.
type Account struct {
	AccountNumber  string `json:"account_number"`
	IsDefault      bool   `json:"is_default"`
	AgenticAllowed bool   `json:"agentic_allowed"`
	OptionLevel    string `json:"option_level"` // "", "option_level_2", "option_level_3"
}

// Portfolio is an account's live values.
type Portfolio struct {
	TotalValue  float64 `json:"total_value"`
	BuyingPower float64 `json:"buying_power"`
	Cash        float64 `json:"cash"`
}

// Position is one equity holding.
type Position struct {
	Symbol                  string  `json:"symbol"`
	Quantity                float64 `json:"quantity"`
	SharesAvailableForSells float64 `json:"shares_available_for_sells"`
}

// Quote is a symbol's current prices.
type Quote struct {
	Symbol         string  `json:"symbol"`
	LastTradePrice float64 `json:"last_trade_price"`
	BidPrice       float64 `json:"bid_price"`
	AskPrice       float64 `json:"ask_price"`
}

// Order sides, types and market hours as the brokers spell them.
const (
	SideBuy  = "buy"
	SideSell = "sell"

	TypeMarket = "market"
	TypeLimit  = "limit"

	RegularHours = "regular_hours"
)

// OrderRequest is the argument set of review_equity_order and
// place_equity_order. Exactly one of Quantity and DollarAmount is set.
type OrderRequest struct {
	AccountNumber string  `json:"account_number"`
	Symbol        string  `json:"symbol"`
	Side          string  `json:"side"`
	Type          string  `json:"type"`
	TimeInForce   string  `json:"time_in_force"`
	MarketHours   string  `json:"market_hours"`
	Quantity      float64 `json:"quantity,omitempty"`
	DollarAmount  float64 `json:"dollar_amount,omitempty"`
	LimitPrice    float64 `json:"limit_price,omitempty"`
	RefID         string  `json:"ref_id,omitempty"` // place only
}

// Alert is one check the broker raised while reviewing an order.
type Alert struct {
	Type    string `json:"type"`
	Message string `json:"message,omitempty"`
}

// Review is the result of review_equity_order.
type Review struct {
	Quote  Quote   `json:"quote"`
	Alerts []Alert `json:"alerts,omitempty"`
}

// Order states the executor distinguishes. Brokers may report others
// (e.g. "confirmed", "unconfirmed", "partially_filled"); Open reports which
// of them can still be cancelled.
const (
	StateQueued    = "queued"
	StateFilled    = "filled"
	StateCancelled = "cancelled"
	StateRejected  = "rejected"
	StateFailed    = "failed"
)

// Order is a placed order.
type Order struct {
	ID             string  `json:"id"`
	RefID          string  `json:"ref_id,omitempty"`
	AccountNumber  string  `json:"account_number"`
	Symbol         string  `json:"symbol"`
	Side           string  `json:"side"`
	Type           string  `json:"type"`
	State          string  `json:"state"`
	Quantity       float64 `json:"quantity,omitempty"`
	DollarAmount   float64 `json:"dollar_amount,omitempty"`
	LimitPrice     float64 `json:"limit_price,omitempty"`
	FilledQuantity float64 `json:"filled_quantity,omitempty"`
	AveragePrice   float64 `json:"average_price,omitempty"`
	// Existing is set by Place when the broker answered with the order an
	// earlier call created under the same RefID instead of placing one
	// (the paper broker says so; a broker whose reply does not say it
	// leaves it false). It is never stored or sent.
	Existing bool `json:"-"`
}

// Open reports whether the order can still be cancelled.
func (o Order) Open() bool {
	switch o.State {
	case StateFilled, StateCancelled, StateRejected, StateFailed:
		return false
	}
	return o.State != ""
}

// PnL is realized profit and loss over a span.
type PnL struct {
	TotalRealizedGain float64 `json:"total_realized_gain"`
}
