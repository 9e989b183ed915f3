package robinhood

import (
	"context"
	"math"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caduceus-dev/caduceus/broker"
)

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// FuzzReplies feeds arbitrary tool results (text and isError) to every
// tool's mapping: each call either fails with a *broker.Error carrying a
// status, or returns values with finite numbers. Nothing panics.
func FuzzReplies(f *testing.F) {
	for _, s := range []string{
		`{"data":{"accounts":[{"account_number":"1","is_default":true,"agentic_allowed":"true","option_level":"option_level_2"}]}}`,
		`{"data":{"total_value":"1000.00","buying_power":{"buying_power":"998.50"},"cash":"998.50"}}`,
		`{"data":{"positions":[{"symbol":"SPY","quantity":"2.0000","shares_available_for_sells":"2"}]}}`,
		`{"data":{"quotes":[null,{"symbol":"SPY","last_trade_price":"481.50","bid_price":"481.40","ask_price":"481.60"}]}}`,
		`{"data":{"quote_data":{"ask_price":"1"},"order_checks":{"alertType":"PDT","message":"x"}}}`,
		`{"data":{"quote_data":{},"order_checks":[{}]}}`,
		`{"data":{"order":{"id":"o","state":"queued","price":"NaN"}}}`,
		`{"data":{"orders":[{"id":"o","quantity":"1e309"}]}}`,
		`{"data":{"total_returns":{"realized_gain":"-1"}}}`,
		`{"error":{"status":503,"message":"down"}}`, `[]`, `null`, `{"data":null}`, ``,
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, body string, isError bool) {
		c := &Client{invoke: func(context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: isError, Content: []mcp.Content{&mcp.TextContent{Text: body}}}, nil
		}}
		ctx := context.Background()
		check := func(err error) {
			t.Helper()
			if err == nil {
				return
			}
			if s := broker.StatusOf(err); s < 400 || s > 599 {
				t.Fatalf("error without a 4xx/5xx status: %v", err)
			}
		}
		as, err := c.Accounts(ctx)
		check(err)
		_ = as
		p, err := c.Portfolio(ctx, "1")
		check(err)
		if !finite(p.TotalValue, p.BuyingPower, p.Cash) {
			t.Fatalf("non-finite portfolio %+v", p)
		}
		ps, err := c.Positions(ctx, "1")
		check(err)
		for _, x := range ps {
			if !finite(x.Quantity, x.SharesAvailableForSells) {
				t.Fatalf("non-finite position %+v", x)
			}
		}
		qs, err := c.Quotes(ctx, []string{"SPY"})
		check(err)
		for _, q := range qs {
			if !finite(q.LastTradePrice, q.BidPrice, q.AskPrice) {
				t.Fatalf("non-finite quote %+v", q)
			}
		}
		r, err := c.Review(ctx, broker.OrderRequest{Symbol: "SPY"})
		check(err)
		if !finite(r.Quote.AskPrice, r.Quote.BidPrice) {
			t.Fatalf("non-finite review %+v", r)
		}
		o, err := c.Place(ctx, broker.OrderRequest{RefID: "r"})
		check(err)
		if err == nil && o.ID == "" {
			t.Fatal("placed order without id")
		}
		_, err = c.Cancel(ctx, "1", "o")
		check(err)
		_, err = c.Orders(ctx, "1")
		check(err)
		pnl, err := c.RealizedPnL(ctx, "1", "day")
		check(err)
		if !finite(pnl.TotalRealizedGain) {
			t.Fatalf("non-finite pnl %+v", pnl)
		}
	})
}
