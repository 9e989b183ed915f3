package executor_test

import (
	"regexp"
	"testing"

	"github.com/caduceus-dev/caduceus/executor"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestIdenticalTicksPlaceTwice: two ticks with the same intents and no
// idempotency key (or two different keys) are two ticks: each places its
// own order under its own UUIDv4 ref_id (seed 001, place_args.ref_id =
// uuid4()), both say placed with different order ids, and buying power
// drops twice.
func TestIdenticalTicksPlaceTwice(t *testing.T) {
	for name, keys := range map[string][2]string{
		"no key":         {"", ""},
		"different keys": {"key-00000021", "key-00000022"},
	} {
		t.Run(name, func(t *testing.T) {
			k := newKeyed(t)
			bp := func() float64 {
				t.Helper()
				p, err := k.sim.Portfolio(t.Context(), "619508153")
				if err != nil {
					t.Fatal(err)
				}
				return p.BuyingPower
			}
			start := bp()
			var envs [2]executor.Envelope
			for i, key := range keys {
				env, err := k.ex.Tick(t.Context(), keyedTick("slot-1", key, buyNVDA, ""))
				if err != nil || env.Replay || len(env.Actions) != 1 || env.Actions[0].Status != executor.StatusPlaced || env.Actions[0].OrderID == nil {
					t.Fatalf("tick %d: %+v, %v; want placed", i, env, err)
				}
				if !uuidV4.MatchString(env.Actions[0].RefID) {
					t.Errorf("tick %d: ref_id %q is not a UUIDv4", i, env.Actions[0].RefID)
				}
				envs[i] = env
			}
			a, b := envs[0].Actions[0], envs[1].Actions[0]
			if *a.OrderID == *b.OrderID || a.RefID == b.RefID {
				t.Errorf("both ticks report order %s / %s, ref_id %s / %s; want two orders under two ref_ids", *a.OrderID, *b.OrderID, a.RefID, b.RefID)
			}
			if n := len(k.sim.AllOrders()); n != 2 {
				t.Errorf("%d orders, want 2", n)
			}
			if envs[1].BuyingPower >= envs[0].BuyingPower {
				t.Errorf("second tick saw buying power %v, first %v; want it lower after the first order", envs[1].BuyingPower, envs[0].BuyingPower)
			}
			if end := bp(); start-end < 2*100 {
				t.Errorf("buying power %v -> %v: want two fills of about $100 each", start, end)
			}
		})
	}
}
