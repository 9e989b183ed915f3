// Package paper is a deterministic broker simulator behind the broker.Broker
// port. It holds accounts, positions, quotes, orders and realized P&L, fills
// market buys at the ask and sells at the bid, fills limit orders when they
// are marketable and leaves them open otherwise, returns injected review
// alerts, and consumes injected faults in order. Its whole state is a JSON
// snapshot kept by a Persister.
//
// With a Persister every call is one transaction on the saved state: the
// simulator reads the latest snapshot and its version, applies the call, and
// saves the result only if the version has not moved (compare-and-swap); if
// another process saved first, it re-reads and applies the call again. So
// several processes sharing one database share one account set: no fill is
// lost or doubled, and buying power is checked against the latest cash.
package paper

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/broker"
)

// Persister keeps the simulator's state between runs and processes, with a
// version for compare-and-swap. Load returns nil, 0 when nothing has been
// saved yet. Save stores state only if the saved version is still version
// (0: nothing saved) and returns the new version; ok is false, and nothing
// changes, when another writer saved first.
type Persister interface {
	Load(ctx context.Context) (state []byte, version int64, err error)
	Save(ctx context.Context, state []byte, version int64) (newVersion int64, ok bool, err error)
}

// maxAttempts bounds how often one call is re-applied after losing the
// compare-and-swap to other writers (each loss means another call went
// through, so the bound is only reached under pathological contention).
const maxAttempts = 1000

// state is everything the simulator knows; it is the JSON snapshot.
type state struct {
	Accounts     []*account                `json:"accounts"`
	Quotes       map[string]broker.Quote   `json:"quotes"`
	ReviewAlerts map[string][]broker.Alert `json:"review_alerts,omitempty"`
	Faults       map[string][]Fault        `json:"faults,omitempty"`
	Orders       []broker.Order            `json:"orders"`
	Seq          int                       `json:"seq"`
}

type account struct {
	broker.Account
	Portfolio broker.Portfolio   `json:"portfolio"`
	Positions []*position        `json:"positions"`
	PnL       map[string]float64 `json:"pnl_by_day"` // New York day -> realized gain
}

type position struct {
	broker.Position
	AverageBuyPrice float64 `json:"average_buy_price"`
}

// Sim is the simulator. It is safe for concurrent use.
type Sim struct {
	mu      sync.Mutex
	st      state
	refs    map[string]int // ref_id -> index in st.Orders
	now     func() time.Time
	persist Persister
	version int64 // the saved version st was loaded from or saved as
	loaded  bool  // st is the saved state at version (false: reload first)
}

// New builds a simulator from a scenario. now is the clock (the scenario's
// fixed now, when set, takes precedence; nil means time.Now); the scenario's
// realized_pnl_day is booked on the New York day of that clock.
func New(s *Scenario, now func() time.Time) (*Sim, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("paper: scenario: %w", err)
	}
	if t, ok, _ := s.NowTime(); ok {
		now = func() time.Time { return t }
	}
	if now == nil {
		now = time.Now
	}
	day := broker.Day(now())
	st := state{Quotes: map[string]broker.Quote{}, ReviewAlerts: map[string][]broker.Alert{}, Faults: map[string][]Fault{}}
	for _, a := range s.Accounts {
		acc := &account{
			Account:   broker.Account{AccountNumber: a.AccountNumber, IsDefault: a.IsDefault, AgenticAllowed: a.AgenticAllowed, OptionLevel: a.OptionLevel},
			Portfolio: broker.Portfolio(a.Portfolio),
			PnL:       map[string]float64{},
		}
		if a.RealizedPnLDay != 0 {
			acc.PnL[day] = a.RealizedPnLDay
		}
		for _, p := range a.Positions {
			avg := p.AverageBuyPrice
			if avg == 0 {
				avg = s.Quotes[p.Symbol].LastTradePrice
			}
			acc.Positions = append(acc.Positions, &position{Position: broker.Position{Symbol: p.Symbol, Quantity: p.Quantity, SharesAvailableForSells: p.SharesAvailableForSells}, AverageBuyPrice: avg})
		}
		st.Accounts = append(st.Accounts, acc)
	}
	for sym, q := range s.Quotes {
		st.Quotes[sym] = broker.Quote{Symbol: sym, LastTradePrice: q.LastTradePrice, BidPrice: q.BidPrice, AskPrice: q.AskPrice}
	}
	for sym, al := range s.ReviewAlerts {
		st.ReviewAlerts[sym] = slices.Clone(al)
	}
	for tool, fs := range s.Faults {
		st.Faults[tool] = slices.Clone(fs)
	}
	for _, o := range s.Orders {
		st.Orders = append(st.Orders, broker.Order{ID: o.ID, AccountNumber: o.AccountNumber, Symbol: o.Symbol, Side: o.Side, Type: o.Type, State: o.State, Quantity: o.Quantity, LimitPrice: o.LimitPrice})
	}
	sim := &Sim{st: st, now: now}
	sim.index()
	return sim, nil
}

// index rebuilds the ref_id index; the lock is held or not yet shared.
func (s *Sim) index() {
	s.refs = make(map[string]int, len(s.st.Orders))
	for i, o := range s.st.Orders {
		if o.RefID != "" {
			s.refs[o.RefID] = i
		}
	}
}

// Open returns a simulator whose state is kept by p: the saved state when
// there is one, else a fresh one built from s (saved on its first call).
// Every call is a transaction on the saved state (see the package doc).
func Open(ctx context.Context, p Persister, s *Scenario, now func() time.Time) (*Sim, error) {
	sim, err := New(s, now)
	if err != nil {
		return nil, err
	}
	b, v, err := p.Load(ctx)
	if err != nil {
		return nil, fmt.Errorf("paper: load state: %w", err)
	}
	if b != nil {
		if err := sim.Restore(b); err != nil {
			return nil, err
		}
	}
	sim.persist, sim.version, sim.loaded = p, v, true
	return sim, nil
}

// transact runs op on the latest saved state and saves what it changed,
// re-running op on a fresher state when another writer saved first. Without
// a Persister it just runs op. The lock is held. op's error is returned
// after its changes are saved: a consumed fault or a timed-out placement
// that acted changes the state and fails the call.
func (s *Sim) transact(ctx context.Context, op func() error) error {
	if s.persist == nil {
		return op()
	}
	for range maxAttempts {
		b, v, err := s.persist.Load(ctx)
		if err != nil {
			return &broker.Error{Op: "paper_load", Status: 500, Err: err}
		}
		if !s.loaded || v != s.version {
			if b != nil {
				if err := s.restore(b); err != nil {
					return &broker.Error{Op: "paper_load", Status: 500, Err: err}
				}
			}
			s.version, s.loaded = v, true
		}
		before, err := json.Marshal(&s.st)
		if err != nil {
			return err
		}
		opErr := op()
		after, err := json.Marshal(&s.st)
		if err != nil {
			return err
		}
		if bytes.Equal(before, after) {
			return opErr
		}
		nv, ok, err := s.persist.Save(ctx, after, s.version)
		if err != nil {
			s.loaded = false
			return &broker.Error{Op: "paper_save", Status: 500, Err: err}
		}
		if ok {
			s.version = nv
			return opErr
		}
		s.loaded = false // another writer won: reload and apply op again
	}
	return &broker.Error{Op: "paper_save", Status: 503, Message: "paper state kept changing under this call"}
}

// do runs op as one transaction with the lock held.
func do[T any](s *Sim, ctx context.Context, op func() (T, error)) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out T
	err := s.transact(ctx, func() error {
		var err error
		out, err = op()
		return err
	})
	return out, err
}

// SetClock replaces the simulator's clock (tests use it to cross midnight).
func (s *Sim) SetClock(now func() time.Time) {
	s.mu.Lock()
	s.now = now
	s.mu.Unlock()
}

// Snapshot returns the simulator's whole state as JSON.
func (s *Sim) Snapshot() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return json.Marshal(&s.st)
}

// Restore replaces the simulator's state with a snapshot.
func (s *Sim) Restore(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.restore(b)
}

// restore is Restore with the lock held.
func (s *Sim) restore(b []byte) error {
	var st state
	if err := json.Unmarshal(b, &st); err != nil {
		return fmt.Errorf("paper: restore: %w", err)
	}
	if st.Quotes == nil {
		st.Quotes = map[string]broker.Quote{}
	}
	for _, a := range st.Accounts {
		if a.PnL == nil {
			a.PnL = map[string]float64{}
		}
	}
	s.st = st
	s.index()
	return nil
}

// AllOrders returns every order the simulator holds, oldest first.
func (s *Sim) AllOrders() []broker.Order {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.st.Orders)
}

// fault pops the next injected fault for tool, if any.
func (s *Sim) fault(tool string) (Fault, bool) {
	q := s.st.Faults[tool]
	if len(q) == 0 {
		return Fault{}, false
	}
	s.st.Faults[tool] = q[1:]
	return q[0], true
}

// begin takes the lock and applies a pending fault. A timeout fault lets the
// call proceed (acted is reported back through the returned error), any
// other fault fails the call before it acts.
func (s *Sim) begin(tool string) (timeout bool, err error) {
	f, ok := s.fault(tool)
	if !ok {
		return false, nil
	}
	if f.Timeout {
		return true, nil
	}
	if f.Status == 0 {
		return false, nil // "ok"
	}
	return false, broker.Errorf(tool, f.Status, "injected fault")
}

func timeoutErr(tool string) error {
	return &broker.Error{Op: tool, Status: broker.StatusTimeout, Timeout: true, Message: "injected timeout"}
}

func (s *Sim) account(tool, number string) (*account, error) {
	for _, a := range s.st.Accounts {
		if a.AccountNumber == number {
			return a, nil
		}
	}
	return nil, broker.Errorf(tool, 404, "account %q not found", number)
}

// beginAccount is begin, then the lookup of account number: how every
// call on one account starts.
func (s *Sim) beginAccount(tool, number string) (a *account, timeout bool, err error) {
	if timeout, err = s.begin(tool); err != nil {
		return nil, false, err
	}
	a, err = s.account(tool, number)
	return a, timeout, err
}

// readAccount is beginAccount for a call that only reads the account, which
// an injected timeout then fails outright.
func (s *Sim) readAccount(tool, number string) (*account, error) {
	a, timeout, err := s.beginAccount(tool, number)
	if err == nil && timeout {
		err = timeoutErr(tool)
	}
	return a, err
}

// Accounts implements broker.Broker.
func (s *Sim) Accounts(ctx context.Context) ([]broker.Account, error) {
	return do(s, ctx, func() ([]broker.Account, error) {
		to, err := s.begin("get_accounts")
		if err != nil {
			return nil, err
		}
		out := make([]broker.Account, 0, len(s.st.Accounts))
		for _, a := range s.st.Accounts {
			out = append(out, a.Account)
		}
		if to {
			return nil, timeoutErr("get_accounts")
		}
		return out, nil
	})
}

// Portfolio implements broker.Broker.
func (s *Sim) Portfolio(ctx context.Context, number string) (broker.Portfolio, error) {
	return do(s, ctx, func() (broker.Portfolio, error) {
		a, err := s.readAccount("get_portfolio", number)
		if err != nil {
			return broker.Portfolio{}, err
		}
		return a.Portfolio, nil
	})
}

// Positions implements broker.Broker.
func (s *Sim) Positions(ctx context.Context, number string) ([]broker.Position, error) {
	return do(s, ctx, func() ([]broker.Position, error) {
		a, err := s.readAccount("get_equity_positions", number)
		if err != nil {
			return nil, err
		}
		out := make([]broker.Position, 0, len(a.Positions))
		for _, p := range a.Positions {
			if p.Quantity > 0 {
				out = append(out, p.Position)
			}
		}
		return out, nil
	})
}

// Quotes implements broker.Broker.
func (s *Sim) Quotes(ctx context.Context, symbols []string) ([]broker.Quote, error) {
	return do(s, ctx, func() ([]broker.Quote, error) {
		to, err := s.begin("get_equity_quotes")
		if err != nil {
			return nil, err
		}
		if to {
			return nil, timeoutErr("get_equity_quotes")
		}
		out := make([]broker.Quote, 0, len(symbols))
		for _, sym := range symbols {
			if q, ok := s.st.Quotes[sym]; ok {
				out = append(out, q)
			}
		}
		return out, nil
	})
}

// Review implements broker.Broker.
func (s *Sim) Review(ctx context.Context, o broker.OrderRequest) (broker.Review, error) {
	return do(s, ctx, func() (broker.Review, error) {
		const tool = "review_equity_order"
		_, to, err := s.beginAccount(tool, o.AccountNumber)
		if err != nil {
			return broker.Review{}, err
		}
		q, ok := s.st.Quotes[o.Symbol]
		if !ok {
			return broker.Review{}, broker.Errorf(tool, 400, "no quote for %s", o.Symbol)
		}
		if err := checkRequest(tool, o); err != nil {
			return broker.Review{}, err
		}
		if to {
			return broker.Review{}, timeoutErr(tool)
		}
		return broker.Review{Quote: q, Alerts: slices.Clone(s.st.ReviewAlerts[o.Symbol])}, nil
	})
}

func checkRequest(tool string, o broker.OrderRequest) error {
	switch {
	case o.Side != broker.SideBuy && o.Side != broker.SideSell:
		return broker.Errorf(tool, 400, "side %q", o.Side)
	case o.Type != broker.TypeMarket && o.Type != broker.TypeLimit:
		return broker.Errorf(tool, 400, "type %q", o.Type)
	case (o.Quantity > 0) == (o.DollarAmount > 0):
		return broker.Errorf(tool, 400, "exactly one of quantity and dollar_amount is required")
	case o.DollarAmount > 0 && o.Type != broker.TypeMarket:
		return broker.Errorf(tool, 400, "dollar_amount requires type=market")
	case o.Type == broker.TypeLimit && o.LimitPrice <= 0:
		return broker.Errorf(tool, 400, "limit order without limit_price")
	}
	return nil
}

// Place implements broker.Broker. A repeat RefID returns the first order,
// marked Existing.
func (s *Sim) Place(ctx context.Context, o broker.OrderRequest) (broker.Order, error) {
	return do(s, ctx, func() (broker.Order, error) {
		const tool = "place_equity_order"
		to, err := s.begin(tool)
		if err != nil {
			return broker.Order{}, err
		}
		if i, ok := s.refs[o.RefID]; ok && o.RefID != "" {
			if to {
				return broker.Order{}, timeoutErr(tool)
			}
			ord := s.st.Orders[i]
			ord.Existing = true
			return ord, nil
		}
		a, err := s.account(tool, o.AccountNumber)
		if err != nil {
			return broker.Order{}, err
		}
		if err := checkRequest(tool, o); err != nil {
			return broker.Order{}, err
		}
		q, ok := s.st.Quotes[o.Symbol]
		if !ok {
			return broker.Order{}, broker.Errorf(tool, 400, "no quote for %s", o.Symbol)
		}
		s.st.Seq++
		ord := broker.Order{
			ID: fmt.Sprintf("paper-%06d", s.st.Seq), RefID: o.RefID, AccountNumber: o.AccountNumber,
			Symbol: o.Symbol, Side: o.Side, Type: o.Type, State: broker.StateQueued,
			Quantity: o.Quantity, DollarAmount: o.DollarAmount, LimitPrice: o.LimitPrice,
		}
		price := q.AskPrice
		if o.Side == broker.SideSell {
			price = q.BidPrice
		}
		marketable := o.Type == broker.TypeMarket ||
			(o.Side == broker.SideBuy && o.LimitPrice >= q.AskPrice) ||
			(o.Side == broker.SideSell && o.LimitPrice <= q.BidPrice)
		if marketable {
			if price <= 0 {
				return broker.Order{}, broker.Errorf(tool, 400, "no %s price for %s", o.Side, o.Symbol)
			}
			qty := o.Quantity
			if qty == 0 {
				qty = math.Floor(o.DollarAmount/price*1e6) / 1e6
			}
			if err := s.fill(a, o.Side, o.Symbol, qty, price); err != nil {
				return broker.Order{}, err
			}
			ord.State, ord.FilledQuantity, ord.AveragePrice = broker.StateFilled, qty, price
		} else if o.Side == broker.SideBuy {
			// A resting buy holds its buying power.
			hold := o.Quantity * o.LimitPrice
			if hold > a.Portfolio.BuyingPower {
				return broker.Order{}, broker.Errorf(tool, 400, "insufficient buying power")
			}
			a.Portfolio.BuyingPower = cents(a.Portfolio.BuyingPower - hold)
		}
		s.st.Orders = append(s.st.Orders, ord)
		if ord.RefID != "" {
			s.refs[ord.RefID] = len(s.st.Orders) - 1
		}
		if to {
			return broker.Order{}, timeoutErr(tool)
		}
		return ord, nil
	})
}

// fill books an execution of qty at price.
func (s *Sim) fill(a *account, side, symbol string, qty, price float64) error {
	const tool = "place_equity_order"
	var p *position
	for _, x := range a.Positions {
		if x.Symbol == symbol {
			p = x
		}
	}
	amount := qty * price
	if side == broker.SideBuy {
		if amount > a.Portfolio.BuyingPower+1e-9 {
			return broker.Errorf(tool, 400, "insufficient buying power")
		}
		if p == nil {
			p = &position{Position: broker.Position{Symbol: symbol}}
			a.Positions = append(a.Positions, p)
		}
		p.AverageBuyPrice = (p.AverageBuyPrice*p.Quantity + amount) / (p.Quantity + qty)
		p.Quantity += qty
		p.SharesAvailableForSells += qty
		a.Portfolio.BuyingPower = cents(a.Portfolio.BuyingPower - amount)
		a.Portfolio.Cash = cents(a.Portfolio.Cash - amount)
		return nil
	}
	if p == nil || p.SharesAvailableForSells+1e-9 < qty {
		return broker.Errorf(tool, 400, "not enough shares of %s to sell", symbol)
	}
	gain := (price - p.AverageBuyPrice) * qty
	p.Quantity -= qty
	p.SharesAvailableForSells -= qty
	a.Portfolio.BuyingPower = cents(a.Portfolio.BuyingPower + amount)
	a.Portfolio.Cash = cents(a.Portfolio.Cash + amount)
	a.Portfolio.TotalValue = cents(a.Portfolio.TotalValue + gain)
	day := broker.Day(s.now())
	a.PnL[day] = cents(a.PnL[day] + gain)
	return nil
}

// cents rounds a money amount to the cent, as a broker's ledger would.
func cents(x float64) float64 { return math.Round(x*100) / 100 }

// Cancel implements broker.Broker: only an open order of that account.
func (s *Sim) Cancel(ctx context.Context, number, orderID string) (broker.Order, error) {
	return do(s, ctx, func() (broker.Order, error) {
		const tool = "cancel_equity_order"
		a, to, err := s.beginAccount(tool, number)
		if err != nil {
			return broker.Order{}, err
		}
		for i := range s.st.Orders {
			o := &s.st.Orders[i]
			if o.ID != orderID || o.AccountNumber != number {
				continue
			}
			if !o.Open() {
				return broker.Order{}, broker.Errorf(tool, 400, "order %s is %s", orderID, o.State)
			}
			o.State = broker.StateCancelled
			if o.Side == broker.SideBuy && o.Type == broker.TypeLimit {
				a.Portfolio.BuyingPower = cents(a.Portfolio.BuyingPower + (o.Quantity-o.FilledQuantity)*o.LimitPrice)
			}
			if to {
				return broker.Order{}, timeoutErr(tool)
			}
			return *o, nil
		}
		return broker.Order{}, broker.Errorf(tool, 404, "order %s not found", orderID)
	})
}

// Orders implements broker.Broker.
func (s *Sim) Orders(ctx context.Context, number string) ([]broker.Order, error) {
	return do(s, ctx, func() ([]broker.Order, error) {
		if _, err := s.readAccount("get_equity_orders", number); err != nil {
			return nil, err
		}
		var out []broker.Order
		for _, o := range s.st.Orders {
			if o.AccountNumber == number {
				out = append(out, o)
			}
		}
		return out, nil
	})
}

// RealizedPnL implements broker.Broker. Span "day" is the current New York
// day; any other span is refused.
func (s *Sim) RealizedPnL(ctx context.Context, number, span string) (broker.PnL, error) {
	return do(s, ctx, func() (broker.PnL, error) {
		const tool = "get_realized_pnl"
		a, to, err := s.beginAccount(tool, number)
		if err != nil {
			return broker.PnL{}, err
		}
		if span != "day" {
			return broker.PnL{}, broker.Errorf(tool, 400, "span %q is not supported", span)
		}
		if to {
			return broker.PnL{}, timeoutErr(tool)
		}
		return broker.PnL{TotalRealizedGain: a.PnL[broker.Day(s.now())]}, nil
	})
}

var _ broker.Broker = (*Sim)(nil)
