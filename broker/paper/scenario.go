package paper

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/caduceus-dev/caduceus/broker"
)

// Scenario is the YAML a paper broker is loaded from: the accounts, quotes,
// review alerts and injected faults of one rehearsal.
type Scenario struct {
	// Now, when set, is the fixed clock for the whole run (RFC 3339).
	Now          string                    `yaml:"now" json:"now,omitempty"`
	Accounts     []ScenarioAccount         `yaml:"accounts" json:"accounts"`
	Quotes       map[string]ScenarioQuote  `yaml:"quotes" json:"quotes,omitempty"`
	ReviewAlerts map[string][]broker.Alert `yaml:"review_alerts" json:"review_alerts,omitempty"`
	Faults       map[string][]Fault        `yaml:"faults" json:"faults,omitempty"`
	Orders       []ScenarioOrder           `yaml:"orders" json:"orders,omitempty"`
}

// ScenarioAccount is one account of a scenario.
type ScenarioAccount struct {
	AccountNumber  string             `yaml:"account_number" json:"account_number"`
	IsDefault      bool               `yaml:"is_default" json:"is_default"`
	AgenticAllowed bool               `yaml:"agentic_allowed" json:"agentic_allowed"`
	OptionLevel    string             `yaml:"option_level" json:"option_level"`
	Portfolio      ScenarioPortfolio  `yaml:"portfolio" json:"portfolio"`
	Positions      []ScenarioPosition `yaml:"positions" json:"positions"`
	RealizedPnLDay float64            `yaml:"realized_pnl_day" json:"realized_pnl_day"`
}

// ScenarioPortfolio is an account's starting values.
type ScenarioPortfolio struct {
	TotalValue  float64 `yaml:"total_value" json:"total_value"`
	BuyingPower float64 `yaml:"buying_power" json:"buying_power"`
	Cash        float64 `yaml:"cash" json:"cash"`
}

// ScenarioPosition is one holding; AverageBuyPrice (default: the last trade
// price) is the cost basis realized P&L is measured from.
type ScenarioPosition struct {
	Symbol                  string  `yaml:"symbol" json:"symbol"`
	Quantity                float64 `yaml:"quantity" json:"quantity"`
	SharesAvailableForSells float64 `yaml:"shares_available_for_sells" json:"shares_available_for_sells"`
	AverageBuyPrice         float64 `yaml:"average_buy_price" json:"average_buy_price,omitempty"`
}

// ScenarioQuote is a symbol's prices.
type ScenarioQuote struct {
	LastTradePrice float64 `yaml:"last_trade_price" json:"last_trade_price"`
	BidPrice       float64 `yaml:"bid_price" json:"bid_price"`
	AskPrice       float64 `yaml:"ask_price" json:"ask_price"`
}

// ScenarioOrder is an order that exists before the run (to rehearse cancels).
type ScenarioOrder struct {
	ID            string  `yaml:"id" json:"id"`
	AccountNumber string  `yaml:"account_number" json:"account_number"`
	Symbol        string  `yaml:"symbol" json:"symbol"`
	Side          string  `yaml:"side" json:"side"`
	Type          string  `yaml:"type" json:"type"`
	State         string  `yaml:"state" json:"state"`
	Quantity      float64 `yaml:"quantity" json:"quantity"`
	LimitPrice    float64 `yaml:"limit_price" json:"limit_price"`
}

// Fault is one injected failure: an HTTP-like status, "timeout" (the
// broker acts on the call, then the reply is lost), or "ok" (this call
// succeeds; a placeholder to reach a later fault).
type Fault struct {
	Status  int  `json:"status,omitempty"`
	Timeout bool `json:"timeout,omitempty"`
}

// UnmarshalYAML accepts a status number or the word timeout.
func (f *Fault) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && strings.EqualFold(n.Value, "timeout") {
		*f = Fault{Status: broker.StatusTimeout, Timeout: true}
		return nil
	}
	if n.Kind == yaml.ScalarNode && strings.EqualFold(n.Value, "ok") {
		*f = Fault{}
		return nil
	}
	var code int
	if err := n.Decode(&code); err != nil || code < 400 || code > 599 {
		return fmt.Errorf("line %d: fault %q is not a 4xx/5xx status, \"timeout\" or \"ok\"", n.Line, n.Value)
	}
	*f = Fault{Status: code}
	return nil
}

// tools are the names faults may be keyed by.
var tools = map[string]bool{
	"get_accounts": true, "get_portfolio": true, "get_equity_positions": true,
	"get_equity_quotes": true, "review_equity_order": true, "place_equity_order": true,
	"cancel_equity_order": true, "get_equity_orders": true, "get_realized_pnl": true,
}

// ParseScenario decodes and checks a scenario. Unknown keys, unknown fault
// tools, negative prices and duplicate accounts are errors.
func ParseScenario(b []byte) (*Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("paper: scenario: %w", err)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("paper: scenario: %w", err)
	}
	return &s, nil
}

// NowTime returns the scenario's fixed clock, if it has one.
func (s *Scenario) NowTime() (time.Time, bool, error) {
	if s.Now == "" {
		return time.Time{}, false, nil
	}
	t, err := time.Parse(time.RFC3339, s.Now)
	if err != nil {
		return time.Time{}, false, fmt.Errorf("paper: scenario: now %q is not RFC 3339", s.Now)
	}
	return t, true, nil
}

func (s *Scenario) check() error {
	if _, _, err := s.NowTime(); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, a := range s.Accounts {
		if a.AccountNumber == "" {
			return fmt.Errorf("accounts[%d]: account_number is required", i)
		}
		if seen[a.AccountNumber] {
			return fmt.Errorf("accounts[%d]: duplicate account_number %q", i, a.AccountNumber)
		}
		seen[a.AccountNumber] = true
		if !finite(a.Portfolio.TotalValue, a.Portfolio.BuyingPower, a.Portfolio.Cash, a.RealizedPnLDay) {
			return fmt.Errorf("accounts[%d]: numbers must be finite", i)
		}
		for j, p := range a.Positions {
			if !finite(p.Quantity, p.SharesAvailableForSells, p.AverageBuyPrice) {
				return fmt.Errorf("accounts[%d].positions[%d]: numbers must be finite", i, j)
			}
			if p.Symbol == "" || p.Quantity < 0 || p.SharesAvailableForSells < 0 || p.SharesAvailableForSells > p.Quantity {
				return fmt.Errorf("accounts[%d].positions[%d]: needs a symbol and 0 <= shares_available_for_sells <= quantity", i, j)
			}
		}
	}
	for sym, q := range s.Quotes {
		if !finite(q.LastTradePrice, q.BidPrice, q.AskPrice) || q.LastTradePrice < 0 || q.BidPrice < 0 || q.AskPrice < 0 {
			return fmt.Errorf("quotes.%s: prices must not be negative", sym)
		}
	}
	for tool := range s.Faults {
		if !tools[tool] {
			return fmt.Errorf("faults: unknown tool %q", tool)
		}
	}
	for i, o := range s.Orders {
		if !finite(o.Quantity, o.LimitPrice) {
			return fmt.Errorf("orders[%d]: numbers must be finite", i)
		}
		if o.ID == "" || !seen[o.AccountNumber] {
			return fmt.Errorf("orders[%d]: needs an id and one of the scenario's accounts", i)
		}
	}
	return nil
}

func finite(xs ...float64) bool {
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}
