package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestIfMatchOneAnswerEverywhere: every revisioned resource (trader
// strategies and concerns, shim provisions and context entries) answers a
// write of an existing record without If-Match with 428 if_match_required
// and a stale If-Match with 409 revision_mismatch (seed 002: "Mutations
// send If-Match; a mismatch is 409"), and neither changes the record.
func TestIfMatchOneAnswerEverywhere(t *testing.T) {
	in := start(t)
	if code, out, errOut := cli(t, "trader", "import", "testdata/strategies.yaml", "--data", in.data); code != 0 {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	_, out, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure", "--harness", "claude-code")
	key := strings.TrimSpace(out)
	harness := []string{"X-Caduceus-Harness", "claude-code"}
	with := func(hdr ...string) []string { return append(append([]string{}, harness...), hdr...) }

	if code, body := in.do(t, "POST", "/v1/provisions", key, map[string]any{"id": "P1", "triggers": map[string]any{"keyword": map[string]any{"any": []string{"refund"}}},
		"action": "respond_directly", "response": map[string]any{"text": "7 days"}}, harness...); code != 201 {
		t.Fatalf("create provision: %d %v", code, body)
	}
	if code, body := in.do(t, "POST", "/v1/context", key, map[string]any{"ref": "verb:deploy", "kind": "verb", "body": "make deploy"}, harness...); code != 201 {
		t.Fatalf("create context: %d %v", code, body)
	}

	type resource struct {
		path string
		hdr  []string // the headers every write needs
		body map[string]any
	}
	// read is a record as GET answers it; a concern has no GET of its own,
	// so it is found in the list.
	read := func(path string) map[string]any {
		t.Helper()
		if id, ok := strings.CutPrefix(path, "/v1/trader/concerns/"); ok {
			code, list := in.do(t, "GET", "/v1/trader/concerns", key, nil)
			items, _ := list["concerns"].([]any)
			for _, it := range items {
				if m, _ := it.(map[string]any); m["concern_id"] == id {
					return m
				}
			}
			t.Fatalf("concern %s not listed: %d %v", id, code, list)
		}
		code, body := in.do(t, "GET", path, key, nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %v", path, code, body)
		}
		return body
	}
	var resources []resource
	for _, r := range []resource{
		{path: "/v1/trader/strategies/9cf29124-65a7-4950-ac18-65f938e0239b"},
		{path: "/v1/trader/concerns/qndd8o9ppop6:xrpusd"},
		{path: "/v1/provisions/P1", hdr: harness},
		{path: "/v1/context/verb:deploy", hdr: harness},
	} {
		body := read(r.path)
		for _, f := range []string{"updated_at", "revision", "version", "sha256"} {
			delete(body, f)
		}
		r.body = body
		resources = append(resources, r)
	}
	for _, r := range resources {
		before := read(r.path)
		rev := fmt.Sprint(before["revision"])
		if v, ok := before["version"]; ok {
			rev = fmt.Sprint(v)
		}
		cases := []struct {
			name, method string
			hdr          []string
			status       int
			code         string
		}{
			{"PUT without If-Match", "PUT", r.hdr, 428, "if_match_required"},
			{"PUT with a stale If-Match", "PUT", append(append([]string{}, r.hdr...), "If-Match", "999"), 409, "revision_mismatch"},
		}
		if len(r.hdr) > 0 { // shim documents are deleted too
			cases = append(cases,
				struct {
					name, method string
					hdr          []string
					status       int
					code         string
				}{"DELETE without If-Match", "DELETE", with(), 428, "if_match_required"},
				struct {
					name, method string
					hdr          []string
					status       int
					code         string
				}{"DELETE with a stale If-Match", "DELETE", with("If-Match", "999"), 409, "revision_mismatch"})
		}
		for _, c := range cases {
			var body any
			if c.method == "PUT" {
				body = r.body
			}
			code, got := in.do(t, c.method, r.path, key, body, c.hdr...)
			if code != c.status || got["code"] != c.code {
				t.Errorf("%s %s: %d %v, want %d %s", c.name, r.path, code, got, c.status, c.code)
			}
		}
		if after := read(r.path); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s changed: %v -> %v", r.path, before, after)
		}
		// The current If-Match still writes.
		if code, got := in.do(t, "PUT", r.path, key, r.body, append(append([]string{}, r.hdr...), "If-Match", rev)...); code != 200 {
			t.Errorf("PUT %s with If-Match %s: %d %v", r.path, rev, code, got)
		}
	}
}
