package main

import (
	"strings"
	"testing"
)

// TestContributorProvisionRefusedOverHTTP: POST and PUT /v1/provisions of a
// provision whose micromodel names a contributor-tier model are 400
// contributor_model_refused naming the field (seed 003 H03), and nothing
// is stored.
func TestContributorProvisionRefusedOverHTTP(t *testing.T) {
	in := start(t)
	_, out, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure", "--harness", "claude-code")
	key := strings.TrimSpace(out)
	harness := []string{"X-Caduceus-Harness", "claude-code"}
	prov := func(model string) map[string]any {
		return map[string]any{"id": "MM", "triggers": map[string]any{"micromodel": map[string]any{"model": model, "question": "billing?"}},
			"action": "respond_directly", "response": map[string]any{"text": "no"}}
	}
	code, body := in.do(t, "POST", "/v1/provisions", key, prov("acme/Contributor-3b"), harness...)
	if code != 400 || body["code"] != "contributor_model_refused" || body["field"] != "/triggers/micromodel/model" {
		t.Errorf("POST: %d %v", code, body)
	}
	if code, body := in.do(t, "GET", "/v1/provisions/MM", key, nil); code != 404 {
		t.Fatalf("a refused provision was stored: %d %v", code, body)
	}
	if code, body := in.do(t, "POST", "/v1/provisions", key, prov("tiny-classifier"), harness...); code != 201 {
		t.Fatalf("POST a good one: %d %v", code, body)
	}
	code, body = in.do(t, "PUT", "/v1/provisions/MM", key, prov("x-contributor"), append(harness, "If-Match", "1")...)
	if code != 400 || body["code"] != "contributor_model_refused" {
		t.Errorf("PUT: %d %v", code, body)
	}
	if _, body := in.do(t, "GET", "/v1/provisions/MM", key, nil); body["version"] != float64(1) {
		t.Errorf("a refused update changed the provision: %v", body)
	}
}
