package executor

import (
	"context"

	"github.com/caduceus-dev/caduceus/broker"
)

// Call is one broker call as the audit record keeps it.
type Call struct {
	Name    string `json:"name"`
	Args    any    `json:"args,omitempty"`
	Outcome string `json:"outcome"`          // "ok" or "error"
	Status  int    `json:"status,omitempty"` // the error's HTTP-like status
	Error   string `json:"error,omitempty"`
}

// recorder wraps the broker and keeps every call made during one tick.
type recorder struct {
	b     broker.Broker
	calls []Call
}

func (r *recorder) note(name string, args any, err error) {
	c := Call{Name: name, Args: args, Outcome: "ok"}
	if err != nil {
		c.Outcome, c.Status, c.Error = "error", broker.StatusOf(err), err.Error()
	}
	r.calls = append(r.calls, c)
}

type acctArgs struct {
	AccountNumber string `json:"account_number"`
}

func (r *recorder) accounts(ctx context.Context) ([]broker.Account, error) {
	v, err := r.b.Accounts(ctx)
	r.note("get_accounts", nil, err)
	return v, err
}

func (r *recorder) portfolio(ctx context.Context, acct string) (broker.Portfolio, error) {
	v, err := r.b.Portfolio(ctx, acct)
	r.note("get_portfolio", acctArgs{acct}, err)
	return v, err
}

func (r *recorder) positions(ctx context.Context, acct string) ([]broker.Position, error) {
	v, err := r.b.Positions(ctx, acct)
	r.note("get_equity_positions", acctArgs{acct}, err)
	return v, err
}

func (r *recorder) quotes(ctx context.Context, symbols []string) ([]broker.Quote, error) {
	v, err := r.b.Quotes(ctx, symbols)
	r.note("get_equity_quotes", map[string]any{"symbols": symbols}, err)
	return v, err
}

func (r *recorder) review(ctx context.Context, o broker.OrderRequest) (broker.Review, error) {
	v, err := r.b.Review(ctx, o)
	r.note("review_equity_order", o, err)
	return v, err
}

func (r *recorder) place(ctx context.Context, o broker.OrderRequest) (broker.Order, error) {
	v, err := r.b.Place(ctx, o)
	r.note("place_equity_order", o, err)
	return v, err
}

func (r *recorder) cancel(ctx context.Context, acct, id string) (broker.Order, error) {
	v, err := r.b.Cancel(ctx, acct, id)
	r.note("cancel_equity_order", map[string]string{"account_number": acct, "order_id": id}, err)
	return v, err
}

func (r *recorder) orders(ctx context.Context, acct string) ([]broker.Order, error) {
	v, err := r.b.Orders(ctx, acct)
	r.note("get_equity_orders", acctArgs{acct}, err)
	return v, err
}

func (r *recorder) pnl(ctx context.Context, acct, span string) (broker.PnL, error) {
	v, err := r.b.RealizedPnL(ctx, acct, span)
	r.note("get_realized_pnl", map[string]string{"account_number": acct, "span": span}, err)
	return v, err
}

// retry runs fn and, when it fails with a 5xx status or a timeout, runs it
// exactly once more. A 4xx refusal is not retried.
func retry[T any](fn func() (T, error)) (T, error) {
	v, err := fn()
	if err != nil && broker.Retryable(err) {
		v, err = fn()
	}
	return v, err
}
