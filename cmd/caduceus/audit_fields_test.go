package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestAuditTailShowsSensitivityAndRedaction: caduceus audit tail shows each
// record's sensitivity (keys restricted, trader decisions sensitive) and
// the redaction of a record whose payload was reduced (an oversized
// decision body, kept as its sha256 and size), in its table and in --json,
// and GET /v1/audit shows them too.
func TestAuditTailShowsSensitivityAndRedaction(t *testing.T) {
	in := start(t)
	if status, _ := in.do(t, "POST", "/v1/admin/keys", in.adminKey, map[string]any{"scopes": []string{"route"}}); status != 201 {
		t.Fatalf("create key: %d", status)
	}
	_, opKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,operate")
	big := []byte(`{"reason":"` + strings.Repeat("x", 70<<10) + `"}`)
	if status, _, body := in.post(t, "/v1/trader/decisions", strings.TrimSpace(opKey), big); status != 400 {
		t.Fatalf("oversized decision: %d %s", status, body)
	}
	code, out, errOut := cli(t, "audit", "tail", "--data", in.data, "-n", "50")
	if code != 0 {
		t.Fatalf("tail: %s", errOut)
	}
	lines := strings.Split(out, "\n")
	if !strings.Contains(lines[0], "SENSITIVITY") || !strings.Contains(lines[0], "REDACTION") {
		t.Errorf("tail header %q", lines[0])
	}
	found := map[string]bool{}
	for _, l := range lines {
		switch {
		case strings.Contains(l, "keys.create") && strings.Contains(l, "restricted"):
			found["keys"] = true
		case strings.Contains(l, "trader.apply") && strings.Contains(l, "sensitive") && strings.Contains(l, "partial: refused request bytes kept as their sha256 and size"):
			found["trader"] = true
		}
	}
	if !found["keys"] || !found["trader"] {
		t.Errorf("tail shows %v of keys and trader:\n%s", found, out)
	}
	_, out, _ = cli(t, "audit", "tail", "--data", in.data, "--json", "-n", "50")
	if !strings.Contains(out, `"sensitivity":"restricted"`) || !strings.Contains(out, `"redaction":{"level":"partial"`) {
		t.Errorf("tail --json lacks the sensitivity or the redaction:\n%s", out)
	}
	status, body := in.do(t, "GET", "/v1/audit?action=keys.create", in.adminKey, nil)
	if b, _ := json.Marshal(body); status != 200 || !strings.Contains(string(b), `"sensitivity":"restricted"`) {
		t.Errorf("GET /v1/audit: %d %s", status, b)
	}
	if code, out, errOut := cli(t, "audit", "verify", "--data", in.data); code != 0 {
		t.Errorf("audit verify: %s %s", out, errOut)
	}
}
