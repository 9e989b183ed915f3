package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// post sends body to path with key and the header pairs hdr, and returns
// the status, whether the answer is marked as a replay, and the body.
func (in *instance) post(t *testing.T, path, key string, body []byte, hdr ...string) (int, bool, []byte) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "POST", in.url+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", b
}

// TestTraderDecisionIdempotencyKeyAndDecisionID: the trader's decision_id
// (seed 000) and the Idempotency-Key header do not fight. The same key and
// decision replay the stored answer byte for byte (the trader does not run:
// no new attempt); another key, or none, reaches the trader, which replays
// the decision by its decision_id (its first answer plus replayed: true); the
// same key with another decision is a conflict.
func TestTraderDecisionIdempotencyKeyAndDecisionID(t *testing.T) {
	in := start(t)
	if code, out, errOut := cli(t, "trader", "import", "testdata/strategies.yaml", "--data", in.data); code != 0 {
		t.Fatalf("import: %s %s", out, errOut)
	}
	_, opKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,operate")
	key := strings.TrimSpace(opKey)
	decision, err := os.ReadFile("testdata/decision.json")
	if err != nil {
		t.Fatal(err)
	}
	status, replayed, first := in.post(t, "/v1/trader/decisions", key, decision, "Idempotency-Key", "decision-key-0001")
	if status != 200 || replayed || !strings.Contains(string(first), `"status":"applied"`) {
		t.Fatalf("first: %d %v %s", status, replayed, first)
	}
	status, replayed, again := in.post(t, "/v1/trader/decisions", key, decision, "Idempotency-Key", "decision-key-0001")
	if status != 200 || !replayed || !bytes.Equal(again, first) {
		t.Errorf("same key: %d %v %s, want the first answer %s", status, replayed, again, first)
	}
	for _, hdr := range [][]string{{"Idempotency-Key", "decision-key-0002"}, nil} {
		status, replayed, body := in.post(t, "/v1/trader/decisions", key, decision, hdr...)
		if status != 200 || replayed || !strings.Contains(string(body), `"replayed":true`) || !strings.Contains(string(body), `"status":"applied"`) {
			t.Errorf("%v: %d %v %s, want the trader's replay by decision_id", hdr, status, replayed, body)
		}
	}
	var other map[string]any
	json.Unmarshal(decision, &other)
	other["decision_id"] = "dec_2026_04_16_002"
	otherBody, _ := json.Marshal(other)
	status, _, body := in.post(t, "/v1/trader/decisions", key, otherBody, "Idempotency-Key", "decision-key-0001")
	if status != 409 || !strings.Contains(string(body), "idempotency_key_conflict") {
		t.Errorf("same key, another decision: %d %s", status, body)
	}
	// Attempts: the first, and the trader's two replays by decision_id; the
	// key's replay and the conflict never reached the trader.
	code, out, _ := cli(t, "trader", "history", "--data", in.data, "--concern", "qndd8o9ppop6:xrpusd")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Errorf("history: %d %s", code, out)
	}
	if code, out, errOut := cli(t, "audit", "verify", "--data", in.data); code != 0 {
		t.Errorf("audit verify: %s %s", out, errOut)
	}
}
