package connector

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

var payloadStrings = []string{"", "in", "out", "telegram", "<&>", `a"b\c`, "é👋", "\u2028", "\xff", "\x00\n", "sha256:00"}

func deliveryFrom(strs []string, n int, bits uint32) *delivery {
	i := 0
	next := func() string {
		s := strs[i%len(strs)]
		i++
		if bits&(1<<(i%32)) != 0 {
			return ""
		}
		return s
	}
	return &delivery{Direction: next(), Platform: next(), Bot: next(), ChatID: next(), SessionKey: next(),
		MessageID: next(), BufferID: next(), Op: next(), RequestID: next(), Kind: next(), Chunks: n,
		ContentSHA256: next(), Gateway: next(), Conn: next(), Success: bits&(1<<31) != 0, Error: next()}
}

// plainDelivery is delivery without its writer: the audit log marshals
// it with encoding/json and canonicalizes that.
type plainDelivery delivery

// sameCanonical fails t unless d.WriteCanonicalJSON writes
// contract.CanonicalJSON(d) and the sealed audit record is the same
// either way.
func sameCanonical(t *testing.T, d *delivery) {
	t.Helper()
	want, err := contract.CanonicalJSON(d)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	d.WriteCanonicalJSON(&got)
	if !bytes.Equal(got.Bytes(), want) {
		t.Fatalf("%+v:\n got %s\nwant %s", d, got.Bytes(), want)
	}
	out := contract.AuditOutcome{At: "2026-01-02T03:04:05Z", Action: "relay.deliver", Resource: "telegram:1",
		Outcome: contract.OutcomeAllow, Identity: contract.Identity{TenantSlot: "slot-1", Subject: "usr_1",
			Surface: contract.SurfaceTelegram, Trust: contract.TrustRelay}}
	a, errA := audit.Seal(audit.Entry{Outcome: out, Payload: (*plainDelivery)(d)}, "evt_1", 1, audit.Genesis)
	b, errB := audit.Seal(audit.Entry{Outcome: out, Payload: d}, "evt_1", 1, audit.Genesis)
	if errA != nil || errB != nil || !bytes.Equal(a.Body, b.Body) || a.Hash != b.Hash {
		t.Fatalf("sealed records differ: %v %v\n%s\n%s", errA, errB, a.Body, b.Body)
	}
}

// TestDeliveryCanonical compares the hand-written canonical payload with
// contract.CanonicalJSON over generated deliveries.
func TestDeliveryCanonical(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for range 3000 {
		strs := make([]string, 1+rng.IntN(6))
		for i := range strs {
			strs[i] = payloadStrings[rng.IntN(len(payloadStrings))] + payloadStrings[rng.IntN(len(payloadStrings))]
		}
		n := []int{0, 1, 3, -2, 1 << 40}[rng.IntN(5)]
		sameCanonical(t, deliveryFrom(strs, n, rng.Uint32()))
	}
}

// FuzzDeliveryCanonical is TestDeliveryCanonical over fuzzed strings.
func FuzzDeliveryCanonical(f *testing.F) {
	f.Add("in", "telegram", "<&>\u2028", 3, uint32(0))
	f.Add("", "\xff", "", -1, uint32(0xffffffff))
	f.Fuzz(func(t *testing.T, a, b, c string, n int, bits uint32) {
		sameCanonical(t, deliveryFrom([]string{a, b, c}, n, bits))
	})
}

// TestHashes pins subject and contentHash to their definitions.
func TestHashes(t *testing.T) {
	for _, s := range append(payloadStrings, strings.Repeat("x", 300)) {
		sum := sha256.Sum256([]byte("relay:" + s))
		if got, want := subject(s), "usr_"+hex.EncodeToString(sum[:16]); got != want {
			t.Errorf("subject(%q) = %s, want %s", s, got, want)
		}
		want := contract.SHA256([]byte(s))
		if s == "" {
			want = ""
		}
		if got := contentHash(s); got != want {
			t.Errorf("contentHash(%q) = %s, want %s", s, got, want)
		}
	}
}

// TestDeliveryCanonicalCoversEveryField proves the hand-written payload over
// deliveries with every field filled and each field left empty in turn: a
// field added to delivery without its writer fails here.
func TestDeliveryCanonicalCoversEveryField(t *testing.T) {
	for _, d := range contracttest.Variants[delivery]() {
		sameCanonical(t, &d)
	}
}

// BenchmarkDeliveryPayload measures what an inbound message's delivery
// payload costs the audit log (audit.prepare): the hand-written writer
// ("hand") against encoding/json and contract.CanonicalJSON, what the log
// does with a payload without one ("encoding_json").
func BenchmarkDeliveryPayload(b *testing.B) {
	d := &delivery{Direction: "in", Platform: "telegram", Bot: "acmebot", ChatID: "-1001234567890",
		SessionKey: "agent:main:telegram:group:-1001234567890:9", MessageID: "77",
		ContentSHA256: contentHash("hi 👋, can you look at the deploy log?"), Conn: "conn_01KB00000000000000000000", Success: true}
	var got bytes.Buffer
	d.WriteCanonicalJSON(&got)
	if want, err := contract.CanonicalJSON(d); err != nil || !bytes.Equal(got.Bytes(), want) {
		b.Fatalf("the two differ (%v):\n%s\n%s", err, got.Bytes(), want)
	}
	b.Run("hand", func(b *testing.B) {
		contracttest.Loop(b, func() {
			var buf bytes.Buffer
			d.WriteCanonicalJSON(&buf)
		})
	})
	b.Run("encoding_json", func(b *testing.B) {
		contracttest.Loop(b, func() {
			if _, err := contract.CanonicalJSON(d); err != nil {
				b.Fatal(err)
			}
		})
	})
}
