package robinhood_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
)

// fake is a stand-in for the Robinhood trading MCP server: its tools answer
// in the real server's shapes ({"data": ...}, decimal strings, quote_data,
// order_checks, total_returns) from a paper simulator's state. Tools can be
// overridden to answer with canned replies.
type fake struct {
	sim      *paper.Sim
	override map[string]func(args map[string]any) *mcp.CallToolResult
	calls    []string
	token    string
}

func text(v any) *mcp.CallToolResult {
	b, _ := json.Marshal(v)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}

func toolErr(v any) *mcp.CallToolResult {
	r := text(v)
	r.IsError = true
	return r
}

func d(x float64) string { return strconv.FormatFloat(x, 'f', 4, 64) }

func quoteData(q broker.Quote) map[string]any {
	return map[string]any{"symbol": q.Symbol, "last_trade_price": d(q.LastTradePrice), "bid_price": d(q.BidPrice), "ask_price": d(q.AskPrice)}
}

func orderData(o broker.Order) map[string]any {
	return map[string]any{
		"id": o.ID, "ref_id": o.RefID, "account_number": o.AccountNumber, "symbol": o.Symbol, "side": o.Side,
		"type": o.Type, "state": o.State, "quantity": d(o.Quantity), "price": d(o.LimitPrice),
		"cumulative_quantity": d(o.FilledQuantity), "average_price": d(o.AveragePrice),
	}
}

func str(args map[string]any, k string) string { s, _ := args[k].(string); return s }

func num(args map[string]any, k string) float64 {
	f, _ := strconv.ParseFloat(str(args, k), 64)
	return f
}

func orderReq(args map[string]any) broker.OrderRequest {
	return broker.OrderRequest{
		AccountNumber: str(args, "account_number"), Symbol: str(args, "symbol"), Side: str(args, "side"),
		Type: str(args, "type"), TimeInForce: str(args, "time_in_force"), MarketHours: str(args, "market_hours"),
		Quantity: num(args, "quantity"), DollarAmount: num(args, "dollar_amount"), LimitPrice: num(args, "limit_price"),
		RefID: str(args, "ref_id"),
	}
}

// reply turns a simulator result into the server's reply shape.
func reply(data any, err error) *mcp.CallToolResult {
	if err != nil {
		var be *broker.Error
		if errors.As(err, &be) {
			return toolErr(map[string]any{"error": map[string]any{"status": be.Status, "message": be.Message}})
		}
		return toolErr(map[string]any{"error": err.Error()})
	}
	return text(map[string]any{"data": data})
}

func (f *fake) handle(ctx context.Context, name string, args map[string]any) *mcp.CallToolResult {
	f.calls = append(f.calls, name)
	if h, ok := f.override[name]; ok {
		return h(args)
	}
	acct := str(args, "account_number")
	switch name {
	case "get_accounts":
		as, err := f.sim.Accounts(ctx)
		var out []map[string]any
		for _, a := range as {
			out = append(out, map[string]any{"account_number": a.AccountNumber, "is_default": a.IsDefault, "agentic_allowed": a.AgenticAllowed, "option_level": a.OptionLevel, "type": "margin"})
		}
		return reply(map[string]any{"accounts": out}, err)
	case "get_portfolio":
		p, err := f.sim.Portfolio(ctx, acct)
		return reply(map[string]any{"total_value": d(p.TotalValue), "buying_power": map[string]any{"buying_power": d(p.BuyingPower)}, "cash": d(p.Cash)}, err)
	case "get_equity_positions":
		ps, err := f.sim.Positions(ctx, acct)
		var out []map[string]any
		for _, p := range ps {
			out = append(out, map[string]any{"symbol": p.Symbol, "quantity": d(p.Quantity), "shares_available_for_sells": d(p.SharesAvailableForSells)})
		}
		return reply(map[string]any{"positions": out}, err)
	case "get_equity_quotes":
		var syms []string
		for _, s := range args["symbols"].([]any) {
			syms = append(syms, s.(string))
		}
		qs, err := f.sim.Quotes(ctx, syms)
		var out []map[string]any
		for _, q := range qs {
			out = append(out, quoteData(q))
		}
		return reply(map[string]any{"quotes": out}, err)
	case "review_equity_order":
		r, err := f.sim.Review(ctx, orderReq(args))
		checks := map[string]any{}
		if len(r.Alerts) > 0 {
			checks = map[string]any{"alertType": r.Alerts[0].Type, "message": r.Alerts[0].Message}
		}
		return reply(map[string]any{"quote_data": quoteData(r.Quote), "order_checks": checks}, err)
	case "place_equity_order":
		o, err := f.sim.Place(ctx, orderReq(args))
		return reply(orderData(o), err)
	case "cancel_equity_order":
		o, err := f.sim.Cancel(ctx, acct, str(args, "order_id"))
		return reply(orderData(o), err)
	case "get_equity_orders":
		os, err := f.sim.Orders(ctx, acct)
		var out []map[string]any
		for _, o := range os {
			out = append(out, orderData(o))
		}
		return reply(map[string]any{"orders": out}, err)
	case "get_realized_pnl":
		p, err := f.sim.RealizedPnL(ctx, acct, str(args, "span"))
		return reply(map[string]any{"total_returns": d(p.TotalRealizedGain), "span": "day"}, err)
	}
	return toolErr(map[string]any{"error": "unknown tool"})
}

var toolNames = []string{"get_accounts", "get_portfolio", "get_equity_positions", "get_equity_quotes", "review_equity_order", "place_equity_order", "cancel_equity_order", "get_equity_orders", "get_realized_pnl"}

// serve starts the fake on httptest and returns its URL.
func (f *fake) serve(t *testing.T) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "robinhood-fake", Version: "0.0.1"}, nil)
	for _, name := range toolNames {
		srv.AddTool(&mcp.Tool{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var args map[string]any
			if len(req.Params.Arguments) > 0 {
				if err := json.Unmarshal(req.Params.Arguments, &args); err != nil {
					return nil, err
				}
			}
			return f.handle(ctx, name, args), nil
		})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+f.token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}
