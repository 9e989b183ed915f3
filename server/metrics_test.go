package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/server"
	dto "github.com/prometheus/client_model/go"
)

// requestCount reads caduceus_http_requests_total and the request latency
// histogram's sample count for one route and outcome from the server's
// registry; the two must agree.
func requestCount(t *testing.T, s *server.Server, route, outcome string) int {
	t.Helper()
	families, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	counter, histogram := -1, -1
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if !hasLabels(m, route, outcome) {
				continue
			}
			switch f.GetName() {
			case "caduceus_http_requests_total":
				counter = int(m.GetCounter().GetValue())
			case "caduceus_http_request_duration_seconds":
				histogram = int(m.GetHistogram().GetSampleCount())
			}
		}
	}
	if counter != histogram {
		t.Errorf("%s %s: counter %d, latency samples %d", route, outcome, counter, histogram)
	}
	return max(counter, 0)
}

func hasLabels(m *dto.Metric, route, outcome string) bool {
	var r, o bool
	for _, l := range m.GetLabel() {
		r = r || l.GetName() == "route" && l.GetValue() == route
		o = o || l.GetName() == "outcome" && l.GetValue() == outcome
	}
	return r && o
}

// post sends body to path with the given headers and returns the status and
// the decoded answer.
func post(t *testing.T, url, path, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url+path, strings.NewReader(body))
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
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %d, not JSON: %s", path, resp.StatusCode, b)
	}
	return resp.StatusCode, m
}

// Every request of an LLM route and of the public preview is counted once,
// by the one wrapper, whatever its outcome; refusals before the shim answer
// in the route's protocol envelope (OpenAI's error object for chat
// completions, Anthropic's typed error for messages), the preview's as
// problems.
func TestLLMRoutesCountedOnce(t *testing.T) {
	e := newSlowEnv(t, server.DefaultBodyReadTimeout, 0)
	const chat = "POST /v1/chat/completions"
	const okBody = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	for range 3 {
		if code, m := post(t, e.url, "/v1/chat/completions", okBody, "Authorization", "Bearer "+e.key); code != 200 {
			t.Fatalf("chat completions: %d %v", code, m)
		}
	}
	// Refused by the wrapper: no key, then a body labelled as text.
	code, m := post(t, e.url, "/v1/chat/completions", okBody)
	if code != 401 || mustField(m, "error", "code") != "missing_key" || mustField(m, "error", "type") != "authentication_error" {
		t.Errorf("chat completions without a key: %d %v", code, m)
	}
	code, m = post(t, e.url, "/v1/chat/completions", okBody, "Authorization", "Bearer "+e.key, "Content-Type", "text/plain")
	if code != 415 || mustField(m, "error", "code") != "unsupported_media_type" {
		t.Errorf("chat completions as text: %d %v", code, m)
	}
	// Refused by the shim: a contributor-tier model.
	code, m = post(t, e.url, "/v1/chat/completions", `{"model":"acme-contributor-7b","messages":[]}`, "Authorization", "Bearer "+e.key)
	if code != 403 || mustField(m, "error", "code") != "contributor_model_refused" {
		t.Errorf("contributor model: %d %v", code, m)
	}
	if got := requestCount(t, e.srv, chat, "allow"); got != 3 {
		t.Errorf("%d allowed chat completions counted; want 3", got)
	}
	if got := requestCount(t, e.srv, chat, "deny"); got != 3 {
		t.Errorf("%d refused chat completions counted; want 3 (no key, text body, contributor model)", got)
	}

	code, m = post(t, e.url, "/v1/messages", `{"model":"claude-x","max_tokens":8,"messages":[]}`)
	if code != 401 || m["type"] != "error" || mustField(m, "error", "type") != "authentication_error" || !strings.HasPrefix(mustField(m, "error", "message"), "missing_key: ") {
		t.Errorf("messages without a key: %d %v", code, m)
	}
	if got := requestCount(t, e.srv, "POST /v1/messages", "deny"); got != 1 {
		t.Errorf("%d refused messages counted; want 1", got)
	}

	// Token counting: estimated without gateway routes; refusals in
	// Anthropic's envelope, not to be retried.
	const count = "POST /v1/messages/count_tokens"
	countBody := `{"model":"claude-x","messages":[{"role":"user","content":"12345678"}]}`
	if code, m := post(t, e.url, "/v1/messages/count_tokens", countBody, "Authorization", "Bearer "+e.key); code != 200 || m["input_tokens"] == nil {
		t.Errorf("count_tokens: %d %v", code, m)
	}
	req, _ := http.NewRequest("POST", e.url+"/v1/messages/count_tokens", strings.NewReader(countBody))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || resp.Header.Get("X-Should-Retry") != "false" {
		t.Errorf("count_tokens without a key: %d, X-Should-Retry %q", resp.StatusCode, resp.Header.Get("X-Should-Retry"))
	}
	if a, d := requestCount(t, e.srv, count, "allow"), requestCount(t, e.srv, count, "deny"); a != 1 || d != 1 {
		t.Errorf("count_tokens counted %d allowed, %d refused; want 1 and 1", a, d)
	}

	// The public preview: no key, counted once, problems for refusals.
	if code, m := post(t, e.url, "/api/preview?protocol=chat", okBody); code != 200 || m["decision"] == nil {
		t.Errorf("preview: %d %v", code, m)
	}
	if code, m := post(t, e.url, "/api/preview?protocol=nope", okBody); code != 400 || m["code"] != "bad_protocol" {
		t.Errorf("preview of an unknown protocol: %d %v", code, m)
	}
	if got := requestCount(t, e.srv, "POST /api/preview", "allow"); got != 1 {
		t.Errorf("%d previews counted; want 1", got)
	}
	if got := requestCount(t, e.srv, "POST /api/preview", "deny"); got != 1 {
		t.Errorf("%d refused previews counted; want 1", got)
	}
}

func mustField(m map[string]any, obj, field string) string {
	o, _ := m[obj].(map[string]any)
	s, _ := o[field].(string)
	return s
}
