package executor_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

// FuzzParsePayload: any bytes either parse into a payload whose intents are
// executable as written, or fail with an invalid error naming what is wrong.
// A Tick on bytes that do not parse never reaches the broker.
func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{
		`{"strategy":"momentum","mode":"live","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":3,"order_type":"market","intent_price":481.6,"max_slippage_pct":1}]}`,
		`{"strategy":"momentum","intents":[{"side":"cancel","order_id":"ord-1"}]}`,
		`{"strategy":"m","intents":[{"symbol":"SPY","side":"sell","quantity_type":"notional","notional_usd":50,"order_type":"limit","limit_price":1,"intent_price":1,"expires_at":"2026-06-26T10:00:00Z","asset_class":"option-l2","option_leg":{"k":1}}]}`,
		`{"strategy":"../x","intents":[]}`,
		`{"intents":null}`, `[]`, `null`, `{"strategy":1}`, `{"strategy":"s","intents":[{}]}`,
		`{"strategy":"s","intents":[{"side":"buy","qty":1e999}]}`,
	} {
		f.Add([]byte(s))
	}
	b := &countingBroker{}
	ex := &executor.Executor{Broker: b, Store: nopStore{}, Audit: nopLog{}, Skills: "testdata/skills"}
	id := contract.Identity{TenantSlot: "slot-1", Subject: "usr_00000000000000000000000000000001", Surface: contract.SurfaceWorker, Trust: contract.TrustRouter}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := executor.ParsePayload(data)
		if err != nil {
			var ce *contract.Error
			if !errors.As(err, &ce) || ce.Kind != contract.KindInvalid || ce.Message == "" || ce.Code == "" {
				t.Fatalf("parse error is not a clear invalid error: %#v", err)
			}
			before := b.calls
			if _, terr := ex.Tick(t.Context(), executor.TickRequest{Payload: data, Identity: id}); contract.KindOf(terr) != contract.KindInvalid {
				t.Fatalf("Tick on unparseable bytes: %v", terr)
			}
			if b.calls != before {
				t.Fatal("Tick called the broker for an invalid payload")
			}
			return
		}
		for i, in := range p.Intents {
			switch in.Side {
			case executor.SideCancel:
				if in.OrderID == "" {
					t.Fatalf("intent %d: cancel without order_id accepted", i)
				}
			case executor.SideBuy, executor.SideSell:
				if in.IntentPrice <= 0 || in.Symbol == "" || (in.Qty <= 0 && in.NotionalUSD <= 0) || in.MaxSlippagePct < 0 {
					t.Fatalf("intent %d accepted but not executable: %+v", i, in)
				}
			default:
				t.Fatalf("intent %d: side %q accepted", i, in.Side)
			}
		}
		if _, err := json.Marshal(p); err != nil {
			t.Fatalf("parsed payload does not encode: %v", err)
		}
	})
}

// FuzzParseManifest: any bytes either parse into a manifest with a name and
// a live or review mode, or fail with an invalid error.
func FuzzParseManifest(f *testing.F) {
	for _, s := range []string{
		"---\nname: m\nstrategist:\n  mode: live\n  account_lock: null\n  allowlist: [SPY]\n  max_position_pct: 10\n  max_concurrent_positions: 3\n  profile_compatibility: [claude-code]\n---\nbody",
		"---\nname: m\nstrategist: {mode: review, time_window: \"09:30-16:00 America/New_York\"}\n---\n",
		"---\r\nname: m\r\n---", "---\n---\n", "", "---\nname: [\n---\n", "---\nname: m\nstrategist: {mode: live, max_position_pct: .nan}\n---\n",
		"---\nname: &a m\nx: *a\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := executor.ParseManifest(data)
		if err != nil {
			if contract.KindOf(err) != contract.KindInvalid || contract.AsError(err).Message == "" {
				t.Fatalf("not a clear invalid error: %v", err)
			}
			return
		}
		if m.Name == "" || (m.Strategist.Mode != executor.ModeLive && m.Strategist.Mode != executor.ModeReview) {
			t.Fatalf("accepted %+v", m)
		}
		if p := m.Strategist.MaxPositionPct; p < 0 || p > 100 || p != p {
			t.Fatalf("accepted max_position_pct %v", p)
		}
	})
}

// FuzzParseDirectives: parsing never panics and every directive it returns
// is well formed.
func FuzzParseDirectives(f *testing.F) {
	for _, s := range []string{"EXECUTE: buy SPY 3", "EXECUTE: sell QQQ $50 notional\nEXECUTE: cancel ord-1", "EXECUTE:", "EXECUTE: buy SPY 1e309"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, msg string) {
		ds, _ := executor.ParseDirectives(msg)
		for _, d := range ds {
			switch d.Side {
			case executor.SideCancel:
				if d.OrderID == "" {
					t.Fatalf("cancel without id: %+v", d)
				}
			case executor.SideBuy, executor.SideSell:
				if d.Symbol == "" || (d.Notional && !(d.Amount > 0)) || (!d.Notional && !(d.Qty > 0)) {
					t.Fatalf("bad directive %+v", d)
				}
			default:
				t.Fatalf("side %q", d.Side)
			}
		}
	})
}

// FuzzDecodeTickInput: any bytes as a tick body (HTTP) or MCP arguments
// either decode or are an invalid error; a decoded input with a malformed
// idempotency key is refused invalid before any broker call or claim.
func FuzzDecodeTickInput(f *testing.F) {
	f.Add([]byte(`{"payload":{"strategy":"momentum","intents":[]},"idempotency_key":"key-00000001"}`))
	f.Add([]byte(`{"payload":{},"idempotency_key":"bad key"}`))
	f.Add([]byte(`{"payload":{"strategy":"x"},"message":"EXECUTE: buy SPY 1"} trailing`))
	b := &countingBroker{}
	ex := &executor.Executor{Broker: b, Store: nopStore{}, Audit: nopLog{}, Skills: "testdata/skills"}
	caller := contract.Caller{
		Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_00000000000000000000000000000001", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		Scopes:   []contract.Scope{contract.ScopeOperate},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := executor.DecodeTickInput(data)
		if err != nil {
			if contract.KindOf(err) != contract.KindInvalid || contract.AsError(err).Message == "" {
				t.Fatalf("decode error is not a clear invalid error: %#v", err)
			}
			return
		}
		if in.IdempotencyKey == "" || contract.ValidIdempotencyKey(in.IdempotencyKey) {
			return
		}
		before := b.calls
		if _, err := ex.TickAs(t.Context(), caller, in); contract.KindOf(err) != contract.KindInvalid {
			t.Fatalf("malformed key %q: %v", in.IdempotencyKey, err)
		}
		if b.calls != before {
			t.Fatal("a malformed key reached the broker")
		}
	})
}
