package paper_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
)

const base = `
now: "2026-06-26T10:00:00-04:00"
accounts:
  - account_number: "A"
    is_default: true
    agentic_allowed: true
    portfolio: {total_value: 1000, buying_power: 1000, cash: 1000}
    positions: [{symbol: SPY, quantity: 2, shares_available_for_sells: 2, average_buy_price: 400}]
    realized_pnl_day: -5
quotes:
  SPY: {last_trade_price: 481.50, bid_price: 481.40, ask_price: 481.60}
  QQQ: {last_trade_price: 100, bid_price: 99.5, ask_price: 100.5}
review_alerts:
  QQQ: [{type: PRICE_COLLAR, message: collar}]
faults:
  get_portfolio: [503, ok, timeout]
`

func sim(t *testing.T, src string) *paper.Sim {
	t.Helper()
	s, err := paper.ParseScenario([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	p, err := paper.New(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFills(t *testing.T) {
	s, ctx := sim(t, base), t.Context()
	buy := broker.OrderRequest{AccountNumber: "A", Symbol: "QQQ", Side: "buy", Type: "market", Quantity: 2, RefID: "r1"}
	o, err := s.Place(ctx, buy)
	if err != nil || o.State != broker.StateFilled || o.AveragePrice != 100.5 || o.FilledQuantity != 2 || o.Existing {
		t.Fatalf("market buy fills at the ask: %+v, %v", o, err)
	}
	sell := broker.OrderRequest{AccountNumber: "A", Symbol: "SPY", Side: "sell", Type: "market", Quantity: 1, RefID: "r2"}
	o, err = s.Place(ctx, sell)
	if err != nil || o.AveragePrice != 481.40 {
		t.Fatalf("market sell fills at the bid: %+v, %v", o, err)
	}
	pnl, _ := s.RealizedPnL(ctx, "A", "day")
	if pnl.TotalRealizedGain != 76.4 { // -5 + (481.40 - 400)
		t.Fatalf("realized pnl = %v, want 76.4", pnl.TotalRealizedGain)
	}
	rest := broker.OrderRequest{AccountNumber: "A", Symbol: "SPY", Side: "buy", Type: "limit", Quantity: 1, LimitPrice: 480, RefID: "r3"}
	o, err = s.Place(ctx, rest)
	if err != nil || o.State != broker.StateQueued || !o.Open() {
		t.Fatalf("non-marketable limit rests open: %+v, %v", o, err)
	}
	mkt := broker.OrderRequest{AccountNumber: "A", Symbol: "SPY", Side: "sell", Type: "limit", Quantity: 1, LimitPrice: 481, RefID: "r4"}
	if o, err := s.Place(ctx, mkt); err != nil || o.State != broker.StateFilled || o.AveragePrice != 481.40 {
		t.Fatalf("marketable sell limit fills at the bid: %+v, %v", o, err)
	}
	if _, err := s.Place(ctx, broker.OrderRequest{AccountNumber: "A", Symbol: "SPY", Side: "sell", Type: "market", Quantity: 5, RefID: "r5"}); broker.StatusOf(err) != 400 {
		t.Fatalf("selling shares not held: %v", err)
	}
	if _, err := s.Place(ctx, broker.OrderRequest{AccountNumber: "A", Symbol: "QQQ", Side: "buy", Type: "market", Quantity: 1000, RefID: "r6"}); broker.StatusOf(err) != 400 {
		t.Fatalf("buying beyond buying power: %v", err)
	}
	if _, err := s.Place(ctx, broker.OrderRequest{AccountNumber: "A", Symbol: "NOPE", Side: "buy", Type: "market", Quantity: 1, RefID: "r7"}); broker.StatusOf(err) != 400 {
		t.Fatalf("no quote: %v", err)
	}
	again, err := s.Place(ctx, buy)
	if err != nil || again.ID != "paper-000001" || !again.Existing || len(s.AllOrders()) != 4 {
		t.Fatalf("same ref_id must return the first order, marked Existing, and add none: %+v, %v, %d orders", again, err, len(s.AllOrders()))
	}
	c, err := s.Cancel(ctx, "A", "paper-000003")
	if err != nil || c.State != broker.StateCancelled {
		t.Fatalf("cancel open: %+v, %v", c, err)
	}
	if _, err := s.Cancel(ctx, "A", "paper-000003"); broker.StatusOf(err) != 400 {
		t.Fatalf("cancel twice: %v", err)
	}
	if _, err := s.Cancel(ctx, "A", "nope"); broker.StatusOf(err) != 404 {
		t.Fatalf("cancel unknown: %v", err)
	}
	r, err := s.Review(ctx, broker.OrderRequest{AccountNumber: "A", Symbol: "QQQ", Side: "buy", Type: "market", DollarAmount: 10})
	if err != nil || len(r.Alerts) != 1 || r.Alerts[0].Type != "PRICE_COLLAR" || r.Quote.AskPrice != 100.5 {
		t.Fatalf("review: %+v, %v", r, err)
	}
	if _, err := s.Review(ctx, broker.OrderRequest{AccountNumber: "A", Symbol: "QQQ", Side: "buy", Type: "limit", DollarAmount: 10, LimitPrice: 1}); broker.StatusOf(err) != 400 {
		t.Fatalf("dollar_amount with a limit order: %v", err)
	}
}

func TestFaultsInOrder(t *testing.T) {
	s, ctx := sim(t, base), t.Context()
	var got []int
	for range 4 {
		_, err := s.Portfolio(ctx, "A")
		got = append(got, broker.StatusOf(err))
	}
	if want := []int{503, 0, 504, 0}; !equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestTimeoutStillActs(t *testing.T) {
	s, ctx := sim(t, base+"  place_equity_order: [timeout]\n"), t.Context()
	req := broker.OrderRequest{AccountNumber: "A", Symbol: "QQQ", Side: "buy", Type: "market", Quantity: 1, RefID: "r"}
	if _, err := s.Place(ctx, req); !broker.IsTimeout(err) {
		t.Fatalf("want a timeout, got %v", err)
	}
	if n := len(s.AllOrders()); n != 1 {
		t.Fatalf("the timed-out placement must have acted: %d orders", n)
	}
	o, err := s.Place(ctx, req)
	if err != nil || o.ID != "paper-000001" || len(s.AllOrders()) != 1 {
		t.Fatalf("retry with the same ref_id: %+v, %v", o, err)
	}
}

func TestPnLResetsAtNewYorkMidnight(t *testing.T) {
	ny := broker.NewYork
	clock := time.Date(2026, 6, 26, 23, 59, 0, 0, ny)
	sc, err := paper.ParseScenario([]byte(strings.Replace(base, `now: "2026-06-26T10:00:00-04:00"`, "", 1)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := paper.New(sc, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if p, _ := s.RealizedPnL(ctx, "A", "day"); p.TotalRealizedGain != -5 {
		t.Fatalf("day 1 = %v", p)
	}
	clock = time.Date(2026, 6, 27, 0, 0, 0, 0, ny)
	if p, _ := s.RealizedPnL(ctx, "A", "day"); p.TotalRealizedGain != 0 {
		t.Fatalf("after midnight New York = %v, want 0", p)
	}
	if _, err := s.RealizedPnL(ctx, "A", "week"); broker.StatusOf(err) != 400 {
		t.Fatalf("unsupported span: %v", err)
	}
}

type memPersist struct {
	mu    sync.Mutex
	b     []byte
	v     int64
	saves int
}

func (m *memPersist) Load(context.Context) ([]byte, int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.b, m.v, nil
}

func (m *memPersist) Save(_ context.Context, b []byte, v int64) (int64, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if v != m.v {
		return 0, false, nil
	}
	m.b, m.v = b, m.v+1
	m.saves++
	return m.v, true, nil
}

func TestPersistence(t *testing.T) {
	sc, err := paper.ParseScenario([]byte(base))
	if err != nil {
		t.Fatal(err)
	}
	mp := &memPersist{}
	ctx := t.Context()
	s1, err := paper.Open(ctx, mp, sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Place(ctx, broker.OrderRequest{AccountNumber: "A", Symbol: "QQQ", Side: "buy", Type: "market", Quantity: 1, RefID: "r"}); err != nil {
		t.Fatal(err)
	}
	if mp.saves != 1 {
		t.Fatalf("%d saves after one placement", mp.saves)
	}
	s2, err := paper.Open(ctx, mp, sc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(s2.AllOrders()); n != 1 {
		t.Fatalf("reopened simulator has %d orders", n)
	}
	o, err := s2.Place(ctx, broker.OrderRequest{AccountNumber: "A", Symbol: "QQQ", Side: "buy", Type: "market", Quantity: 1, RefID: "r"})
	if err != nil || o.ID != "paper-000001" {
		t.Fatalf("ref_id index must survive a reload: %+v, %v", o, err)
	}
	p, _ := s2.Positions(ctx, "A")
	if len(p) != 2 {
		t.Fatalf("positions after reload: %+v", p)
	}
	if err := s2.Restore([]byte("{")); err == nil {
		t.Fatal("restore of garbage succeeded")
	}
}

func TestParseScenarioErrors(t *testing.T) {
	for name, src := range map[string]string{
		"unknown key":       "acounts: []\n",
		"unknown fault":     "faults: {place_order: [503]}\n",
		"bad fault":         "faults: {get_portfolio: [200]}\n",
		"bad fault word":    "faults: {get_portfolio: [boom]}\n",
		"duplicate account": "accounts: [{account_number: A}, {account_number: A}]\n",
		"no account number": "accounts: [{is_default: true}]\n",
		"negative price":    "quotes: {SPY: {last_trade_price: -1}}\n",
		"bad now":           "now: yesterday\n",
		"oversold position": "accounts: [{account_number: A, positions: [{symbol: SPY, quantity: 1, shares_available_for_sells: 2}]}]\n",
		"orphan order":      "orders: [{id: o, account_number: Z}]\n",
		"nan price":         "quotes: {SPY: {last_trade_price: .nan}}\n",
		"infinite cash":     "accounts: [{account_number: A, portfolio: {cash: .inf}}]\n",
	} {
		if _, err := paper.ParseScenario([]byte(src)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !strings.HasPrefix(err.Error(), "paper: scenario: ") {
			t.Errorf("%s: error %q lacks the package prefix", name, err)
		}
	}
}

func FuzzParseScenario(f *testing.F) {
	f.Add([]byte(base))
	f.Add([]byte("faults: {place_equity_order: [503, timeout, ok]}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := paper.ParseScenario(b)
		if err != nil {
			return
		}
		sim, err := paper.New(s, nil)
		if err != nil {
			t.Fatalf("parsed scenario does not build: %v", err)
		}
		qs, _ := sim.Quotes(t.Context(), []string{"SPY"})
		for _, q := range qs {
			if q.AskPrice != q.AskPrice || q.AskPrice < 0 {
				t.Fatalf("bad quote accepted: %+v", q)
			}
		}
	})
}
