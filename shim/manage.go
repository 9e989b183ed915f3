package shim

import (
	"context"

	"github.com/caduceus-dev/caduceus/contract"
)

// ListProvisions returns the caller's tenant's provisions followed by the
// builtins it does not shadow (marked system_builtin). Deny without route,
// configure or admin scope.
func (s *Service) ListProvisions(ctx context.Context, caller contract.Caller) ([]Provision, error) {
	return s.provDocs.List(ctx, caller)
}

// GetProvision returns one provision of the caller's tenant, else the
// builtin of that id. Deny without read scope; not_found when neither exists.
func (s *Service) GetProvision(ctx context.Context, caller contract.Caller, id string) (Provision, error) {
	return s.provDocs.Get(ctx, caller, id)
}

// CreateProvision validates body and stores it at version 1: in the
// caller's tenant, or among the builtins when it sets system_builtin.
// Errors: deny (missing_scope, harness_required, harness_mismatch;
// builtin_protected for a non-admin builtin write or an id a builtin holds),
// invalid (the schema or a rule names the field), conflict (exists).
func (s *Service) CreateProvision(ctx context.Context, caller contract.Caller, attested string, body []byte) (Provision, error) {
	return s.provDocs.Create(ctx, caller, attested, body)
}

// UpdateProvision replaces provision id if its version is ifVersion (the
// If-Match header) and returns it at ifVersion+1. A builtin can be updated
// only by an admin key. Errors: deny as CreateProvision; invalid (schema,
// id_mismatch, system_builtin_immutable); precondition (if_match_required:
// no If-Match); not_found; conflict (revision_mismatch) — and nothing
// changes.
func (s *Service) UpdateProvision(ctx context.Context, caller contract.Caller, attested, id string, ifVersion int64, body []byte) (Provision, error) {
	return s.provDocs.Update(ctx, caller, attested, id, ifVersion, body)
}

// DeleteProvision deletes provision id if its version is ifVersion. Errors
// as UpdateProvision.
func (s *Service) DeleteProvision(ctx context.Context, caller contract.Caller, attested, id string, ifVersion int64) error {
	return s.provDocs.Delete(ctx, caller, attested, id, ifVersion)
}

// ListContext returns the caller's tenant's context entries followed by the
// builtin entries it does not shadow. Deny without read scope.
func (s *Service) ListContext(ctx context.Context, caller contract.Caller) ([]ContextEntry, error) {
	return s.ctxDocs.List(ctx, caller)
}

// GetContext returns the caller's entry ref, else the builtin one. Deny
// without read scope; not_found when neither exists.
func (s *Service) GetContext(ctx context.Context, caller contract.Caller, ref string) (ContextEntry, error) {
	return s.ctxDocs.Get(ctx, caller, ref)
}

// CreateContext validates body and stores the entry at version 1 (with the
// sha256 of its body). Errors as CreateProvision.
func (s *Service) CreateContext(ctx context.Context, caller contract.Caller, attested string, body []byte) (ContextEntry, error) {
	return s.ctxDocs.Create(ctx, caller, attested, body)
}

// UpdateContext replaces entry ref if its version is ifVersion. Errors as
// UpdateProvision.
func (s *Service) UpdateContext(ctx context.Context, caller contract.Caller, attested, ref string, ifVersion int64, body []byte) (ContextEntry, error) {
	return s.ctxDocs.Update(ctx, caller, attested, ref, ifVersion, body)
}

// DeleteContext deletes entry ref if its version is ifVersion. Errors as
// UpdateProvision.
func (s *Service) DeleteContext(ctx context.Context, caller contract.Caller, attested, ref string, ifVersion int64) error {
	return s.ctxDocs.Delete(ctx, caller, attested, ref, ifVersion)
}

// ResponseOf returns the receipt of the caller's request that got the
// Responses API answer id (under IsolationKey, the caller's key's only):
// it names the route and the model identity that served it. A not_found
// error for any other id. Deny without read scope.
func (s *Service) ResponseOf(ctx context.Context, caller contract.Caller, id string) (Receipt, error) {
	if err := authorizeRead(caller); err != nil {
		return Receipt{}, err
	}
	r, err := s.store.ReceiptOfResponse(ctx, caller.Identity.TenantSlot, id)
	if err == nil && s.cfg.Isolation == IsolationKey && r.KeyID != caller.KeyID {
		err = contract.NotFoundf(CodeNotFound, "shim: no response %q", id)
	}
	return r, asErr(err)
}

// ListReceipts returns the caller's tenant's receipts (under IsolationKey,
// the caller's key's only), newest first: at most
// limit (default 50, at most 500), below the id before when given. Deny
// without read scope.
func (s *Service) ListReceipts(ctx context.Context, caller contract.Caller, limit int, before string) ([]Receipt, error) {
	if err := authorizeRead(caller); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	if s.cfg.Isolation != IsolationKey {
		rs, err := s.store.ListReceipts(ctx, caller.Identity.TenantSlot, limit, before)
		return rs, asErr(err)
	}
	// Key isolation: the tenant's receipts of this key only, page by page
	// until limit are found or there are no more.
	out := []Receipt{}
	for len(out) < limit {
		rs, err := s.store.ListReceipts(ctx, caller.Identity.TenantSlot, 500, before)
		if err != nil {
			return nil, asErr(err)
		}
		for _, r := range rs {
			if r.KeyID == caller.KeyID && len(out) < limit {
				out = append(out, r)
			}
		}
		if len(rs) < 500 {
			break
		}
		before = rs[len(rs)-1].ID
	}
	return out, nil
}
