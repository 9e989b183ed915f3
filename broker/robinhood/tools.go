package robinhood

import (
	"context"
	"encoding/json"

	"github.com/caduceus-dev/caduceus/broker"
)

type account struct {
	AccountNumber  string `json:"account_number"`
	IsDefault      flag   `json:"is_default"`
	AgenticAllowed flag   `json:"agentic_allowed"`
	OptionLevel    string `json:"option_level"`
}

// Accounts implements broker.Broker.
func (c *Client) Accounts(ctx context.Context) ([]broker.Account, error) {
	const tool = "get_accounts"
	as, err := callList[account](ctx, c, tool, map[string]any{}, "accounts")
	if err != nil {
		return nil, err
	}
	out := make([]broker.Account, 0, len(as))
	for _, a := range as {
		out = append(out, broker.Account{AccountNumber: a.AccountNumber, IsDefault: bool(a.IsDefault), AgenticAllowed: bool(a.AgenticAllowed), OptionLevel: a.OptionLevel})
	}
	return out, nil
}

// buyingPower is either a bare decimal or {"buying_power": decimal}.
type buyingPower dec

func (b *buyingPower) UnmarshalJSON(raw []byte) error {
	var obj struct {
		BuyingPower dec `json:"buying_power"`
	}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &obj); err != nil {
			return err
		}
		*b = buyingPower(obj.BuyingPower)
		return nil
	}
	return (*dec)(b).UnmarshalJSON(raw)
}

// Portfolio implements broker.Broker.
func (c *Client) Portfolio(ctx context.Context, acct string) (broker.Portfolio, error) {
	const tool = "get_portfolio"
	p, err := callDecode[struct {
		TotalValue  *dec        `json:"total_value"`
		Equity      dec         `json:"equity"`
		BuyingPower buyingPower `json:"buying_power"`
		Cash        dec         `json:"cash"`
	}](ctx, c, tool, map[string]any{"account_number": acct})
	if err != nil {
		return broker.Portfolio{}, err
	}
	total := p.Equity
	if p.TotalValue != nil {
		total = *p.TotalValue
	}
	return broker.Portfolio{TotalValue: float64(total), BuyingPower: float64(p.BuyingPower), Cash: float64(p.Cash)}, nil
}

// Positions implements broker.Broker.
func (c *Client) Positions(ctx context.Context, acct string) ([]broker.Position, error) {
	const tool = "get_equity_positions"
	ps, err := callList[struct {
		Symbol    string `json:"symbol"`
		Quantity  dec    `json:"quantity"`
		Available dec    `json:"shares_available_for_sells"`
	}](ctx, c, tool, map[string]any{"account_number": acct}, "positions")
	if err != nil {
		return nil, err
	}
	out := make([]broker.Position, 0, len(ps))
	for _, p := range ps {
		out = append(out, broker.Position{Symbol: p.Symbol, Quantity: float64(p.Quantity), SharesAvailableForSells: float64(p.Available)})
	}
	return out, nil
}

type quote struct {
	Symbol         string `json:"symbol"`
	LastTradePrice dec    `json:"last_trade_price"`
	BidPrice       dec    `json:"bid_price"`
	AskPrice       dec    `json:"ask_price"`
}

func (q quote) port() broker.Quote {
	return broker.Quote{Symbol: q.Symbol, LastTradePrice: float64(q.LastTradePrice), BidPrice: float64(q.BidPrice), AskPrice: float64(q.AskPrice)}
}

// Quotes implements broker.Broker.
func (c *Client) Quotes(ctx context.Context, symbols []string) ([]broker.Quote, error) {
	const tool = "get_equity_quotes"
	qs, err := callList[*quote](ctx, c, tool, map[string]any{"symbols": symbols}, "quotes")
	if err != nil {
		return nil, err
	}
	out := make([]broker.Quote, 0, len(qs))
	for _, q := range qs {
		if q != nil && q.Symbol != "" { // the server sends null for an unknown symbol
			out = append(out, q.port())
		}
	}
	return out, nil
}

func orderArgs(o broker.OrderRequest) map[string]any {
	args := map[string]any{
		"account_number": o.AccountNumber,
		"symbol":         o.Symbol,
		"side":           o.Side,
		"type":           o.Type,
		"time_in_force":  o.TimeInForce,
		"market_hours":   o.MarketHours,
	}
	if o.Quantity > 0 {
		args["quantity"] = decimal(o.Quantity)
	}
	if o.DollarAmount > 0 {
		args["dollar_amount"] = decimal(o.DollarAmount)
	}
	if o.LimitPrice > 0 {
		args["limit_price"] = decimal(o.LimitPrice)
	}
	if o.RefID != "" {
		args["ref_id"] = o.RefID
	}
	return args
}

type check struct {
	AlertType string `json:"alertType"`
	Message   string `json:"message"`
}

// checks decodes order_checks: {} when clean, one {alertType, message}, or
// a list of them.
type checks []check

func (cs *checks) UnmarshalJSON(b []byte) error {
	var many []check
	if err := json.Unmarshal(b, &many); err == nil {
		*cs = many
		return nil
	}
	var one check
	if err := json.Unmarshal(b, &one); err != nil {
		return err
	}
	if one.AlertType != "" || one.Message != "" {
		*cs = checks{one}
	} else {
		*cs = nil
	}
	return nil
}

// Review implements broker.Broker.
func (c *Client) Review(ctx context.Context, o broker.OrderRequest) (broker.Review, error) {
	const tool = "review_equity_order"
	r, err := callDecode[struct {
		QuoteData   quote  `json:"quote_data"`
		OrderChecks checks `json:"order_checks"`
	}](ctx, c, tool, orderArgs(o))
	if err != nil {
		return broker.Review{}, err
	}
	rev := broker.Review{Quote: r.QuoteData.port()}
	if rev.Quote.Symbol == "" {
		rev.Quote.Symbol = o.Symbol
	}
	for _, ch := range r.OrderChecks {
		t := ch.AlertType
		if t == "" {
			t = "UNKNOWN"
		}
		rev.Alerts = append(rev.Alerts, broker.Alert{Type: t, Message: ch.Message})
	}
	return rev, nil
}

type order struct {
	ID             string `json:"id"`
	RefID          string `json:"ref_id"`
	AccountNumber  string `json:"account_number"`
	Symbol         string `json:"symbol"`
	Side           string `json:"side"`
	Type           string `json:"type"`
	State          string `json:"state"`
	Quantity       dec    `json:"quantity"`
	DollarAmount   dec    `json:"dollar_amount"`
	LimitPrice     dec    `json:"limit_price"`
	Price          dec    `json:"price"`
	FilledQuantity dec    `json:"cumulative_quantity"`
	AveragePrice   dec    `json:"average_price"`
}

func (o order) port() broker.Order {
	limit := o.LimitPrice
	if limit == 0 && o.Type == broker.TypeLimit {
		limit = o.Price
	}
	return broker.Order{
		ID: o.ID, RefID: o.RefID, AccountNumber: o.AccountNumber, Symbol: o.Symbol, Side: o.Side,
		Type: o.Type, State: o.State, Quantity: float64(o.Quantity), DollarAmount: float64(o.DollarAmount),
		LimitPrice: float64(limit), FilledQuantity: float64(o.FilledQuantity), AveragePrice: float64(o.AveragePrice),
	}
}

// callOrder calls tool and reads the order it answers, bare or under
// "order".
func callOrder(ctx context.Context, c *Client, tool string, args map[string]any) (broker.Order, error) {
	data, err := c.call(ctx, tool, args)
	if err != nil {
		return broker.Order{}, err
	}
	w, err := decode[struct {
		Order *order `json:"order"`
	}](tool, data)
	if err == nil && w.Order != nil {
		return w.Order.port(), nil
	}
	o, err := decode[order](tool, data)
	if err != nil {
		return broker.Order{}, err
	}
	return o.port(), nil
}

// Place implements broker.Broker. The ref_id makes a retry idempotent on
// the server's side.
func (c *Client) Place(ctx context.Context, o broker.OrderRequest) (broker.Order, error) {
	const tool = "place_equity_order"
	ord, err := callOrder(ctx, c, tool, orderArgs(o))
	if err != nil {
		return broker.Order{}, err
	}
	if ord.ID == "" {
		return broker.Order{}, broker.Errorf(tool, 502, "reply has no order id")
	}
	if ord.RefID == "" {
		ord.RefID = o.RefID
	}
	return ord, nil
}

// Cancel implements broker.Broker.
func (c *Client) Cancel(ctx context.Context, acct, id string) (broker.Order, error) {
	const tool = "cancel_equity_order"
	ord, err := callOrder(ctx, c, tool, map[string]any{"account_number": acct, "order_id": id})
	if err != nil {
		return broker.Order{}, err
	}
	if ord.ID == "" {
		ord.ID = id
	}
	if ord.State == "" {
		ord.State = broker.StateCancelled
	}
	return ord, nil
}

// Orders implements broker.Broker.
func (c *Client) Orders(ctx context.Context, acct string) ([]broker.Order, error) {
	const tool = "get_equity_orders"
	os, err := callList[order](ctx, c, tool, map[string]any{"account_number": acct}, "orders")
	if err != nil {
		return nil, err
	}
	out := make([]broker.Order, 0, len(os))
	for _, o := range os {
		p := o.port()
		if p.AccountNumber == "" {
			p.AccountNumber = acct
		}
		out = append(out, p)
	}
	return out, nil
}

// totalReturns is a bare decimal or {realized_gain | total_realized_gain}.
type totalReturns dec

func (t *totalReturns) UnmarshalJSON(raw []byte) error {
	if len(raw) > 0 && raw[0] == '{' {
		var obj struct {
			RealizedGain      *dec `json:"realized_gain"`
			TotalRealizedGain *dec `json:"total_realized_gain"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return err
		}
		switch {
		case obj.TotalRealizedGain != nil:
			*t = totalReturns(*obj.TotalRealizedGain)
		case obj.RealizedGain != nil:
			*t = totalReturns(*obj.RealizedGain)
		default:
			return errNoGain
		}
		return nil
	}
	return (*dec)(t).UnmarshalJSON(raw)
}

var errNoGain = jsonError("total_returns has no realized gain")

type jsonError string

func (e jsonError) Error() string { return string(e) }

// RealizedPnL implements broker.Broker.
func (c *Client) RealizedPnL(ctx context.Context, acct, span string) (broker.PnL, error) {
	const tool = "get_realized_pnl"
	r, err := callDecode[struct {
		TotalReturns *totalReturns `json:"total_returns"`
	}](ctx, c, tool, map[string]any{"account_number": acct, "span": span})
	if err != nil {
		return broker.PnL{}, err
	}
	if r.TotalReturns == nil {
		return broker.PnL{}, broker.Errorf(tool, 502, "reply has no total_returns")
	}
	return broker.PnL{TotalRealizedGain: float64(*r.TotalReturns)}, nil
}

var _ broker.Broker = (*Client)(nil)
