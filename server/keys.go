package server

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
)

// KeyView is a key as the API shows it: never the secret or its hash.
type KeyView struct {
	ID         string              `json:"id"`
	Tenant     contract.TenantSlot `json:"tenant"`
	Scopes     []contract.Scope    `json:"scopes"`
	Harness    string              `json:"harness,omitempty"`
	RunContext contract.RunContext `json:"context,omitempty"`
	// Account is the broker account the key is bound to, if any.
	Account string `json:"account,omitempty"`
	// Models are the key's grants: exact provider/model pairs, its
	// tenant's included.
	Models    []string `json:"models,omitempty"`
	CreatedAt string   `json:"created_at"`
	RevokedAt string   `json:"revoked_at,omitempty"`
}

func viewOf(k auth.Key) KeyView {
	v := KeyView{ID: k.ID, Tenant: k.Tenant, Scopes: k.Scopes, Harness: k.Harness, RunContext: k.RunContext, Account: k.Account, Models: k.Grants, CreatedAt: contract.Timestamp(k.CreatedAt)}
	if k.RevokedAt != nil {
		v.RevokedAt = contract.Timestamp(*k.RevokedAt)
	}
	return v
}

type createKeyRequest struct {
	Tenant  contract.TenantSlot `json:"tenant"`
	Scopes  []contract.Scope    `json:"scopes"`
	Harness string              `json:"harness"`
	Context contract.RunContext `json:"context"`
	// Account binds the key to one broker account.
	Account string `json:"account"`
	// Models grants exact provider/model pairs ("openai/gpt-4.1").
	Models []string `json:"models"`
}

// createKey makes a key in the caller's own tenant; an admin of one tenant
// cannot mint keys for another (the CLI, working on the data directory, can).
func (s *Server) createKey(w http.ResponseWriter, r *http.Request, c *Call) error {
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	var req createKeyRequest
	if err := contract.DecodeStrict(body, &req); err != nil {
		return contract.Invalidf("bad_json", "the body is not a key request: %v", err)
	}
	if req.Tenant == "" {
		req.Tenant = c.Caller.Identity.TenantSlot
	}
	if req.Tenant != c.Caller.Identity.TenantSlot {
		return contract.Denyf("cross_tenant", "an admin key of %s cannot create keys for %s", c.Caller.Identity.TenantSlot, req.Tenant)
	}
	token, key, err := s.cfg.Auth.Create(r.Context(), auth.Spec{Tenant: req.Tenant, Scopes: req.Scopes, Harness: req.Harness, RunContext: req.Context, Account: req.Account, Grants: req.Models})
	if err != nil {
		return err
	}
	c.Resource = "key/" + key.ID
	// Only a hash of the secret is ever stored: a replay of this answer
	// (Idempotency-Key) shows the key without it.
	if c.ReplayBody, err = json.Marshal(viewOf(key)); err != nil {
		return contract.Internal(err)
	}
	return WriteJSON(w, http.StatusCreated, struct {
		Key string `json:"key"`
		KeyView
	}{token, viewOf(key)})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request, c *Call) error {
	keys, err := s.cfg.Auth.List(r.Context())
	if err != nil {
		return err
	}
	out := []KeyView{}
	for _, k := range keys {
		if k.Tenant == c.Caller.Identity.TenantSlot {
			out = append(out, viewOf(k))
		}
	}
	c.Resource = "keys"
	return WriteJSON(w, http.StatusOK, map[string]any{"keys": out})
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request, c *Call) error {
	id := r.PathValue("id")
	c.Resource = "key/" + Clip(id, 100)
	keys, err := s.cfg.Auth.List(r.Context())
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.ID == id && k.Tenant == c.Caller.Identity.TenantSlot {
			if err := s.cfg.Auth.Revoke(r.Context(), id); err != nil {
				return err
			}
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
	}
	// Another tenant's key is indistinguishable from a missing one.
	return contract.NotFoundf("key_not_found", "no key %s", id)
}

// tenantGrants is the body of the tenant grant routes.
type tenantGrants struct {
	Tenant contract.TenantSlot `json:"tenant"`
	// Grants are exact provider/model pairs every key of the tenant holds
	// besides its own.
	Grants []string `json:"grants"`
}

// grantsTenant is the tenant of a grant route's path: a slot, and the
// caller's own. Like createKey, an admin of one tenant cannot set or read
// another's grants (the CLI, working on the data directory, can).
func grantsTenant(r *http.Request, c *Call) (contract.TenantSlot, error) {
	tenant := contract.TenantSlot(r.PathValue("tenant"))
	c.Resource = "tenant/" + Clip(string(tenant), 100) + "/grants"
	if err := auth.CheckTenant(tenant); err != nil {
		return "", err
	}
	if tenant != c.Caller.Identity.TenantSlot {
		return "", contract.Denyf("cross_tenant", "an admin key of %s cannot manage the grants of %s", c.Caller.Identity.TenantSlot, tenant)
	}
	return tenant, nil
}

func (s *Server) getTenantGrants(w http.ResponseWriter, r *http.Request, c *Call) error {
	tenant, err := grantsTenant(r, c)
	if err != nil {
		return err
	}
	grants, err := s.cfg.Auth.TenantGrants(r.Context(), tenant)
	return AnswerOK(w, tenantGrants{Tenant: tenant, Grants: nonNil(grants)}, err)
}

// putTenantGrants replaces the tenant's grants with the body's
// {"grants":[...]} ([] clears them), checked like a key's and answered as
// held: sorted, without duplicates. The audit record's payload is the new
// set.
func (s *Server) putTenantGrants(w http.ResponseWriter, r *http.Request, c *Call) error {
	tenant, err := grantsTenant(r, c)
	if err != nil {
		return err
	}
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	var req struct {
		Grants *[]string `json:"grants"`
	}
	if err := contract.DecodeStrict(body, &req); err != nil {
		return contract.Invalidf("bad_json", "the body is not a grant request ({\"grants\":[\"openai/gpt-4.1\"]}): %v", err)
	}
	if req.Grants == nil {
		return contract.FieldError("grants", "missing_grants", "the body needs \"grants\": a list of provider/model pairs ([] clears them)")
	}
	grants, err := s.cfg.Auth.SetTenantGrants(r.Context(), tenant, *req.Grants)
	if err != nil {
		return err
	}
	out := tenantGrants{Tenant: tenant, Grants: nonNil(grants)}
	c.Payload = out
	return AnswerOK(w, out, nil)
}

// nonNil answers an empty list as [] rather than null.
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (s *Server) auditTail(w http.ResponseWriter, r *http.Request, c *Call) error {
	limit, err := QueryLimit(r, 50, 1000)
	if err != nil {
		return err
	}
	recs, err := s.cfg.Records.Tail(r.Context(), audit.Filter{Tenant: c.Caller.Identity.TenantSlot, Limit: limit, Action: r.URL.Query().Get("action")})
	if err != nil {
		return err
	}
	c.Resource = "audit"
	type rec struct {
		ID         string                `json:"id"`
		Seq        int64                 `json:"seq"`
		Outcome    contract.AuditOutcome `json:"outcome"`
		Provenance *contract.Provenance  `json:"provenance,omitempty"`
		Payload    json.RawMessage       `json:"payload,omitempty"`
		// Sensitivity and Redaction: seed 002; absent on records sealed
		// before records carried them.
		Sensitivity contract.Sensitivity `json:"sensitivity,omitempty"`
		Redaction   *contract.Redaction  `json:"redaction,omitempty"`
		Hash        string               `json:"hash"`
		PrevHash    string               `json:"prev_hash"`
	}
	out := make([]rec, 0, len(recs))
	for _, x := range recs {
		out = append(out, rec{x.ID, x.Seq, x.Outcome, x.Provenance, x.Payload, x.Sensitivity, x.Redaction, x.Hash, x.PrevHash})
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"records": out, "as_of": contract.Timestamp(time.Now())})
}

// auditCheckpoint verifies the caller's tenant's chain and answers a
// checkpoint of its end signed with the server's key: the latest state,
// made at the request. An operator (or a monitor) keeps these outside the
// database and later runs caduceus audit verify --checkpoint FILE.
func (s *Server) auditCheckpoint(w http.ResponseWriter, r *http.Request, c *Call) error {
	c.Resource = "audit/checkpoint"
	if s.cfg.AuditSigner == nil || s.cfg.AuditSource == nil {
		return &contract.Error{Kind: contract.KindFlagOff, Code: "checkpoints_off", Message: "this server has no audit signing key"}
	}
	tenant := c.Caller.Identity.TenantSlot
	rep, err := audit.VerifyWith(r.Context(), s.cfg.AuditSource, audit.Options{Tenants: []contract.TenantSlot{tenant}})
	if err != nil {
		return err
	}
	if rep.Break != nil {
		s.log.Error("audit chain broken", "tenant", tenant, "break", rep.Break.Error())
		return contract.Conflictf("audit_chain_broken", "the audit chain of %s is broken at seq %d; no checkpoint is signed: %s", tenant, rep.Break.Seq, rep.Break.Reason)
	}
	cp, err := audit.Sign(s.cfg.AuditSigner, rep.Ends, time.Now())
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, cp)
}
