package server

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/caduceus-dev/caduceus/internal/lazyre"
)

// The public face of an installation (seed 003 H14): a page at /, the
// OpenAPI description of its routes and the description of its MCP
// endpoint. All three are read-only, take no key, write no audit record
// and hold no tenant data: they are made from the route and tool tables
// alone.

// discoveryRoutes are the three public routes.
func (s *Server) discoveryRoutes() []Route {
	return []Route{
		{Pattern: "GET /{$}", Raw: http.HandlerFunc(s.home)},
		{Pattern: "GET /openapi.json", Raw: http.HandlerFunc(s.openAPI)},
		{Pattern: "GET /.well-known/mcp.json", Raw: http.HandlerFunc(s.mcpDiscovery)},
	}
}

// wildcard matches a ServeMux path wildcard: {name} or {name...}.
var wildcard = lazyre.New(`\{([A-Za-z_][A-Za-z0-9_]*)(?:\.\.\.)?\}`)

// OpenAPI returns the OpenAPI 3.1 description of every route of the
// server, made from its route table: one operation per route, its path
// parameters (and Idempotency-Key on the write routes that take it), its
// audit action as summary, the scope its key needs (x-caduceus-scope) and
// how it authenticates.
func (s *Server) OpenAPI() map[string]any {
	paths := map[string]map[string]any{}
	for _, rt := range s.table {
		method, path, ok := strings.Cut(rt.Pattern, " ")
		if !ok {
			continue
		}
		path = strings.TrimSuffix(path, "{$}")
		op := map[string]any{
			"operationId": operationID(method, path),
			"responses": map[string]any{
				"default": map[string]any{"description": "the answer; an error is an RFC 9457 problem, or on an LLM route the provider's error envelope"},
			},
		}
		if rt.Action != "" {
			op["summary"] = rt.Action
			op["tags"] = []string{strings.SplitN(rt.Action, ".", 2)[0]}
		}
		var params []map[string]any
		for _, m := range wildcard().FindAllStringSubmatch(path, -1) {
			params = append(params, map[string]any{"name": m[1], "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		path = wildcard().ReplaceAllString(path, "{$1}")
		if keyed(rt) || rt.OwnIdempotency {
			params = append(params, map[string]any{"name": HeaderIdempotencyKey, "in": "header", "required": false,
				"description": "a repeat with the same key and request gets the stored answer (Idempotent-Replayed: true); another request under it is 409 idempotency_key_conflict",
				"schema":      map[string]any{"type": "string", "pattern": "^[A-Za-z0-9._:-]{8,120}$"}})
		}
		if params != nil {
			op["parameters"] = params
		}
		switch {
		case rt.Raw != nil || rt.Public:
			op["security"] = []any{} // public, or its own authentication (relay)
		default:
			op["security"] = []any{map[string]any{"bearer": []string{}}, map[string]any{"apiKey": []string{}}}
			if rt.Scope != "" {
				op["x-caduceus-scope"] = string(rt.Scope)
			}
		}
		if method == http.MethodPost || method == http.MethodPut {
			op["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{"type": "object"}}}}
		}
		if paths[path] == nil {
			paths[path] = map[string]any{}
		}
		paths[path][strings.ToLower(method)] = op
	}
	return map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Caduceus",
			"version":     orDash(s.cfg.Version),
			"description": "The governed edge of an AI agent: the routes this installation serves.",
		},
		"paths": paths,
		"components": map[string]any{
			"securitySchemes": map[string]any{
				"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "a Caduceus key, cad_<id>_<secret>"},
				"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": "x-api-key"},
			},
		},
	}
}

// operationID is a route's unique operation name: its method and path in
// lower snake case ("post_v1_trader_decisions").
func operationID(method, path string) string {
	var b strings.Builder
	b.WriteString(strings.ToLower(method))
	for _, r := range path {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r >= 'A' && r <= 'Z':
			b.WriteRune(r + 'a' - 'A')
		default:
			if !strings.HasSuffix(b.String(), "_") {
				b.WriteByte('_')
			}
		}
	}
	return strings.TrimSuffix(b.String(), "_")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, s.OpenAPI())
}

// MCPDescription is what GET /.well-known/mcp.json answers: the MCP
// endpoint and every tool it may list (a key sees those its scopes allow).
type MCPDescription struct {
	Name      string    `json:"name"`
	Version   string    `json:"version"`
	Endpoint  string    `json:"endpoint"`
	Transport string    `json:"transport"`
	Auth      string    `json:"authentication"`
	Tools     []MCPTool `json:"tools"`
}

// MCPTool is one tool of MCPDescription.
type MCPTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Scope       string          `json:"scope,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

func (s *Server) mcpDiscovery(w http.ResponseWriter, r *http.Request) {
	d := MCPDescription{Name: "caduceus", Version: orDash(s.cfg.Version), Endpoint: "/mcp", Transport: "streamable-http (stateless, JSON responses)",
		Auth: "a Caduceus key: Authorization: Bearer cad_... or x-api-key; the key's scopes decide which tools it lists and may call"}
	for _, t := range s.tools {
		d.Tools = append(d.Tools, MCPTool{Name: t.Name, Description: t.Description, Scope: string(t.Scope), InputSchema: t.InputSchema})
	}
	sort.Slice(d.Tools, func(i, j int) bool { return d.Tools[i].Name < d.Tools[j].Name })
	WriteJSON(w, http.StatusOK, d)
}

// homePage is GET /: the mark, what this installation serves, and where to
// read more. It is written by hand, escaping as html/template does
// (htmlText), so that no build links text/template: its use of reflect's
// Method by name keeps every exported method of every type the linker
// cannot rule out, which weighs on the edge's Worker (docs/edge.md).
// TestHomePageAsTemplate holds it to the template it was.
func homePage(w io.Writer, version string, gates []gateLine, console bool) error {
	var b strings.Builder
	b.WriteString(homeHead)
	b.WriteString(htmlText(version))
	b.WriteString(homeGates)
	for _, g := range gates {
		b.WriteString("<li><strong>")
		b.WriteString(htmlText(g.Name))
		b.WriteString("</strong>: ")
		b.WriteString(htmlText(g.What))
		b.WriteString("</li>")
	}
	if len(gates) == 0 {
		b.WriteString(homeNoGate)
	}
	b.WriteString(homeMore)
	if console {
		b.WriteString(homeConsole)
	}
	b.WriteString(homeTail)
	_, err := io.WriteString(w, b.String())
	return err
}

// gateLine is one gate of the home page.
type gateLine struct{ Name, What string }

// htmlText escapes s for HTML text as html/template does: its five
// characters, '+' (as &#43;), and NUL (as U+FFFD).
var htmlText = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;").Replace

// The home page's fixed parts, in order.
const (
	homeHead = `<!doctype html>
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
<div><h1>Caduceus</h1><div class="muted">the governed edge of an AI agent · `
	homeGates = `</div></div>
</header>
<h2>What this installation serves</h2>
<ul id="gates">`
	homeNoGate = `<li>no gate: only keys, the audit trail and MCP</li>`
	homeMore   = `</ul>
<h2>Read more</h2>
<ul>
<li><a href="/openapi.json">/openapi.json</a>: every route, as OpenAPI 3.1</li>
<li><a href="/.well-known/mcp.json">/.well-known/mcp.json</a>: the MCP endpoint <code>/mcp</code> and its tools</li>
<li><a href="/healthz">/healthz</a> and <a href="/readyz">/readyz</a>: liveness and readiness</li>
`
	homeConsole = `<li><a href="/console">/console</a>: the operator console (a login link from <code>caduceus console</code>)</li>`
	homeTail    = `
</ul>
<p class="muted">Every other route needs a key. Nothing on this page is a tenant's data.</p>
</body></html>
`
)

// gateWhat says what each gate is, for the home page.
var gateWhat = map[string]string{
	"keys":     "API keys and grants",
	"trader":   "strategy control: one idempotent, validated, audited decision (seed 000)",
	"executor": "the broker gate: checks, review and routing before any order (seed 001)",
	"shim":     "the LLM gateway: rules, context, direct answers, grants, budgets (seed 003)",
	"relay":    "chat platforms to the agent's gateway over a WebSocket (seed 004)",
}

func (s *Server) home(w http.ResponseWriter, r *http.Request) {
	var gates []gateLine
	for _, name := range s.gates() {
		gates = append(gates, gateLine{name, gateWhat[name]})
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = homePage(w, orDash(s.cfg.Version), gates, s.cfg.Console != nil)
}

// gates names the gates the server serves, from its routes: the first
// segment of each gate route's audit action (trader.apply -> trader), and
// relay for the relay's own routes.
func (s *Server) gates() []string {
	var out []string
	for _, rt := range s.cfg.Routes {
		name := strings.SplitN(rt.Action, ".", 2)[0]
		if rt.Raw != nil && strings.HasPrefix(rt.Pattern[strings.Index(rt.Pattern, " ")+1:], "/relay") {
			name = "relay"
		}
		if _, known := gateWhat[name]; known && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}
