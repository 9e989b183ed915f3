package shim_test

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/contract/contracttest"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
)

// TestReceiptCanonicalCoversEveryField proves the receipt's hand-written
// canonical JSON equal to contract.CanonicalJSON of its encoding/json form,
// with every field filled at every depth and with each left empty in turn:
// a field added to the receipt (or to what it holds) without its writer
// fails here instead of leaving the audit record.
func TestReceiptCanonicalCoversEveryField(t *testing.T) {
	paths := contracttest.Fields[shim.Receipt]()
	variants := contracttest.Variants[shim.Receipt]()
	// Nil lists (null) and floats encoding/json writes in exponent form.
	small, large := 1e-9, 1e21
	variants = append(variants, shim.Receipt{},
		shim.Receipt{Fired: []shim.Fired{{Confidence: &small}, {Confidence: &large}}, Shimmed: []shim.Shimmed{}})
	for i, r := range variants {
		var got bytes.Buffer
		r.WriteCanonicalJSON(&got)
		raw, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		want, err := contract.CanonicalJSON(json.RawMessage(raw))
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != string(want) {
			what := "every field filled"
			switch {
			case i > len(paths):
				what = "extra case"
			case i > 0:
				what = paths[i-1] + " left empty"
			}
			t.Fatalf("%s:\n got  %s\n want %s", what, got.String(), want)
		}
	}
}

// TestReceiptCanonicalNaN: a confidence encoding/json cannot write is null,
// so the record still seals.
func TestReceiptCanonicalNaN(t *testing.T) {
	nan := math.NaN()
	var b bytes.Buffer
	shim.Receipt{Fired: []shim.Fired{{Confidence: &nan}}}.WriteCanonicalJSON(&b)
	if !json.Valid(b.Bytes()) || !bytes.Contains(b.Bytes(), []byte(`"confidence":null`)) {
		t.Fatalf("NaN confidence: %s", b.String())
	}
}

// benchReceipt is a forwarded request's receipt: one rule fired, one
// context entry shimmed, one skipped, one gateway attempt settled.
func benchReceipt() shim.Receipt {
	conf := 0.91
	return shim.Receipt{
		ID: "rcpt_01M8QY2XPM56VK5TJV0E5G9E24", At: "2026-12-01T10:20:30.123456Z", Tenant: "slot-acme",
		Subject: "usr_5f0c2a7d9b1e4c3a8f6d2b0e1a9c7d5e", KeyID: "0123456789abcdef", Harness: "claude-code",
		Protocol: "chat_completions", Model: "gpt-4.1", Stream: true, ConversationID: "conv_01M8QY2XPM56VK5TJV0E5G9E24",
		Decision: shim.DecisionForward, Evaluated: 12,
		Fired:   []shim.Fired{{ID: "prov_deploy", Version: 3, Action: "shim", Tier: 2, Reason: "semantic:0.91", Confidence: &conf}},
		Skipped: []shim.Skipped{{ID: "prov_style", Version: 1, Reason: "budget"}},
		Shimmed: []shim.Shimmed{{Provision: "prov_deploy", Ref: "docs/deploy.md", Version: 3,
			SHA256: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", Chars: 1834}},
		RequestSHA256:   "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae",
		ForwardedSHA256: "sha256:fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9",
		ResponseSHA256:  "sha256:baa5a0964d3320fbc0c6a922140453c8513ea24ab8fd0577034804a967248096",
		Upstream:        "openai", UpstreamStatus: 200, OverheadMicros: 412,
		Spend: &shim.Spend{Plan: "default", Reserved: 966, Settled: 360, Attempts: []gateway.Attempt{{Route: "openai-main",
			Model: "openai/gpt-4.1", Outcome: "answered", Status: 200, Reservation: "rsv_01M8QY2XPM56VK5TJV0E5G9E24-0",
			Reserved: 966, Settled: 360}}},
		AuditID: "evt_01M8QY2XPM56VK5TJV0E5G9E24",
		Route:   &contract.Route{Requested: "gpt-4.1", ResolvedTarget: "openai/gpt-4.1", Provider: "openai"},
	}
}

// BenchmarkReceiptJSON measures a receipt's canonical JSON as the audit
// log makes it (audit.prepare): the hand-written writer ("hand") against
// encoding/json and contract.CanonicalJSON ("encoding_json").
func BenchmarkReceiptJSON(b *testing.B) {
	r := benchReceipt()
	var got bytes.Buffer
	r.WriteCanonicalJSON(&got)
	raw, _ := json.Marshal(r)
	if want, err := contract.CanonicalJSON(json.RawMessage(raw)); err != nil || !bytes.Equal(got.Bytes(), want) {
		b.Fatalf("the two differ (%v):\n%s\n%s", err, got.Bytes(), want)
	}
	b.Run("hand", func(b *testing.B) {
		contracttest.Loop(b, func() {
			var buf bytes.Buffer
			r.WriteCanonicalJSON(&buf)
		})
	})
	b.Run("encoding_json", func(b *testing.B) {
		contracttest.Loop(b, func() {
			raw, err := json.Marshal(r)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := contract.CanonicalJSON(json.RawMessage(raw)); err != nil {
				b.Fatal(err)
			}
		})
	})
}
