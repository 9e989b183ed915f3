package server

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// routes registers every route of the server: the core ones here, the gates'
// from Config.Mounts. This is the one place to read what the server answers.
func (s *Server) routes() {
	// Public: probes and metrics. No key, no audit record.
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))

	// Keys and the audit trail (admin, own tenant only).
	s.mux.Handle("POST /v1/admin/keys", s.wrap("keys.create", contract.ScopeAdmin, s.createKey))
	s.mux.Handle("GET /v1/admin/keys", s.wrap("keys.list", contract.ScopeAdmin, s.listKeys))
	s.mux.Handle("DELETE /v1/admin/keys/{id}", s.wrap("keys.revoke", contract.ScopeAdmin, s.revokeKey))
	s.mux.Handle("GET /v1/admin/tenants/{tenant}/grants", s.wrap("keys.get_grants", contract.ScopeAdmin, s.getTenantGrants))
	s.mux.Handle("PUT /v1/admin/tenants/{tenant}/grants", s.wrap("keys.set_grants", contract.ScopeAdmin, s.putTenantGrants))
	s.mux.Handle("GET /v1/audit", s.wrap("audit.read", contract.ScopeAdmin, s.auditTail))
	s.mux.Handle("GET /v1/audit/checkpoint", s.wrap("audit.checkpoint", contract.ScopeAdmin, s.auditCheckpoint))

	// Conversations: one trail across the gates (own tenant; admin: all).
	if s.cfg.Trails != nil {
		s.mux.Handle("GET /v1/conversations", s.wrap("trail.list", "", s.listConversations))
		s.mux.Handle("GET /v1/conversations/{id}", s.wrap("trail.read", "", s.getConversation))
	}

	// MCP: one stateless streamable-HTTP endpoint; scopes filter the tools.
	s.mux.Handle("POST /mcp", s.wrap("mcp.request", "", s.mcpHandler()))
	s.mux.Handle("GET /mcp", s.wrap("mcp.request", "", s.mcpHandler()))

	// Trader (seed 000): the one write entry point, management, reads.
	if s.cfg.Trader != nil {
		s.mux.Handle("POST /v1/trader/decisions", s.wrap("trader.apply", contract.ScopeOperate, s.traderApply))
		s.mux.Handle("GET /v1/trader/decisions/{id}", s.wrap("trader.decision", contract.ScopeRoute, s.traderDecision))
		s.mux.Handle("GET /v1/trader/history", s.wrap("trader.history", contract.ScopeRoute, s.traderHistory))
		s.mux.Handle("GET /v1/trader/strategies", s.wrap("trader.list_strategies", contract.ScopeRoute, s.traderListStrategies))
		s.mux.Handle("GET /v1/trader/strategies/{id}", s.wrap("trader.get_strategy", contract.ScopeRoute, s.traderGetStrategy))
		s.mux.Handle("PUT /v1/trader/strategies/{id}", s.wrap("trader.put_strategy", contract.ScopeConfigure, s.traderPutStrategy))
		s.mux.Handle("GET /v1/trader/concerns", s.wrap("trader.list_concerns", contract.ScopeRoute, s.traderListConcerns))
		s.mux.Handle("PUT /v1/trader/concerns/{id}", s.wrap("trader.put_concern", contract.ScopeConfigure, s.traderPutConcern))
	}

	// Executor (seed 001): one tick through the broker gate.
	if s.cfg.Executor != nil {
		s.mux.Handle("POST /v1/executor/ticks", s.wrap("executor.tick", contract.ScopeOperate, s.executorTick))
	}

	// Shim (seed 003): the LLM routes answer in their own protocol and
	// record their receipts themselves; management goes through the wrapper.
	if s.cfg.Shim != nil {
		s.mux.Handle("POST /v1/chat/completions", s.llmRoute(wire.ChatCompletions))
		s.mux.Handle("POST /v1/responses", s.llmRoute(wire.Responses))
		s.mux.Handle("POST /v1/messages", s.llmRoute(wire.Messages))
		s.mux.Handle("POST /v1/messages/count_tokens", s.serve(route{action: "shim.count_tokens", scope: contract.ScopeRoute,
			protocol: wire.Messages, resource: "count_tokens"}, s.countTokens))
		prov, ctxs := s.shimProvisions(), s.shimContext()
		s.mux.Handle("GET /v1/provisions", s.wrap("shim.list_provisions", contract.ScopeRoute, prov.listHandler("provisions")))
		s.mux.Handle("POST /v1/provisions", s.wrap("shim.create_provision", contract.ScopeConfigure, prov.createHandler()))
		s.mux.Handle("GET /v1/provisions/{id}", s.wrap("shim.get_provision", contract.ScopeRoute, prov.getHandler()))
		s.mux.Handle("PUT /v1/provisions/{id}", s.wrap("shim.update_provision", contract.ScopeConfigure, prov.updateHandler()))
		s.mux.Handle("DELETE /v1/provisions/{id}", s.wrap("shim.delete_provision", contract.ScopeConfigure, prov.deleteHandler()))
		s.mux.Handle("GET /v1/context", s.wrap("shim.list_context", contract.ScopeRoute, ctxs.listHandler("context")))
		s.mux.Handle("POST /v1/context", s.wrap("shim.create_context", contract.ScopeConfigure, ctxs.createHandler()))
		s.mux.Handle("GET /v1/context/{ref}", s.wrap("shim.get_context", contract.ScopeRoute, ctxs.getHandler()))
		s.mux.Handle("PUT /v1/context/{ref}", s.wrap("shim.update_context", contract.ScopeConfigure, ctxs.updateHandler()))
		s.mux.Handle("DELETE /v1/context/{ref}", s.wrap("shim.delete_context", contract.ScopeConfigure, ctxs.deleteHandler()))
		s.mux.Handle("GET /v1/receipts", s.wrap("shim.list_receipts", contract.ScopeRoute, s.shimReceipts))
		s.mux.Handle("POST /v1/dry-run", s.wrap("shim.dry_run", contract.ScopeRoute, s.shimDryRun))
		s.mux.Handle("POST /api/preview", s.serve(route{action: "shim.preview", public: true}, s.shimPreview))
	}
	if s.cfg.ShimMemory != nil {
		s.mux.Handle("GET /v1/memory", s.wrap("shim.memory", contract.ScopeRoute, s.shimMemory))
		s.mux.Handle("GET /v1/outcomes", s.wrap("shim.outcomes", contract.ScopeRoute, s.shimOutcomes))
		s.mux.Handle("GET /v1/insights", s.wrap("shim.insights", contract.ScopeRoute, s.shimInsights))
	}
	if s.cfg.ShimSpend != nil {
		s.mux.Handle("GET /v1/spend", s.wrap("shim.spend", contract.ScopeRoute, s.shimSpend))
	}
	if s.cfg.Gateway != nil {
		s.mux.Handle("GET /v1/models", s.wrap("shim.models", contract.ScopeRoute, s.shimModels))
	}
	if s.cfg.ShimSync != nil {
		s.mux.Handle("POST /v1/sync", s.wrap("shim.sync", contract.ScopeConfigure, s.shimSyncHandler))
	}

	// Relay (seed 004): gateways and platforms authenticate themselves
	// (HMAC bearer tokens, Ed25519 signatures, secret tokens), not with keys.
	if s.cfg.Relay != nil {
		s.mux.Handle("GET /relay", s.cfg.Relay)
		s.mux.Handle("POST /relay/media", s.cfg.Relay)
		s.mux.Handle("GET /relay/media/{id}", s.cfg.Relay)
		s.mux.Handle("POST /hooks/discord/{app}", s.cfg.Relay)
		s.mux.Handle("POST /hooks/telegram/{bot}", s.cfg.Relay)
	}
	if s.cfg.Relay != nil {
		for _, p := range s.cfg.RelayWebhooks {
			s.mux.Handle(p, s.cfg.Relay)
		}
	}

	// Operator console: HTML pages under /console that authenticate with
	// their own one-time login and session cookie (Path=/console), never
	// with a key; the API below keeps refusing cookies.
	if s.cfg.Console != nil {
		s.mux.Handle("GET /console", s.cfg.Console)
		s.mux.Handle("GET /console/", s.cfg.Console)
		s.mux.Handle("POST /console/logout", s.cfg.Console)
	}

	// Routes the command mounts.
	for _, m := range s.cfg.Mounts {
		s.mux.Handle(m.Pattern, s.wrap(m.Action, m.Scope, m.Handler))
	}

	// Anything else under /v1 is a problem, not the mux's text 404.
	s.mux.Handle("/v1/", s.wrap("api.unknown", "", func(w http.ResponseWriter, r *http.Request, c *Call) error {
		return contract.NotFoundf("no_route", "no route %s %s", r.Method, r.URL.Path)
	}))
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

func queryLimit(r *http.Request, def, max int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, contract.FieldError("limit", "bad_limit", "limit must be an integer from 1 to %d", max)
	}
	return n, nil
}
