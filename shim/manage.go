package shim

import (
	"context"
	"crypto/subtle"

	"github.com/caduceus-dev/caduceus/contract"
)

// Error codes of refusals the Service returns.
const (
	CodeHarnessRequired  = "harness_required"
	CodeHarnessMismatch  = "harness_mismatch"
	CodeBuiltinProtected = "builtin_protected"
	CodeIfMatchRequired  = "if_match_required"
	CodeIDMismatch       = "id_mismatch"
)

func authorizeRead(c contract.Caller) error {
	return c.RequireScope("shim: reading", contract.ScopeRoute, contract.ScopeConfigure, contract.ScopeAdmin)
}

// authorizeWrite: configure scope AND an attested harness equal to the key's.
func authorizeWrite(c contract.Caller, attested string) error {
	if err := c.RequireScope("shim: writing", contract.ScopeConfigure); err != nil {
		return err
	}
	if c.Harness == "" {
		return contract.Denyf(CodeHarnessRequired, "shim: writes need a key bound to a harness")
	}
	if attested == "" {
		return contract.Denyf(CodeHarnessRequired, "shim: writes need the X-Caduceus-Harness header")
	}
	if subtle.ConstantTimeCompare([]byte(attested), []byte(c.Harness)) != 1 {
		return contract.Denyf(CodeHarnessMismatch, "shim: X-Caduceus-Harness does not match the key's harness")
	}
	return nil
}

func builtinProtected() error {
	return contract.Denyf(CodeBuiltinProtected, "shim: system_builtin rows are writable only by admin keys")
}

func isNotFound(err error) bool { return err != nil && contract.KindOf(err) == contract.KindNotFound }

// ListProvisions returns the caller's tenant's provisions followed by the
// builtins it does not shadow (marked system_builtin). Deny without route,
// configure or admin scope.
func (s *Service) ListProvisions(ctx context.Context, caller contract.Caller) ([]Provision, error) {
	if err := authorizeRead(caller); err != nil {
		return nil, err
	}
	own, err := s.store.ListProvisions(ctx, caller.Identity.TenantSlot)
	if err != nil {
		return nil, asErr(err)
	}
	seen := map[string]bool{}
	for i := range own {
		own[i].defaults()
		seen[own[i].ID] = true
	}
	if caller.Identity.TenantSlot == s.cfg.BuiltinTenant {
		return own, nil
	}
	builtin, err := s.store.ListProvisions(ctx, s.cfg.BuiltinTenant)
	if err != nil {
		return nil, asErr(err)
	}
	for _, p := range builtin {
		if !seen[p.ID] {
			p.defaults()
			p.SystemBuiltin = true
			own = append(own, p)
		}
	}
	return own, nil
}

// GetProvision returns one provision of the caller's tenant, else the
// builtin of that id. Deny without read scope; not_found when neither exists.
func (s *Service) GetProvision(ctx context.Context, caller contract.Caller, id string) (Provision, error) {
	if err := authorizeRead(caller); err != nil {
		return Provision{}, err
	}
	p, _, err := s.locateProvision(ctx, caller.Identity.TenantSlot, id)
	return p, err
}

func (s *Service) locateProvision(ctx context.Context, tenant contract.TenantSlot, id string) (Provision, contract.TenantSlot, error) {
	p, err := s.store.GetProvision(ctx, tenant, id)
	if err == nil {
		p.defaults()
		return p, tenant, nil
	}
	if !isNotFound(err) {
		return Provision{}, "", asErr(err)
	}
	p, err = s.store.GetProvision(ctx, s.cfg.BuiltinTenant, id)
	if err != nil {
		if isNotFound(err) {
			return Provision{}, "", contract.NotFoundf(CodeNotFound, "shim: no provision %q", id)
		}
		return Provision{}, "", asErr(err)
	}
	p.defaults()
	p.SystemBuiltin = true
	return p, s.cfg.BuiltinTenant, nil
}

// CreateProvision validates body and stores it at version 1: in the
// caller's tenant, or among the builtins when it sets system_builtin.
// Errors: deny (missing_scope, harness_required, harness_mismatch;
// builtin_protected for a non-admin builtin write or an id a builtin holds),
// invalid (the schema or a rule names the field), conflict (exists).
func (s *Service) CreateProvision(ctx context.Context, caller contract.Caller, attested string, body []byte) (Provision, error) {
	if err := authorizeWrite(caller, attested); err != nil {
		return Provision{}, err
	}
	p, err := DecodeProvision(body)
	if err != nil {
		return Provision{}, err
	}
	tenant := caller.Identity.TenantSlot
	admin := caller.Has(contract.ScopeAdmin)
	if p.SystemBuiltin {
		if !admin {
			return Provision{}, builtinProtected()
		}
		tenant = s.cfg.BuiltinTenant
	} else if !admin {
		if _, err := s.store.GetProvision(ctx, s.cfg.BuiltinTenant, p.ID); err == nil {
			return Provision{}, builtinProtected()
		} else if !isNotFound(err) {
			return Provision{}, asErr(err)
		}
	}
	p.Version = 1
	p.UpdatedAt = contract.Timestamp(s.now())
	out, err := s.store.CreateProvision(ctx, tenant, p)
	if err != nil {
		return Provision{}, asErr(err)
	}
	s.invalidate(tenant)
	return out, nil
}

// UpdateProvision replaces provision id if its version is ifVersion (the
// If-Match header) and returns it at ifVersion+1. A builtin can be updated
// only by an admin key. Errors: deny as CreateProvision; invalid (schema,
// if_match_required, id_mismatch, system_builtin_immutable); not_found;
// conflict (version_conflict) — and nothing changes.
func (s *Service) UpdateProvision(ctx context.Context, caller contract.Caller, attested, id string, ifVersion int64, body []byte) (Provision, error) {
	if err := authorizeWrite(caller, attested); err != nil {
		return Provision{}, err
	}
	p, err := DecodeProvision(body)
	if err != nil {
		return Provision{}, err
	}
	if p.ID != id {
		return Provision{}, contract.FieldError("/id", CodeIDMismatch, "field id: %q does not match the path id %q", p.ID, id)
	}
	if ifVersion < 1 {
		return Provision{}, contract.FieldError("If-Match", CodeIfMatchRequired, "shim: If-Match with the current version is required")
	}
	_, tenant, err := s.locateProvision(ctx, caller.Identity.TenantSlot, id)
	if err != nil {
		return Provision{}, err
	}
	builtin := tenant == s.cfg.BuiltinTenant && tenant != caller.Identity.TenantSlot
	if builtin || p.SystemBuiltin {
		if !caller.Has(contract.ScopeAdmin) {
			return Provision{}, builtinProtected()
		}
		if !builtin {
			return Provision{}, contract.FieldError("/system_builtin", "system_builtin_immutable", "field system_builtin: a tenant provision cannot become a builtin; create one instead")
		}
		p.SystemBuiltin = true
	}
	p.UpdatedAt = contract.Timestamp(s.now())
	out, err := s.store.UpdateProvision(ctx, tenant, p, ifVersion)
	if err != nil {
		return Provision{}, asErr(err)
	}
	s.invalidate(tenant)
	return out, nil
}

// DeleteProvision deletes provision id if its version is ifVersion. Errors
// as UpdateProvision.
func (s *Service) DeleteProvision(ctx context.Context, caller contract.Caller, attested, id string, ifVersion int64) error {
	if err := authorizeWrite(caller, attested); err != nil {
		return err
	}
	if ifVersion < 1 {
		return contract.FieldError("If-Match", CodeIfMatchRequired, "shim: If-Match with the current version is required")
	}
	_, tenant, err := s.locateProvision(ctx, caller.Identity.TenantSlot, id)
	if err != nil {
		return err
	}
	if tenant == s.cfg.BuiltinTenant && tenant != caller.Identity.TenantSlot && !caller.Has(contract.ScopeAdmin) {
		return builtinProtected()
	}
	if err := s.store.DeleteProvision(ctx, tenant, id, ifVersion); err != nil {
		return asErr(err)
	}
	s.invalidate(tenant)
	return nil
}

// ListContext returns the caller's tenant's context entries followed by the
// builtin entries it does not shadow. Deny without read scope.
func (s *Service) ListContext(ctx context.Context, caller contract.Caller) ([]ContextEntry, error) {
	if err := authorizeRead(caller); err != nil {
		return nil, err
	}
	own, err := s.store.ListContext(ctx, caller.Identity.TenantSlot)
	if err != nil {
		return nil, asErr(err)
	}
	if caller.Identity.TenantSlot == s.cfg.BuiltinTenant {
		return own, nil
	}
	seen := map[string]bool{}
	for _, e := range own {
		seen[e.Ref] = true
	}
	builtin, err := s.store.ListContext(ctx, s.cfg.BuiltinTenant)
	if err != nil {
		return nil, asErr(err)
	}
	for _, e := range builtin {
		if !seen[e.Ref] {
			e.SystemBuiltin = true
			own = append(own, e)
		}
	}
	return own, nil
}

// GetContext returns the caller's entry ref, else the builtin one. Deny
// without read scope; not_found when neither exists.
func (s *Service) GetContext(ctx context.Context, caller contract.Caller, ref string) (ContextEntry, error) {
	if err := authorizeRead(caller); err != nil {
		return ContextEntry{}, err
	}
	e, _, err := s.locateContext(ctx, caller.Identity.TenantSlot, ref)
	return e, err
}

func (s *Service) locateContext(ctx context.Context, tenant contract.TenantSlot, ref string) (ContextEntry, contract.TenantSlot, error) {
	e, err := s.store.GetContext(ctx, tenant, ref)
	if err == nil {
		return e, tenant, nil
	}
	if !isNotFound(err) {
		return ContextEntry{}, "", asErr(err)
	}
	e, err = s.store.GetContext(ctx, s.cfg.BuiltinTenant, ref)
	if err != nil {
		if isNotFound(err) {
			return ContextEntry{}, "", contract.NotFoundf(CodeNotFound, "shim: no context entry %q", ref)
		}
		return ContextEntry{}, "", asErr(err)
	}
	e.SystemBuiltin = true
	return e, s.cfg.BuiltinTenant, nil
}

// CreateContext validates body and stores the entry at version 1 (with the
// sha256 of its body). Errors as CreateProvision.
func (s *Service) CreateContext(ctx context.Context, caller contract.Caller, attested string, body []byte) (ContextEntry, error) {
	if err := authorizeWrite(caller, attested); err != nil {
		return ContextEntry{}, err
	}
	e, err := decodeContextEntry(body)
	if err != nil {
		return ContextEntry{}, err
	}
	tenant := caller.Identity.TenantSlot
	admin := caller.Has(contract.ScopeAdmin)
	if e.SystemBuiltin {
		if !admin {
			return ContextEntry{}, builtinProtected()
		}
		tenant = s.cfg.BuiltinTenant
	} else if !admin {
		if _, err := s.store.GetContext(ctx, s.cfg.BuiltinTenant, e.Ref); err == nil {
			return ContextEntry{}, builtinProtected()
		} else if !isNotFound(err) {
			return ContextEntry{}, asErr(err)
		}
	}
	e.Version = 1
	e.UpdatedAt = contract.Timestamp(s.now())
	out, err := s.store.CreateContext(ctx, tenant, e)
	return out, asErr(err)
}

// UpdateContext replaces entry ref if its version is ifVersion. Errors as
// UpdateProvision.
func (s *Service) UpdateContext(ctx context.Context, caller contract.Caller, attested, ref string, ifVersion int64, body []byte) (ContextEntry, error) {
	if err := authorizeWrite(caller, attested); err != nil {
		return ContextEntry{}, err
	}
	e, err := decodeContextEntry(body)
	if err != nil {
		return ContextEntry{}, err
	}
	if e.Ref != ref {
		return ContextEntry{}, contract.FieldError("/ref", CodeIDMismatch, "field ref: %q does not match the path ref %q", e.Ref, ref)
	}
	if ifVersion < 1 {
		return ContextEntry{}, contract.FieldError("If-Match", CodeIfMatchRequired, "shim: If-Match with the current version is required")
	}
	_, tenant, err := s.locateContext(ctx, caller.Identity.TenantSlot, ref)
	if err != nil {
		return ContextEntry{}, err
	}
	builtin := tenant == s.cfg.BuiltinTenant && tenant != caller.Identity.TenantSlot
	if builtin || e.SystemBuiltin {
		if !caller.Has(contract.ScopeAdmin) {
			return ContextEntry{}, builtinProtected()
		}
		if !builtin {
			return ContextEntry{}, contract.FieldError("/system_builtin", "system_builtin_immutable", "field system_builtin: a tenant entry cannot become a builtin")
		}
		e.SystemBuiltin = true
	}
	e.UpdatedAt = contract.Timestamp(s.now())
	out, err := s.store.UpdateContext(ctx, tenant, e, ifVersion)
	return out, asErr(err)
}

// DeleteContext deletes entry ref if its version is ifVersion. Errors as
// UpdateProvision.
func (s *Service) DeleteContext(ctx context.Context, caller contract.Caller, attested, ref string, ifVersion int64) error {
	if err := authorizeWrite(caller, attested); err != nil {
		return err
	}
	if ifVersion < 1 {
		return contract.FieldError("If-Match", CodeIfMatchRequired, "shim: If-Match with the current version is required")
	}
	_, tenant, err := s.locateContext(ctx, caller.Identity.TenantSlot, ref)
	if err != nil {
		return err
	}
	if tenant == s.cfg.BuiltinTenant && tenant != caller.Identity.TenantSlot && !caller.Has(contract.ScopeAdmin) {
		return builtinProtected()
	}
	return asErr(s.store.DeleteContext(ctx, tenant, ref, ifVersion))
}

// ListReceipts returns the caller's tenant's receipts, newest first: at most
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
	rs, err := s.store.ListReceipts(ctx, caller.Identity.TenantSlot, limit, before)
	return rs, asErr(err)
}

// asErr is contract.AsError that keeps a nil error nil (a nil *Error in an
// error interface would not be).
func asErr(err error) error {
	if err == nil {
		return nil
	}
	return contract.AsError(err)
}
