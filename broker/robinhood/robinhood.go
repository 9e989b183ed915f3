// Package robinhood is a broker.Broker over the Robinhood trading MCP
// server: an MCP client (official Go SDK, streamable HTTP, bearer token) of
// its tools get_accounts, get_portfolio, get_equity_positions,
// get_equity_quotes, review_equity_order, place_equity_order,
// cancel_equity_order, get_equity_orders and get_realized_pnl.
//
// The server's replies wrap everything in {"data": ...} and send numbers as
// decimal strings. The mapping, per tool (lists may also come bare, or under
// "results"):
//
//	get_accounts          data.accounts[]: account_number, is_default, agentic_allowed, option_level
//	get_portfolio         data.total_value (or equity), data.buying_power.buying_power (or a bare decimal), data.cash
//	get_equity_positions  data.positions[]: symbol, quantity, shares_available_for_sells
//	get_equity_quotes     data.quotes[]: symbol, last_trade_price, bid_price, ask_price
//	review_equity_order   data.quote_data (a quote); data.order_checks: {} when clean, else
//	                      {alertType, message} or a list of them
//	place_equity_order    data (or data.order): id, ref_id, state, ...
//	cancel_equity_order   data: the order (id, state)
//	get_equity_orders     data.orders[]
//	get_realized_pnl      data.total_returns: a decimal, or {realized_gain|total_realized_gain}
//
// A tool result flagged isError becomes a *broker.Error whose Status is the
// reply's status (or code) when it carries one and 400 otherwise; a
// transport failure is 503, a deadline 504 with Timeout set.
package robinhood

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caduceus-dev/caduceus/broker"
)

// EnvToken names the environment variable that holds the bearer token of
// the Robinhood MCP server, for serve's executor gate and caduceus exec.
const EnvToken = "CADUCEUS_ROBINHOOD_TOKEN"

// Client is a connected MCP session. It is safe for concurrent use.
type Client struct {
	session *mcp.ClientSession
	// invoke calls a tool; it is session.CallTool, replaceable in tests.
	invoke func(context.Context, *mcp.CallToolParams) (*mcp.CallToolResult, error)
}

// Dial connects to the MCP server at endpoint, sending token as a bearer
// credential on every request. hc may be nil.
func Dial(ctx context.Context, endpoint, token string, hc *http.Client) (*Client, error) {
	if endpoint == "" {
		return nil, errors.New("robinhood: an MCP endpoint URL is required")
	}
	if hc == nil {
		hc = &http.Client{}
	}
	authed := *hc
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	authed.Transport = bearer{token: token, next: base}
	c := mcp.NewClient(&mcp.Implementation{Name: "caduceus-executor", Version: "1.0.0"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &authed, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("robinhood: connect %s: %w", endpoint, err)
	}
	return &Client{session: s, invoke: s.CallTool}, nil
}

// Close ends the session.
func (c *Client) Close() error { return c.session.Close() }

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

// call invokes a tool and returns the reply's data member.
func (c *Client) call(ctx context.Context, tool string, args map[string]any) (json.RawMessage, error) {
	res, err := c.invoke(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, &broker.Error{Op: tool, Status: broker.StatusTimeout, Timeout: true, Err: err}
		}
		return nil, &broker.Error{Op: tool, Status: 503, Err: err}
	}
	if res == nil {
		return nil, broker.Errorf(tool, 502, "empty tool result")
	}
	body := resultBody(res)
	if res.IsError {
		return nil, toolError(tool, body)
	}
	var env struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil || len(env.Data) == 0 {
		return nil, broker.Errorf(tool, 502, "reply is not a {\"data\": ...} object: %.200s", body)
	}
	return env.Data, nil
}

func resultBody(res *mcp.CallToolResult) []byte {
	if res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return b
		}
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return []byte(t.Text)
		}
	}
	return nil
}

// toolError maps an isError reply to a *broker.Error.
func toolError(tool string, body []byte) error {
	var r struct {
		Status  json.Number     `json:"status"`
		Code    json.Number     `json:"code"`
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	msg := strings.TrimSpace(string(body))
	status := 0
	if json.Unmarshal(body, &r) == nil {
		status = statusOf(r.Status, r.Code)
		if r.Message != "" {
			msg = r.Message
		}
		var inner struct {
			Status  json.Number `json:"status"`
			Code    json.Number `json:"code"`
			Message string      `json:"message"`
		}
		var s string
		switch {
		case json.Unmarshal(r.Error, &inner) == nil && (inner.Message != "" || inner.Status != "" || inner.Code != ""):
			if st := statusOf(inner.Status, inner.Code); st != 0 {
				status = st
			}
			if inner.Message != "" {
				msg = inner.Message
			}
		case json.Unmarshal(r.Error, &s) == nil && s != "":
			msg = s
		}
	}
	if status == 0 {
		status = 400 // a tool that refuses without saying why: treat as a refusal
	}
	if len(msg) > 500 {
		msg = msg[:500]
	}
	return &broker.Error{Op: tool, Status: status, Message: msg}
}

func statusOf(ns ...json.Number) int {
	for _, n := range ns {
		if v, err := n.Int64(); err == nil && v >= 400 && v <= 599 {
			return int(v)
		}
	}
	return 0
}

// dec is a number the server may send as a decimal string.
type dec float64

func (d *dec) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*d = 0
		return nil
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("robinhood: %s is not a decimal", b)
	}
	*d = dec(v)
	return nil
}

// flag is a boolean the server may send as a string.
type flag bool

func (f *flag) UnmarshalJSON(b []byte) error {
	switch strings.Trim(string(b), `"`) {
	case "true", "True", "1":
		*f = true
	case "false", "False", "0", "", "null":
		*f = false
	default:
		return fmt.Errorf("robinhood: %s is not a boolean", b)
	}
	return nil
}

func decimal(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }

// callList calls tool and reads its data as a list of T: bare, or under the
// first of keys (then "results") it has.
func callList[T any](ctx context.Context, c *Client, tool string, args map[string]any, keys ...string) ([]T, error) {
	data, err := c.call(ctx, tool, args)
	if err != nil {
		return nil, err
	}
	var out []T
	if err := json.Unmarshal(data, &out); err == nil {
		return out, nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, broker.Errorf(tool, 502, "unexpected reply shape: %v", err)
	}
	for _, k := range append(keys, "results") {
		if raw, ok := obj[k]; ok {
			if err := json.Unmarshal(raw, &out); err != nil {
				return nil, broker.Errorf(tool, 502, "unexpected %s: %v", k, err)
			}
			return out, nil
		}
	}
	return nil, broker.Errorf(tool, 502, "reply has none of %v", keys)
}

// callDecode calls tool and decodes its data as a T.
func callDecode[T any](ctx context.Context, c *Client, tool string, args map[string]any) (T, error) {
	data, err := c.call(ctx, tool, args)
	if err != nil {
		var zero T
		return zero, err
	}
	return decode[T](tool, data)
}

func decode[T any](tool string, data json.RawMessage) (T, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return v, broker.Errorf(tool, 502, "unexpected reply shape: %v", err)
	}
	return v, nil
}
