package server

import (
	"net/http"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
)

// routes registers every route of the server: the core ones here, the gates'
// from Config.Routes (each gate's module lists them).
func (s *Server) routes() {
	// The core's, the public face's, and the gates' routes (trader,
	// executor, shim, relay): each gate's module lists its own (package
	// gate). The table is also what GET /openapi.json describes.
	s.table = append(append(s.coreRoutes(), s.discoveryRoutes()...), s.cfg.Routes...)
	for _, rt := range s.table {
		s.mux.Handle(rt.Pattern, s.handler(rt))
	}
	// Anything else under /v1: never the mux's text 404 (unknown).
	s.mux.Handle("/v1/", s.unknown())
}

// unknown answers a path under /v1/ that no route serves: 404 no_route (401
// without a key), as a problem when the path is in a namespace of the
// management API (/v1/trader/..., /v1/admin/...) or no gate offers a
// Fallback route, else in the provider envelope of the Fallback route: a
// provider endpoint this server does not serve, which an SDK reads as its
// own 404.
func (s *Server) unknown() http.Handler {
	notFound := func(w http.ResponseWriter, r *http.Request, c *Call) error {
		return contract.NotFoundf("no_route", "no route %s %s: this server does not serve it", r.Method, r.URL.Path)
	}
	problem := s.handler(Route{Action: "api.unknown", Handler: notFound})
	var provider http.Handler
	management := map[string]bool{}
	for _, rt := range s.table {
		if rt.Fallback && provider == nil {
			provider = s.handler(Route{Action: "api.unknown", Envelope: rt.Envelope, Handler: notFound})
		}
		if _, path, ok := strings.Cut(rt.Pattern, " "); ok && rt.Envelope == nil && rt.Raw == nil {
			if seg := firstSegment(path); seg != "" {
				management[seg] = true
			}
		}
	}
	if provider == nil {
		return problem
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if management[firstSegment(r.URL.Path)] {
			problem.ServeHTTP(w, r)
			return
		}
		provider.ServeHTTP(w, r)
	})
}

// firstSegment is the segment of path after /v1/ ("trader" of
// /v1/trader/decisions), or "" for a path outside /v1/.
func firstSegment(path string) string {
	rest, ok := strings.CutPrefix(path, "/v1/")
	if !ok {
		return ""
	}
	seg, _, _ := strings.Cut(rest, "/")
	return seg
}

// coreRoutes are the routes of the core: probes, metrics, keys, the audit
// trail, the conversations' trails, MCP and the console.
func (s *Server) coreRoutes() []Route {
	rs := []Route{
		// Public: probes and metrics. No key, no audit record.
		{Pattern: "GET /healthz", Raw: http.HandlerFunc(s.healthz)},
		{Pattern: "GET /readyz", Raw: http.HandlerFunc(s.readyz)},
	}
	rs = append(rs, s.metricsRoutes()...) // GET /metrics, but at the edge
	rs = append(rs, []Route{
		// Keys and the audit trail (admin, own tenant only).
		{Pattern: "POST /v1/admin/keys", Action: "keys.create", Scope: contract.ScopeAdmin, Handler: s.createKey},
		{Pattern: "GET /v1/admin/keys", Action: "keys.list", Scope: contract.ScopeAdmin, Handler: s.listKeys},
		{Pattern: "DELETE /v1/admin/keys/{id}", Action: "keys.revoke", Scope: contract.ScopeAdmin, Handler: s.revokeKey},
		{Pattern: "GET /v1/admin/tenants/{tenant}/grants", Action: "keys.get_grants", Scope: contract.ScopeAdmin, Handler: s.getTenantGrants},
		{Pattern: "PUT /v1/admin/tenants/{tenant}/grants", Action: "keys.set_grants", Scope: contract.ScopeAdmin, Handler: s.putTenantGrants},
		{Pattern: "GET /v1/audit", Action: "audit.read", Scope: contract.ScopeAdmin, Handler: s.auditTail},
		{Pattern: "GET /v1/audit/checkpoint", Action: "audit.checkpoint", Scope: contract.ScopeAdmin, Handler: s.auditCheckpoint},

		// MCP: one stateless streamable-HTTP endpoint; scopes filter the tools.
		{Pattern: "POST /mcp", Action: "mcp.request", Handler: s.mcpHandler()},
		{Pattern: "GET /mcp", Action: "mcp.request", Handler: s.mcpHandler()},
	}...)
	// Conversations: one trail across the gates (own tenant; admin: all).
	if s.cfg.Trails != nil {
		rs = append(rs,
			Route{Pattern: "GET /v1/trail/conversations", Action: "trail.list", Handler: s.listConversations},
			Route{Pattern: "GET /v1/trail/conversations/{id}", Action: "trail.read", Handler: s.getConversation})
	}
	// Operator console: HTML pages under /console that authenticate with
	// their own one-time login and session cookie (Path=/console), never
	// with a key; the API keeps refusing cookies.
	if s.cfg.Console != nil {
		rs = append(rs,
			Route{Pattern: "GET /console", Raw: s.cfg.Console},
			Route{Pattern: "GET /console/", Raw: s.cfg.Console},
			Route{Pattern: "POST /console/logout", Raw: s.cfg.Console})
	}
	return rs
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.cfg.Version})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Store.Ping(r.Context()); err != nil {
		s.log.Warn("not ready", "err", err)
		WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "store unreachable"})
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
