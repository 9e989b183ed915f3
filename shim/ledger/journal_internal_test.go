package ledger

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// TestEncodeLedgerReadsAsEncodingJSON: the hand-written encoding of the
// journal's entries is JSON that reads back exactly as what encoding/json
// writes for them (it leaves <, > and & unescaped, as the canonical JSON
// does).
func TestEncodeLedgerReadsAsEncodingJSON(t *testing.T) {
	entries := []ledgerEntry{
		{ID: "rcpt_01M8QY2XPM56VK5TJV0E5G9E24-0", KeyID: "0123456789abcdef", Model: "openai/gpt-4.1", Day: "2026-12-01", Month: "2026-12",
			Amount: 966, Leases: [4]string{"lse_cd16630bf020_1", "", "", "lse_cd16630bf020_2"}, State: spendSettled, Final: 360, At: 1796099634903453},
		{ID: `odd "id" \ <tag> & é ✓ ` + "\u2028\x01\xff", KeyID: "k", Model: "m", State: spendReleased, Amount: -1, Final: 0, At: 0},
		{ID: "rcpt_2-0", KeyID: "k", Model: "m", Day: "2026-12-01", Month: "2026-12", State: spendSettled, Amount: 966, Final: 40, At: 1, Estimated: true},
	}
	if got := string(encodeLedger(entries[:1])); got != `[{"id":"rcpt_01M8QY2XPM56VK5TJV0E5G9E24-0","key":"0123456789abcdef","model":"openai/gpt-4.1","day":"2026-12-01","month":"2026-12","amount":966,"leases":["lse_cd16630bf020_1","","","lse_cd16630bf020_2"],"state":"settled","final":360,"at":1796099634903453}]` {
		t.Fatalf("encodeLedger: %s", got)
	}
	checkLedgerEncoding(t, entries)
	if got := string(encodeLedger(nil)); got != "[]" {
		t.Fatalf("no entries: %s", got)
	}
}

func checkLedgerEncoding(t *testing.T, entries []ledgerEntry) {
	t.Helper()
	want, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	var got, ref []ledgerEntry
	if err := json.Unmarshal(encodeLedger(entries), &got); err != nil {
		t.Fatalf("encodeLedger wrote bad JSON: %v\n%s", err, encodeLedger(entries))
	}
	if err := json.Unmarshal(want, &ref); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, ref) {
		t.Fatalf("read back %+v, want %+v", got, ref)
	}
}

// FuzzEncodeLedger: for any strings and numbers, the hand-written encoding
// reads back as what encoding/json writes reads back.
func FuzzEncodeLedger(f *testing.F) {
	f.Add("rcpt_1-0", "k1", "openai/gpt-4.1", "lse_1", int64(966), int64(360))
	f.Add("\"\\\x00\u2028<>&", "é", "\xff", "", int64(-1), int64(1<<62))
	f.Fuzz(func(t *testing.T, id, key, model, lease string, amount, final int64) {
		checkLedgerEncoding(t, []ledgerEntry{{ID: id, KeyID: key, Model: model, Day: "2026-12-01", Month: "2026-12", Amount: amount,
			Leases: [4]string{lease, "", lease, ""}, State: spendSettled, Final: final, At: amount ^ final}})
	})
}

// BenchmarkEncodeLedger measures the receipt row's ledger column for a
// turn of one settled attempt held by two leases: encodeLedger ("hand")
// against json.Marshal ("encoding_json").
func BenchmarkEncodeLedger(b *testing.B) {
	entries := []ledgerEntry{{ID: "rcpt_01M8QY2XPM56VK5TJV0E5G9E24-0", KeyID: "0123456789abcdef", Model: "openai/gpt-4.1",
		Day: "2026-12-01", Month: "2026-12", Amount: 966, Leases: [4]string{"lse_cd16630bf020_1", "", "", "lse_cd16630bf020_2"},
		State: spendSettled, Final: 360, At: 1796099634903453}}
	if want, _ := json.Marshal(entries); string(encodeLedger(entries)) != string(want) {
		b.Fatalf("the two differ:\n%s\n%s", encodeLedger(entries), want)
	}
	b.Run("hand", func(b *testing.B) {
		contracttest.Loop(b, func() { _ = encodeLedger(entries) })
	})
	b.Run("encoding_json", func(b *testing.B) {
		contracttest.Loop(b, func() {
			if _, err := json.Marshal(entries); err != nil {
				b.Fatal(err)
			}
		})
	})
}
