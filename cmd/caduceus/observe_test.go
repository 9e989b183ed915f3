package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/caduceus-dev/caduceus/contract"
)

// fakeCollector is an OpenTelemetry collector's OTLP/HTTP traces receiver:
// it decodes each POST /v1/traces (a protobuf ExportTraceServiceRequest)
// and keeps its spans and the service that sent them.
type fakeCollector struct {
	mu       sync.Mutex
	spans    []*tracepb.Span
	services map[string]bool
	bad      []string // requests it could not take
}

func (c *fakeCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		c.bad = append(c.bad, fmt.Sprintf("%s %s (%s)", r.Method, r.URL.Path, r.Header.Get("Content-Type")))
		http.Error(w, "not an OTLP/HTTP protobuf traces export", http.StatusBadRequest)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			c.bad = append(c.bad, "gzip: "+err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	var req coltracepb.ExportTraceServiceRequest
	if err == nil {
		err = proto.Unmarshal(b, &req)
	}
	if err != nil {
		c.bad = append(c.bad, "decode: "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if c.services == nil {
		c.services = map[string]bool{}
	}
	for _, rs := range req.GetResourceSpans() {
		c.services[attrsOf(rs.GetResource().GetAttributes())["service.name"]] = true
		for _, ss := range rs.GetScopeSpans() {
			c.spans = append(c.spans, ss.GetSpans()...)
		}
	}
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// attrsOf flattens OTLP attributes to strings (ints in decimal).
func attrsOf(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		default:
			m[kv.GetKey()] = kv.GetValue().String()
		}
	}
	return m
}

// TestOTLPTracesOfAFailover: serve --otlp-endpoint sends its spans to an
// OTLP/HTTP collector. A governed chat completion that carries the
// client's traceparent and fails over from one route (503) to the next is
// one server span continuing the client's trace (gate, tenant, route,
// model identity, outcome, conversation), with a client span for each
// upstream attempt (route, model identity, outcome, status) and the store
// commit's span under it; each provider got the traceparent of its
// attempt's span. The spans reach the collector by the flush at shutdown.
// No attribute holds the key or the prompt.
func TestOTLPTracesOfAFailover(t *testing.T) {
	col := &fakeCollector{}
	colURL := newHTTPServer(t, col)
	openaiUp, azureUp := &fakeProvider{name: "openai"}, &fakeProvider{name: "azure"}
	openaiUp.fail.Store(503)
	data := t.TempDir()
	conf := fmt.Sprintf(`gates: [shim]
shim:
  routes:
    openai: {kind: openai, base_url: %s/v1, models: [gpt-4.1]}
    azure-eu: {kind: openai, provider: azure, base_url: %s/v1, models: [gpt-4.1]}
  plans:
    main:
      failover: definite
      models:
        gpt-4.1: [{route: openai}, {route: azure-eu}]
  prices:
    openai/gpt-4.1: {input: 2, output: 8, max_output_tokens: 4096}
    azure/gpt-4.1: {input: 2, output: 8, max_output_tokens: 4096}
  budgets:
    key: {day: 1000}
`, newHTTPServer(t, openaiUp), newHTTPServer(t, azureUp))
	file := filepath.Join(data, "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := cli(t, "keys", "create", "--data", data, "--tenant", "slot-1", "--scopes", "route", "--models", "openai/gpt-4.1,azure/gpt-4.1")
	if code != 0 {
		t.Fatalf("keys create: %s", errOut)
	}
	key := strings.TrimSpace(out)
	p := startProc(t, nil, "--config", file, "--data", data, "--otlp-endpoint", colURL)

	const (
		traceID      = "4bf92f3577b34da6a3ce929d0e0e4736"
		clientSpan   = "00f067aa0ba902b7"
		conversation = "agent:main:telegram:dm:42"
		phrase       = "saffron-lighthouse-0451"
	)
	req, _ := http.NewRequest("POST", p.url+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4.1","max_tokens":50,"messages":[{"role":"user","content":"`+phrase+`"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+traceID+"-"+clientSpan+"-01")
	req.Header.Set(contract.HeaderConversation, conversation)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(answer), "from azure") {
		t.Fatalf("the failover: %d %s", resp.StatusCode, answer)
	}
	receipt := resp.Header.Get("X-Caduceus-Receipt")
	p.stop(t) // the spans still buffered are flushed on the way out
	code = <-p.done
	p.done <- code // for the cleanup's stop
	if code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, p.stderr.String())
	}

	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.bad) > 0 {
		t.Errorf("the collector refused: %v", col.bad)
	}
	if !col.services["caduceus"] {
		t.Errorf("services = %v, want caduceus", col.services)
	}
	var request *tracepb.Span
	var attempts, commits []*tracepb.Span
	for _, s := range col.spans {
		for k, v := range attrsOf(s.GetAttributes()) {
			if strings.Contains(v, phrase) || strings.Contains(v, key) || strings.Contains(v, strings.Split(key, "_")[2]) {
				t.Errorf("span %s: attribute %s holds the prompt or the key", s.GetName(), k)
			}
		}
		if hex.EncodeToString(s.GetTraceId()) != traceID {
			continue
		}
		switch s.GetName() {
		case "POST /v1/chat/completions":
			request = s
		case "shim.attempt":
			attempts = append(attempts, s)
		case "store.commit":
			commits = append(commits, s)
		}
	}
	if request == nil {
		t.Fatalf("no request span in the client's trace; spans: %v", names(col.spans))
	}
	if hex.EncodeToString(request.GetParentSpanId()) != clientSpan || request.GetKind() != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("request span: parent %x kind %v, want the client's span %s, server", request.GetParentSpanId(), request.GetKind(), clientSpan)
	}
	want := map[string]string{
		"caduceus.gate": "shim", "caduceus.tenant": "slot-1", "http.route": "/v1/chat/completions", "http.request.method": "POST",
		"caduceus.outcome": "allow", "http.response.status_code": "200", "caduceus.model": "gpt-4.1",
		"caduceus.model_identity": "azure/gpt-4.1", "caduceus.receipt": receipt,
		"caduceus.conversation": contract.ConversationFor("slot-1", conversation),
	}
	got := attrsOf(request.GetAttributes())
	for k, v := range want {
		if got[k] != v {
			t.Errorf("request span %s = %q, want %q", k, got[k], v)
		}
	}
	reqID := hex.EncodeToString(request.GetSpanId())
	if len(attempts) != 2 {
		t.Fatalf("attempt spans: %d, want 2 (%v)", len(attempts), names(col.spans))
	}
	for i, w := range []struct {
		route, id, outcome, status string
		up                         *fakeProvider
	}{{"openai", "openai/gpt-4.1", "definite", "503", openaiUp}, {"azure-eu", "azure/gpt-4.1", "answered", "200", azureUp}} {
		a := attempts[i]
		if a.GetStartTimeUnixNano() > attempts[1-i].GetStartTimeUnixNano() == (i == 0) {
			a = attempts[1-i] // in the order they began
		}
		at := attrsOf(a.GetAttributes())
		if hex.EncodeToString(a.GetParentSpanId()) != reqID || a.GetKind() != tracepb.Span_SPAN_KIND_CLIENT ||
			at["caduceus.shim.route"] != w.route || at["caduceus.model_identity"] != w.id || at["caduceus.outcome"] != w.outcome || at["http.response.status_code"] != w.status {
			t.Errorf("attempt %d: parent %x kind %v attributes %v, want a client span of the request with %+v", i, a.GetParentSpanId(), a.GetKind(), at, w)
		}
		wantTP := "00-" + traceID + "-" + hex.EncodeToString(a.GetSpanId()) + "-01"
		if tp, _ := w.up.traceparent.Load().(string); tp != wantTP {
			t.Errorf("%s got traceparent %q, want %q (its attempt's span)", w.route, tp, wantTP)
		}
	}
	found := false
	for _, c := range commits {
		if hex.EncodeToString(c.GetParentSpanId()) == reqID && attrsOf(c.GetAttributes())["db.system.name"] == "sqlite" {
			found = true
		}
	}
	if !found {
		t.Errorf("no store commit span under the request span (%d commit spans in the trace)", len(commits))
	}
}

func names(spans []*tracepb.Span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.GetName()+"@"+hex.EncodeToString(s.GetTraceId())[:8])
	}
	return out
}

// TestOTLPTarget: where serve sends its spans. The flag wins over the
// environment; the traces variable is a full URL, the generic one and the
// flag are base URLs under which traces go to /v1/traces; nothing set, or
// OTEL_SDK_DISABLED=true without the flag: no tracing; a URL that is not
// http(s) is refused at startup.
func TestOTLPTarget(t *testing.T) {
	for _, tc := range []struct {
		flag string
		env  map[string]string
		want string // "": no tracing
		bad  bool
	}{
		{},
		{flag: "http://127.0.0.1:4318", want: "http://127.0.0.1:4318/v1/traces"},
		{flag: "https://otel.example.com/otlp/", env: map[string]string{envOTLPEndpoint: "http://other:4318"}, want: "https://otel.example.com/otlp/v1/traces"},
		{env: map[string]string{envOTLPEndpoint: "http://collector:4318"}, want: "http://collector:4318/v1/traces"},
		{env: map[string]string{envOTLPEndpoint: "http://collector:4318", envOTLPTracesEndpoint: "http://traces:4318/custom"}, want: "http://traces:4318/custom"},
		{env: map[string]string{envOTLPEndpoint: "http://collector:4318", envOTelDisabled: "true"}},
		{flag: "http://127.0.0.1:4318", env: map[string]string{envOTelDisabled: "true"}, want: "http://127.0.0.1:4318/v1/traces"},
		{flag: "collector:4318", bad: true},
		{env: map[string]string{envOTLPEndpoint: "grpc://collector:4317"}, bad: true},
	} {
		a := &app{env: env{getenv: func(k string) string { return tc.env[k] }}, otlpEndpoint: tc.flag}
		got, on, err := a.otlpTarget()
		if tc.bad {
			if err == nil {
				t.Errorf("%+v: accepted", tc)
			}
			continue
		}
		if err != nil || on != (tc.want != "") || got != tc.want {
			t.Errorf("%+v: %q %v %v, want %q", tc, got, on, err, tc.want)
		}
	}
}

// TestMetricsPassPromtool: a serve (tracing on) that has answered
// requests of every gate — a trader decision, an executor tick, a governed
// LLM call, a relay webhook, the core's admin routes, refusals — is scraped
// at /metrics, and Prometheus's own linter (promtool check metrics, from
// Debian's prometheus package) finds nothing to say; the scrape has each
// gate's requests and each gateway route's health and upstream calls.
func TestMetricsPassPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed (apt-get install -y prometheus; .ci/run installs it)")
	}
	col := &fakeCollector{}
	up := &fakeProvider{name: "openai"}
	data := t.TempDir()
	file := writeConfig(t, data, oneRouteShim(newHTTPServer(t, up), `{input: 2, output: 8, max_output_tokens: 4096}`, `{day: 1000}`)+`relay:
  telegram:
    metricsbot:
      token: env:METRICS_TELEGRAM_TOKEN
      secret_token: env:METRICS_TELEGRAM_SECRET
      tenant: slot-1
`)
	mk := func(args ...string) string {
		t.Helper()
		code, out, errOut := cli(t, append([]string{"keys", "create", "--data", data, "--tenant", "slot-1"}, args...)...)
		if code != 0 {
			t.Fatalf("keys create %v: %s", args, errOut)
		}
		return strings.TrimSpace(out)
	}
	llmKey := mk("--scopes", "route", "--models", "openai/gpt-4.1")
	opKey := mk("--scopes", "route,operate")
	cronKey := mk("--scopes", "operate", "--context", "cron", "--harness", "autotrader")
	adminKey := mk("--scopes", "route,configure,operate,admin")
	if code, out, errOut := cli(t, "trader", "import", "testdata/strategies.yaml", "--data", data); code != 0 {
		t.Fatalf("trader import: %s %s", out, errOut)
	}
	env := []string{"METRICS_TELEGRAM_TOKEN=123456:metrics-token", "METRICS_TELEGRAM_SECRET=metricssecret"}
	p := startProc(t, env, "--config", file, "--data", data, "--skills", exSkills, "--scenario", exScenario, "--otlp-endpoint", newHTTPServer(t, col))

	send := func(method, path, key, body string, hdr ...string) int {
		t.Helper()
		req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, r := range []struct {
		method, path, key, body string
		hdr                     []string
		want                    int
	}{
		{"POST", "/v1/trader/decisions", opKey, `{"decision_id":"dec_metrics_1","concern_id":"qndd8o9ppop6:xrpusd","account_id":"qndd8o9ppop6","market_symbol":"xrpusd","action":"set_risk_mode","risk_mode":"reduced","reason":"metrics test","confidence":0.5,"dry_run":false,"override":false,"requested_at":"2026-04-16T20:15:00Z"}`, nil, 200},
		{"POST", "/v1/executor/ticks", cronKey, `{"payload":{"strategy":"momentum","mode":"live","intents":[{"symbol":"SPY","side":"buy","quantity_type":"shares","qty":1,"order_type":"market","intent_price":481.60,"max_slippage_pct":1,"time_in_force":"gfd","reason":"metrics test"}]}}`, []string{"Idempotency-Key", "tick-metrics-1"}, 200},
		{"POST", "/v1/chat/completions", llmKey, `{"model":"gpt-4.1","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, nil, 200},
		{"POST", "/v1/chat/completions", opKey, `{"model":"gpt-4.1","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, nil, 403},
		{"POST", "/hooks/telegram/metricsbot", "", `{"update_id":1}`, []string{"X-Telegram-Bot-Api-Secret-Token", "wrong"}, 401},
		{"GET", "/v1/admin/keys", adminKey, "", nil, 200},
		{"GET", "/v1/admin/keys", "", "", nil, 401},
	} {
		if got := send(r.method, r.path, r.key, r.body, r.hdr...); got != r.want {
			t.Errorf("%s %s: %d, want %d", r.method, r.path, got, r.want)
		}
	}

	resp, err := http.Get(p.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scrape, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(scrape)
	lint, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(lint)) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, lint)
	}
	for _, want := range []string{
		`caduceus_http_requests_total{outcome="allow",route="POST /v1/trader/decisions"} 1`,
		`caduceus_http_requests_total{outcome="allow",route="POST /v1/executor/ticks"} 1`,
		`caduceus_http_requests_total{outcome="allow",route="POST /v1/chat/completions"} 1`,
		`caduceus_http_requests_total{outcome="deny",route="POST /v1/chat/completions"} 1`,
		`caduceus_http_requests_total{outcome="deny",route="GET /v1/admin/keys"} 1`,
		`caduceus_http_request_duration_seconds_count{outcome="allow",route="POST /v1/executor/ticks"} 1`,
		`caduceus_shim_route_healthy{route="openai"} 1`,
		`caduceus_shim_upstream_attempts_total{outcome="answered",route="openai"} 1`,
		`caduceus_shim_upstream_attempt_duration_seconds_count{route="openai"} 1`,
	} {
		if !bytes.Contains(scrape, []byte(want+"\n")) {
			t.Errorf("the scrape has no %s", want)
		}
	}
	if bytes.Contains(scrape, []byte("slot-1")) {
		t.Error("the scrape names a tenant")
	}
}
