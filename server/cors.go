package server

import (
	"net/http"
	"slices"
	"strings"
)

// crossOrigin applies a route's AllowedOrigins (CORS) to r. A preflight
// (OPTIONS with Origin and Access-Control-Request-Method) on such a route is
// answered here, before the edge check and without a key — a browser sends
// neither on a preflight — with 204 and the allow headers for an allowed
// origin, 403 without them for any other; it reports true then. A real
// request from an allowed origin gets Access-Control-Allow-Origin and goes
// on to the edge check, the key and the route as any request does.
func (s *Server) crossOrigin(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || len(s.origins) == 0 {
		return false
	}
	_, pattern := s.cors.Handler(r)
	origins, ok := s.origins[pattern]
	if !ok {
		return false
	}
	allowed := slices.ContainsFunc(origins, func(o string) bool { return strings.EqualFold(strings.TrimSuffix(o, "/"), origin) })
	h := w.Header()
	h.Add("Vary", "Origin")
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
		if !allowed {
			w.WriteHeader(http.StatusForbidden)
			return true
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
		if hs := r.Header.Get("Access-Control-Request-Headers"); hs != "" {
			h.Set("Access-Control-Allow-Headers", hs)
		}
		h.Set("Access-Control-Max-Age", "600")
		w.WriteHeader(http.StatusNoContent)
		return true
	}
	if allowed {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", "X-Request-Id, Request-Id, X-Caduceus-Receipt, X-Caduceus-Conversation, Retry-After, X-Should-Retry")
	}
	return false
}
