package server

import (
	"errors"
	"net/http"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trail"
)

// The trail routes: what every gate recorded for one conversation, read
// through trail.Reader. A key reads its own tenant's conversations; a key
// with the admin scope reads every tenant's (narrowed with ?tenant=).

// trailTenant is the tenant a caller reads trails of: its own, or for an
// admin key every tenant ("") unless ?tenant= names one.
func trailTenant(r *http.Request, c *Call) (string, error) {
	if err := c.Caller.RequireScope("reading conversations", contract.ScopeRoute, contract.ScopeAdmin); err != nil {
		return "", err
	}
	q := r.URL.Query().Get("tenant")
	if !c.Caller.Has(contract.ScopeAdmin) {
		if q != "" && q != string(c.Caller.Identity.TenantSlot) {
			return "", contract.Denyf("tenant_refused", "only an admin key may read another tenant's conversations")
		}
		return string(c.Caller.Identity.TenantSlot), nil
	}
	if q != "" && !contract.ValidTenantSlot(q) {
		return "", contract.FieldError("tenant", "bad_tenant", "tenant %q is not a tenant slot (slot-N)", Clip(q, 40))
	}
	return q, nil
}

func (s *Server) listConversations(w http.ResponseWriter, r *http.Request, c *Call) error {
	tenant, err := trailTenant(r, c)
	if err != nil {
		return err
	}
	limit, err := QueryLimit(r, 50, trail.MaxList)
	if err != nil {
		return err
	}
	c.Resource = "conversations"
	list, err := s.cfg.Trails.List(r.Context(), tenant, limit)
	if err != nil {
		return contract.Internal(err)
	}
	if list == nil {
		list = []trail.Summary{}
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"conversations": list})
}

func (s *Server) getConversation(w http.ResponseWriter, r *http.Request, c *Call) error {
	tenant, err := trailTenant(r, c)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	c.Resource = "conversation/" + Clip(id, 150)
	if err := contract.CheckConversation("the conversation id", id); err != nil {
		return err
	}
	tr, err := s.cfg.Trails.Get(r.Context(), tenant, id)
	switch {
	case errors.Is(err, trail.ErrNotFound):
		return contract.NotFoundf("conversation_not_found", "no conversation %q", Clip(id, 120))
	case err != nil:
		if contract.KindOf(err) == contract.KindInvalid {
			return err
		}
		return contract.Internal(err)
	}
	return WriteJSON(w, http.StatusOK, tr)
}
