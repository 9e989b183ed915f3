package connector_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// POST /relay/media and GET /relay/media/{id} as the gateway's media lane
// uses them (HERMES-RELAY.md §2.12): bearer = an upgrade token, raw body,
// X-Media-Filename, {id, size}; readable by the tenant for an hour.
func TestMediaEndpoints(t *testing.T) {
	e := newEnv(t)
	tokenA := hermesToken("gw-a", secretA, time.Now().Add(300*time.Second).Unix())
	tokenB := hermesToken("gw-b", secretB, time.Now().Add(300*time.Second).Unix())
	do := func(method, path, token string, body []byte, hdr map[string]string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, b
	}
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 1000)...)
	resp, body := do("POST", "/relay/media", tokenA, png, map[string]string{"Content-Type": "image/png", "X-Media-Filename": "chart.png"})
	var up struct {
		ID   string `json:"id"`
		Size int    `json:"size"`
	}
	if resp.StatusCode/100 != 2 || json.Unmarshal(body, &up) != nil || up.ID == "" || up.Size != len(png) {
		t.Fatalf("upload: %d %s", resp.StatusCode, body)
	}
	resp, body = do("GET", "/relay/media/"+up.ID, tokenA, nil, nil)
	if resp.StatusCode != 200 || !bytes.Equal(body, png) || resp.Header.Get("Content-Type") != "image/png" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), "chart.png") {
		t.Fatalf("download: %d %v", resp.StatusCode, resp.Header)
	}
	// Refusals: no or bad token, another tenant, empty, too large, bad name.
	for name, tc := range map[string]struct {
		method, path, token string
		body                []byte
		hdr                 map[string]string
		status              int
	}{
		"get without token":  {"GET", "/relay/media/" + up.ID, "", nil, nil, 401},
		"get other tenant":   {"GET", "/relay/media/" + up.ID, tokenB, nil, nil, 404},
		"get unknown":        {"GET", "/relay/media/rmed_nope", tokenA, nil, nil, 404},
		"post bad token":     {"POST", "/relay/media", "x" + tokenA, png, nil, 401},
		"post expired token": {"POST", "/relay/media", hermesToken("gw-a", secretA, time.Now().Add(-time.Minute).Unix()), png, nil, 401},
		"post empty":         {"POST", "/relay/media", tokenA, nil, nil, 400},
		"post too large":     {"POST", "/relay/media", tokenA, make([]byte, 25<<20+1), nil, 413},
		"post bad name":      {"POST", "/relay/media", tokenA, png, map[string]string{"X-Media-Filename": "../etc/passwd"}, 400},
	} {
		if resp, body := do(tc.method, tc.path, tc.token, tc.body, tc.hdr); resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", name, resp.StatusCode, body, tc.status)
		}
	}
	// Readable for an hour, gone after.
	e.clock.Advance(59 * time.Minute)
	tokenA = hermesToken("gw-a", secretA, e.clock.Now().Add(300*time.Second).Unix()) // the gateway mints one per request
	if resp, _ := do("GET", "/relay/media/"+up.ID, tokenA, nil, nil); resp.StatusCode != 200 {
		t.Errorf("after 59 min: %d", resp.StatusCode)
	}
	e.clock.Advance(2 * time.Minute)
	tokenA = hermesToken("gw-a", secretA, e.clock.Now().Add(300*time.Second).Unix())
	if resp, _ := do("GET", "/relay/media/"+up.ID, tokenA, nil, nil); resp.StatusCode != 404 {
		t.Errorf("after 61 min: %d", resp.StatusCode)
	}
}
