package shim_test

import (
	"strings"
	"testing"
)

// TestContextWritesReachTheNextRequest: rendering reuses context entries
// (like the provisions naming them), but an update or delete through the
// Service is in the very next shimmed request.
func TestContextWritesReachTheNextRequest(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	e.provision(t, "key-a", `{"id":"DEPLOY","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	e.context(t, "key-a", `{"ref":"verb:deploy","kind":"verb","body":"guide one"}`)
	const req = `{"model":"gpt-4o","messages":[{"role":"user","content":"please deploy it"}]}`
	forwarded := func() string {
		t.Helper()
		if resp, b := e.post(t, "key-a", "/v1/chat/completions", req, nil); resp.StatusCode != 200 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return string(e.up.last(t).Body)
	}
	if got := forwarded(); !strings.Contains(got, "guide one") {
		t.Fatalf("first request: %s", got)
	}
	a := callers["key-a"]
	if _, err := e.svc.UpdateContext(ctx, a, a.Harness, "verb:deploy", 1, []byte(`{"ref":"verb:deploy","kind":"verb","body":"guide two"}`)); err != nil {
		t.Fatal(err)
	}
	if got := forwarded(); !strings.Contains(got, "guide two") || strings.Contains(got, "guide one") {
		t.Fatalf("after the update: %s", got)
	}
	if err := e.svc.DeleteContext(ctx, a, a.Harness, "verb:deploy", 2); err != nil {
		t.Fatal(err)
	}
	if got := forwarded(); strings.Contains(got, "guide two") {
		t.Fatalf("after the delete: %s", got)
	}
}
