package main

import (
	"strings"
	"testing"
)

// TestSeedNamesOfHerma: a harness written to seed 003 deploys with
// HERMA_EDGE_SECRET and attests itself with X-Herma-Harness; both work as
// aliases of CADUCEUS_EDGE_SECRET and X-Caduceus-Harness.
func TestSeedNamesOfHerma(t *testing.T) {
	env := map[string]string{"HERMA_EDGE_SECRET": "edge-s3cret"}
	in := startEnv(t, func(k string) string { return env[k] })
	_, out, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure", "--harness", "claude-code")
	key := strings.TrimSpace(out)
	provision := map[string]any{"id": "PROV-REFUNDS", "triggers": map[string]any{"keyword": map[string]any{"any": []string{"refund"}}},
		"action": "respond_directly", "response": map[string]any{"text": "Refunds take 14 days.", "stop_reason": "end_turn"}}

	if code, body := in.do(t, "POST", "/v1/provisions", key, provision, "X-Herma-Harness", "claude-code"); code != 403 || body["code"] != "edge_auth_required" {
		t.Fatalf("without x-edge-auth under HERMA_EDGE_SECRET: %d %v", code, body)
	}
	if code, body := in.do(t, "POST", "/v1/provisions", key, provision, "X-Edge-Auth", "edge-s3cret"); code != 403 || body["code"] != "harness_required" {
		t.Fatalf("without a harness header: %d %v", code, body)
	}
	if code, body := in.do(t, "POST", "/v1/provisions", key, provision, "X-Edge-Auth", "edge-s3cret", "X-Herma-Harness", "codex"); code != 403 || body["code"] != "harness_mismatch" {
		t.Fatalf("X-Herma-Harness naming another harness: %d %v", code, body)
	}
	if code, body := in.do(t, "POST", "/v1/provisions", key, provision, "X-Edge-Auth", "edge-s3cret", "X-Herma-Harness", "claude-code"); code != 201 {
		t.Fatalf("X-Herma-Harness naming the key's harness: %d %v", code, body)
	}
}
