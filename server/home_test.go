package server

import (
	"html/template"
	"strings"
	"testing"
)

// homeTemplate is the home page as an html/template, the reference
// homePage is held to.
var homeTemplate = template.Must(template.New("home").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Caduceus</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem;color:#1d2330}
header{display:flex;align-items:center;gap:1rem}h1{margin:0;font-size:2rem}
ul{padding-left:1.2rem}code{background:#f1f3f7;padding:0 .25rem;border-radius:3px}
.muted{color:#5b6475}
</style></head><body>
<header>
<svg id="mark" width="64" height="64" viewBox="0 0 64 64" role="img" aria-label="Caduceus mark">
<line x1="32" y1="6" x2="32" y2="60" stroke="#1d2330" stroke-width="3" stroke-linecap="round"/>
<circle cx="32" cy="6" r="3.5" fill="#c9a227"/>
<path d="M32 12 C18 6 10 10 6 16 C14 14 22 16 32 18 C42 16 50 14 58 16 C54 10 46 6 32 12Z" fill="#c9a227"/>
<path d="M32 20 C22 24 22 30 32 34 C42 38 42 44 32 48 C24 51 25 55 30 57" fill="none" stroke="#2f7d6d" stroke-width="3" stroke-linecap="round"/>
<path d="M32 20 C42 24 42 30 32 34 C22 38 22 44 32 48 C40 51 39 55 34 57" fill="none" stroke="#7a3e9d" stroke-width="3" stroke-linecap="round"/>
</svg>
<div><h1>Caduceus</h1><div class="muted">the governed edge of an AI agent · {{.Version}}</div></div>
</header>
<h2>What this installation serves</h2>
<ul id="gates">{{range .Gates}}<li><strong>{{.Name}}</strong>: {{.What}}</li>{{else}}<li>no gate: only keys, the audit trail and MCP</li>{{end}}</ul>
<h2>Read more</h2>
<ul>
<li><a href="/openapi.json">/openapi.json</a>: every route, as OpenAPI 3.1</li>
<li><a href="/.well-known/mcp.json">/.well-known/mcp.json</a>: the MCP endpoint <code>/mcp</code> and its tools</li>
<li><a href="/healthz">/healthz</a> and <a href="/readyz">/readyz</a>: liveness and readiness</li>
{{if .Console}}<li><a href="/console">/console</a>: the operator console (a login link from <code>caduceus console</code>)</li>{{end}}
</ul>
<p class="muted">Every other route needs a key. Nothing on this page is a tenant's data.</p>
</body></html>
`))

// TestHomePageAsTemplate: homePage writes, byte for byte, what
// homeTemplate writes, with text that needs escaping in every field.
func TestHomePageAsTemplate(t *testing.T) {
	tricky := "v1.2.3+dirty <b>&amp;</b> \"quoted\" 'single' \x00nul é"
	for _, c := range []struct {
		version string
		gates   []gateLine
		console bool
	}{
		{"-", nil, false},
		{"v1.0.0", []gateLine{{"keys", gateWhat["keys"]}, {"shim", gateWhat["shim"]}}, true},
		{tricky, []gateLine{{tricky, tricky}}, false},
	} {
		var want, got strings.Builder
		if err := homeTemplate.Execute(&want, map[string]any{"Version": c.version, "Gates": c.gates, "Console": c.console}); err != nil {
			t.Fatal(err)
		}
		if err := homePage(&got, c.version, c.gates, c.console); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("homePage(%q, %v, %v) differs from the template:\n got %q\nwant %q", c.version, c.gates, c.console, got.String(), want.String())
		}
	}
}
