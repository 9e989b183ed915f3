package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard/guardtest"
)

// TestGuardrailsLeaveNoTrace runs serve with shim.guardrails (flag by
// default, so personal data goes upstream; secrets redacted; cards blocked
// on the plan) at debug level, traced to a collector, with an upstream
// whose answers hold an AWS key. After requests holding every planted
// value on each wire: the upstream saw the flagged values and none of the
// redacted ones, the card was refused with guardrail_blocked, the clients
// saw no key, /metrics counts the findings by direction, kind and action —
// and no file of the store, no log line, no exported span and no metric
// holds a planted value.
func TestGuardrailsLeaveNoTrace(t *testing.T) {
	col := &fakeCollector{}
	colURL := newHTTPServer(t, col)
	key := guardtest.Values[0].Value
	up := &fakeProvider{name: key}
	upURL := newHTTPServer(t, up)
	data := t.TempDir()
	conf := fmt.Sprintf(`gates: [shim]
log_level: debug
shim:
  routes:
    openai: {kind: openai, base_url: %[1]s/v1, models: [gpt-4.1]}
    anthropic: {kind: anthropic, base_url: %[1]s/v1, models: [claude-sonnet-4-5]}
  plans:
    main:
      failover: definite
      models:
        gpt-4.1: [{route: openai}]
        claude-sonnet-4-5: [{route: anthropic}]
  prices:
    openai/gpt-4.1: {input: 2, output: 8, max_output_tokens: 4096}
    anthropic/claude-sonnet-4-5: {input: 3, output: 15, max_output_tokens: 4096}
  guardrails:
    default: flag
    secret: redact
    private_key: redact
    plans:
      main: {card: block}
`, upURL)
	file := filepath.Join(data, "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "keys", "create", "--data", data, "--tenant", "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1,anthropic/claude-sonnet-4-5")
	if code != 0 {
		t.Fatalf("keys create: %s", errOut)
	}
	apiKey := strings.TrimSpace(out)
	p := startProc(t, nil, "--config", file, "--data", data, "--otlp-endpoint", colURL)

	post := func(path, body string) (int, string) {
		req, _ := http.NewRequest("POST", p.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+apiKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	noCard := guardtest.Values[:5] // key, token, private key, e-mail, phone
	prompt := strings.ReplaceAll(strings.ReplaceAll(guardtest.Prompt(slices.Concat(noCard, guardtest.Values[6:])), `\`, `\\`), "\n", `\n`)
	for _, w := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":"gpt-4.1","max_tokens":50,"messages":[{"role":"user","content":"` + prompt + `"}]}`},
		{"/v1/chat/completions", `{"model":"gpt-4.1","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"` + prompt + `"}]}`},
		{"/v1/responses", `{"model":"gpt-4.1","max_output_tokens":50,"input":"` + prompt + `"}`},
		{"/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"` + prompt + `"}]}`},
	} {
		status, answer := post(w.path, w.body)
		if status != 200 || strings.Contains(answer, key) || !strings.Contains(answer, "[REDACTED:secret:1]") {
			t.Fatalf("%s: %d %s", w.path, status, answer)
		}
		sent, _ := up.last.Load().(string)
		if leaks := guardtest.Leaks([]byte(sent), guardtest.Values[:3]); len(leaks) > 0 {
			t.Fatalf("%s: the upstream saw %v", w.path, leaks)
		}
		if !strings.Contains(sent, guardtest.Values[3].Value) {
			t.Fatalf("%s: the flagged e-mail did not reach the upstream: %s", w.path, sent)
		}
	}
	calls := up.calls.Load()
	status, refusal := post("/v1/chat/completions", `{"model":"gpt-4.1","max_tokens":50,"messages":[{"role":"user","content":"card `+guardtest.Values[5].Value+`"}]}`)
	if status != 400 || !strings.Contains(refusal, `"code":"guardrail_blocked"`) || !strings.Contains(refusal, "card") || up.calls.Load() != calls {
		t.Fatalf("card: %d %s (upstream calls %d -> %d)", status, refusal, calls, up.calls.Load())
	}

	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`caduceus_guardrail_findings_total{action="redact",direction="request",kind="secret"} 8`,
		`caduceus_guardrail_findings_total{action="redact",direction="answer",kind="secret"} 4`,
		`caduceus_guardrail_findings_total{action="flag",direction="request",kind="email"} 4`,
		`caduceus_guardrail_findings_total{action="block",direction="request",kind="card"} 1`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	p.stop(t)
	if code := <-p.done; code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, p.stderr.String())
	}
	p.done <- 0

	scan := func(what string, b []byte) {
		t.Helper()
		if leaks := guardtest.Leaks(b, guardtest.Values); len(leaks) > 0 {
			t.Errorf("%s holds %v", what, leaks)
		}
	}
	scan("/metrics", metrics)
	scan("the log", []byte(p.stderr.String()+p.stdout.String()))
	scanFiles(t, data, file, scan)
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.spans) == 0 {
		t.Fatal("no span exported")
	}
	for _, s := range col.spans {
		for k, v := range attrsOf(s.GetAttributes()) {
			scan("span "+s.GetName()+" attribute "+k, []byte(v))
		}
		for _, ev := range s.GetEvents() {
			for k, v := range attrsOf(ev.GetAttributes()) {
				scan("span "+s.GetName()+" event attribute "+k, []byte(v))
			}
		}
		scan("span name", []byte(s.GetName()))
	}
	if !strings.Contains(p.stderr.String(), "level=DEBUG") && !strings.Contains(p.stderr.String(), `"level":"DEBUG"`) {
		t.Logf("no debug line was logged")
	}
}

// scanFiles hands scan every file below dir but skip (a config file kept
// there, which is not the store), and fails when there is none.
func scanFiles(t *testing.T, dir, skip string, scan func(what string, b []byte)) {
	t.Helper()
	files := 0
	filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && path != skip {
			files++
			b, _ := os.ReadFile(path)
			scan(path, b)
		}
		return nil
	})
	if files == 0 {
		t.Fatal("no store file to scan")
	}
}
