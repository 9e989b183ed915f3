package executor_test

import (
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/broker"
	"github.com/caduceus-dev/caduceus/broker/paper"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

// TestAlertKeywordsRouteToReviewAnomaly (seed 001, 3.4): each of the seed's
// words "price collar", "restriction", "margin", "pdt", "halt",
// "unsupported", found case-insensitively in a review alert, makes the
// intent review_anomaly, not placed, with the alert kept verbatim. The
// alert's type is one the table maps as informational, so the word alone
// decides; the control row (no word) is placed.
func TestAlertKeywordsRouteToReviewAnomaly(t *testing.T) {
	for _, c := range []struct {
		name    string
		message string
		anomaly bool
	}{
		{"price collar", "order is subject to a price collar", true},
		{"restriction", "restriction on this security", true},
		{"margin", "margin requirement applies", true},
		{"pdt", "pdt", true},
		{"halt", "trading halt in effect", true},
		{"unsupported", "unsupported order", true},
		{"mixed case", "Pattern Day Trader: PdT protection", true},
		{"upper case", "PRICE COLLAR APPLIED", true},
		{"no keyword", "fractional order", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sc := (&fixture{}).scenario(t)
			now, _, _ := sc.NowTime()
			sc.Now = ""
			alert := broker.Alert{Type: "FRACTIONAL_SHARES_NOTICE", Message: c.message}
			sc.ReviewAlerts = map[string][]broker.Alert{"NVDA": {alert}}
			sim, err := paper.New(sc, func() time.Time { return now })
			if err != nil {
				t.Fatal(err)
			}
			ex := &executor.Executor{Broker: sim, Store: executortest.NewMemory(), Audit: audit.NewMemory(), Skills: "testdata/skills", Now: func() time.Time { return now }}
			env, err := ex.Tick(t.Context(), executor.TickRequest{Payload: []byte(buyNVDA), Identity: identity(""), Context: executor.ContextCron})
			if err != nil || env.Aborted != nil || len(env.Actions) != 1 {
				t.Fatalf("tick: %+v, %v", env, err)
			}
			a := env.Actions[0]
			if len(a.Alerts) != 1 || a.Alerts[0] != alert {
				t.Errorf("alerts %+v; want %+v verbatim", a.Alerts, alert)
			}
			if c.anomaly {
				if a.Status != executor.StatusReviewAnomaly || a.OrderID != nil || len(sim.AllOrders()) != 0 {
					t.Errorf("alert %q: status %s, order %v, %d orders; want review_anomaly and nothing placed", c.message, a.Status, a.OrderID, len(sim.AllOrders()))
				}
				if !executor.Blocking(alert) {
					t.Errorf("Blocking(%+v) = false", alert)
				}
				return
			}
			if a.Status != executor.StatusPlaced || executor.Blocking(alert) {
				t.Errorf("alert %q without a keyword: status %s, blocking %v; want placed", c.message, a.Status, executor.Blocking(alert))
			}
		})
	}
}
