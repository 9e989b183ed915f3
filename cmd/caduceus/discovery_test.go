package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/pb33f/libopenapi"
	"github.com/pb33f/libopenapi-validator/schema_validation"
)

// get fetches path from in without a key.
func get(t *testing.T, in *instance, path string) (int, string, []byte) {
	t.Helper()
	resp, err := http.Get(in.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

// TestDiscoveryIsPublicAndFromTheRouteTable (seed 003 H14): GET
// /openapi.json, GET /.well-known/mcp.json and GET / answer without a key,
// write no audit record, hold no tenant data, and describe what the
// server really serves: the OpenAPI document validates as OpenAPI 3.1 and
// has an operation for every route of serve's table; the MCP description
// lists the gates' tools.
func TestDiscoveryIsPublicAndFromTheRouteTable(t *testing.T) {
	in := start(t)
	// Tenant data that must not show: a key with its id.
	code, created := in.do(t, "POST", "/v1/admin/keys", in.adminKey, map[string]any{"tenant": "slot-1", "scopes": []string{"route"}})
	if code != 201 {
		t.Fatalf("create key: %d %v", code, created)
	}
	keyID, _ := created["id"].(string)
	_, before := in.do(t, "GET", "/v1/audit?limit=1000", in.adminKey, nil)

	code, ct, doc := get(t, in, "/openapi.json")
	if code != 200 || !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("openapi.json: %d %s %s", code, ct, doc)
	}
	d, err := libopenapi.NewDocument(doc)
	if err != nil {
		t.Fatalf("openapi.json does not parse as OpenAPI: %v", err)
	}
	if ok, errs := schema_validation.ValidateOpenAPIDocument(d); !ok {
		for _, e := range errs {
			t.Errorf("openapi.json is not valid OpenAPI 3.1: %s: %s", e.Message, e.Reason)
			for _, v := range e.SchemaValidationErrors {
				t.Errorf("  %s: %s", v.FieldPath, v.Reason)
			}
		}
	}
	var api struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(doc, &api); err != nil || api.OpenAPI != "3.1.0" {
		t.Fatalf("openapi.json: %v %q", err, api.OpenAPI)
	}
	for _, want := range []struct{ method, path, scope string }{
		{"post", "/v1/trader/decisions", "operate"}, {"post", "/v1/chat/completions", "route"}, {"post", "/v1/messages", "route"},
		{"put", "/v1/provisions/{id}", "configure"}, {"delete", "/v1/admin/keys/{id}", "admin"}, {"post", "/mcp", ""},
		{"post", "/v1/executor/ticks", "operate"}, {"get", "/openapi.json", ""}, {"get", "/", ""},
	} {
		op, ok := api.Paths[want.path][want.method]
		if !ok {
			t.Errorf("openapi.json has no %s %s", want.method, want.path)
			continue
		}
		if got, _ := op["x-caduceus-scope"].(string); got != want.scope {
			t.Errorf("%s %s: scope %q, want %q", want.method, want.path, got, want.scope)
		}
	}
	// The write routes name the Idempotency-Key they take; the LLM routes,
	// whose header is the provider's, and the reads do not.
	for _, want := range []struct {
		method, path string
		keyed        bool
	}{
		{"post", "/v1/admin/keys", true}, {"put", "/v1/provisions/{id}", true}, {"delete", "/v1/admin/keys/{id}", true},
		{"post", "/v1/executor/ticks", true}, {"post", "/v1/chat/completions", false}, {"get", "/v1/admin/keys", false},
	} {
		b, _ := json.Marshal(api.Paths[want.path][want.method]["parameters"])
		if got := strings.Contains(string(b), `"name":"Idempotency-Key"`); got != want.keyed {
			t.Errorf("%s %s: Idempotency-Key parameter %v, want %v: %s", want.method, want.path, got, want.keyed, b)
		}
	}
	if n := len(api.Paths); n < 35 {
		t.Errorf("openapi.json describes only %d paths", n)
	}

	code, ct, mcpDoc := get(t, in, "/.well-known/mcp.json")
	var m struct {
		Endpoint string `json:"endpoint"`
		Tools    []struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		} `json:"tools"`
	}
	if code != 200 || json.Unmarshal(mcpDoc, &m) != nil || m.Endpoint != "/mcp" {
		t.Fatalf("mcp.json: %d %s %s", code, ct, mcpDoc)
	}
	tools := map[string]bool{}
	for _, tl := range m.Tools {
		tools[tl.Name] = len(tl.InputSchema) > 0
	}
	for _, want := range []string{"whoami", "apply_control_decision", "list_strategies", "get_strategy", "execute_intents", "shim_preview"} {
		if !tools[want] {
			t.Errorf("mcp.json lacks the tool %s (or its input schema): %s", want, mcpDoc)
		}
	}

	code, ct, page := get(t, in, "/")
	if code != 200 || !strings.HasPrefix(ct, "text/html") || !strings.Contains(string(page), "<svg") {
		t.Fatalf("GET /: %d %s %s", code, ct, page)
	}
	for name, body := range map[string][]byte{"openapi.json": doc, "mcp.json": mcpDoc, "/": page} {
		for _, secret := range []string{keyID, "slot-1", in.adminKey} {
			if secret != "" && strings.Contains(string(body), secret) {
				t.Errorf("%s shows tenant data %q", name, secret)
			}
		}
	}
	if code, _, _ := get(t, in, "/nowhere"); code != 404 {
		t.Errorf("GET /nowhere: %d, want 404 (only / itself is the page)", code)
	}
	_, after := in.do(t, "GET", "/v1/audit?limit=1000", in.adminKey, nil)
	if len(after["records"].([]any)) != len(before["records"].([]any))+1 { // the audit read itself
		t.Errorf("the public routes wrote audit records: %d before, %d after", len(before["records"].([]any)), len(after["records"].([]any)))
	}
}

// TestHomePageInBrowser: GET / renders in Chromium: the mark is drawn and
// the page names the gates the server serves.
func TestHomePageInBrowser(t *testing.T) {
	browser := chromium(t)
	in := start(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1000, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(in.url+"/"), chromedp.WaitVisible(chromedp.CSS(`#mark`))); err != nil {
		t.Fatalf("GET / in the browser: %v", err)
	}
	width, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`document.querySelector('#mark').getBoundingClientRect().width`))
	if err != nil || width < 32 {
		t.Errorf("the mark is not drawn: width %v, %v", width, err)
	}
	gates, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#gates`)))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"trader", "shim", "executor"} {
		if !strings.Contains(gates, want) {
			t.Errorf("the page does not name the %s gate: %q", want, gates)
		}
	}
	if strings.Contains(gates, "relay") {
		t.Errorf("the page names the relay, which this server does not serve: %q", gates)
	}
}
