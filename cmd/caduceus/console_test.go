package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestConsoleCommand: caduceus console prints one login link for a key's
// tenant or every tenant, refuses what it cannot mint for, and the link
// signs in once at the running server.
func TestConsoleCommand(t *testing.T) {
	in := start(t)
	_, key, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-2", "--scopes", "route")
	id := strings.Split(strings.TrimSpace(key), "_")[1]
	_, gone, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-2", "--scopes", "route")
	goneID := strings.Split(strings.TrimSpace(gone), "_")[1]
	if code, _, errOut := cli(t, "keys", "revoke", "--data", in.data, goneID); code != 0 {
		t.Fatal(errOut)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--key KEYID"},
		{[]string{"--key", id, "--all-tenants"}, "--key KEYID"},
		{[]string{"--key", "0000000000000000"}, "no key 0000000000000000"},
		{[]string{"--key", goneID}, "revoked"},
		{[]string{"--all-tenants", "--ttl", "2h"}, "--ttl"},
		{[]string{"--all-tenants", "--url", "ftp://x"}, "--url"},
	} {
		code, out, errOut := cli(t, append([]string{"console", "--data", in.data}, tc.args...)...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("console %v: exit %d, stdout %q, stderr %q; want exit 2 naming %q", tc.args, code, out, errOut, tc.want)
		}
	}
	code, out, errOut := cli(t, "console", "--data", in.data, "--key", id, "--url", in.url+"/")
	link := strings.TrimSpace(out)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(link, in.url+"/console/login?token=ct1.") || !strings.Contains(errOut, "works once") {
		t.Fatalf("console --key: %d %q %q", code, out, errOut)
	}
	for i, want := range []int{http.StatusOK, http.StatusUnauthorized} {
		resp, err := http.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("use %d of the link: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
}
