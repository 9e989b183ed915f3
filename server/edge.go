package server

import (
	"crypto/subtle"
	"net/http"

	"github.com/caduceus-dev/caduceus/contract"
)

// HeaderEdgeAuth carries the secret shared with the proxy in front
// (Config.EdgeSecret).
const HeaderEdgeAuth = "X-Edge-Auth"

// CodeEdgeAuth is the refusal of a request that did not come through the
// edge.
const CodeEdgeAuth = "edge_auth_required"

// throughEdge reports whether r may be served when an edge secret is set:
// it carries the secret, or it is a liveness or readiness probe (which
// carries no data and must answer the load balancer). Otherwise it writes a
// 403 — in the protocol's envelope on the LLM routes, as a problem
// elsewhere — with x-should-retry: false, since retrying cannot help.
func (s *Server) throughEdge(w http.ResponseWriter, r *http.Request) bool {
	if s.cfg.EdgeSecret == "" || r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
		return true
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get(HeaderEdgeAuth)), []byte(s.cfg.EdgeSecret)) == 1 {
		return true
	}
	w.Header().Set("X-Should-Retry", "false")
	if env, ok := s.envelopes[r.URL.Path]; ok {
		env(w, r, http.StatusForbidden, CodeEdgeAuth, "requests must come through the edge")
		return false
	}
	WriteProblem(w, r, contract.Denyf(CodeEdgeAuth, "requests must come through the edge"))
	return false
}
