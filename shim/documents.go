package shim

import (
	"context"
	"crypto/subtle"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// document is what the management rules need of a provision or a context
// entry: its key (id, ref), its system_builtin flag, its version and time.
type document[T any] interface {
	*T
	docKey() string
	docBuiltin() *bool
	setVersion(int64)
	setUpdatedAt(string)
}

func (p *Provision) docKey() string           { return p.ID }
func (p *Provision) docBuiltin() *bool        { return &p.SystemBuiltin }
func (p *Provision) setVersion(v int64)       { p.Version = v }
func (p *Provision) setUpdatedAt(at string)   { p.UpdatedAt = at }
func (e *ContextEntry) docKey() string        { return e.Ref }
func (e *ContextEntry) docBuiltin() *bool     { return &e.SystemBuiltin }
func (e *ContextEntry) setVersion(v int64)    { e.Version = v }
func (e *ContextEntry) setUpdatedAt(s string) { e.UpdatedAt = s }

// documents manages one kind of versioned, tenant-scoped document over
// the Store, with the builtin rule in one place: a tenant sees its own
// documents and the builtins it does not shadow; only an admin key writes
// a builtin, creates one (system_builtin set), or takes a key a builtin
// holds; a tenant document never becomes a builtin.
type documents[T any, P document[T]] struct {
	scope    func(contract.Caller) Scope // whose documents a caller reads and writes (Service.Scope)
	builtin  contract.TenantSlot         // the tenant of the builtins (Config.BuiltinTenant)
	now      func() time.Time
	noun     string // "provision", "context entry"
	keyField string // "id", "ref"
	// immutable is the message refusing a tenant document's system_builtin.
	immutable string
	decode    func([]byte) (T, error)
	normalize func(*T) // applied to every document read (nil: none)

	list   func(ctx context.Context, tenant contract.TenantSlot) ([]T, error)
	get    func(ctx context.Context, tenant contract.TenantSlot, key string) (T, error)
	create func(ctx context.Context, tenant contract.TenantSlot, d T) (T, error)
	update func(ctx context.Context, tenant contract.TenantSlot, d T, ifVersion int64) (T, error)
	remove func(ctx context.Context, tenant contract.TenantSlot, key string, ifVersion int64) error
	// written runs after a successful write to tenant (nil: nothing).
	written func(tenant contract.TenantSlot)
}

func (m *documents[T, P]) read(d *T) {
	if m.normalize != nil {
		m.normalize(d)
	}
}

func (m *documents[T, P]) wrote(tenant contract.TenantSlot) {
	if m.written != nil {
		m.written(tenant)
	}
}

// List returns the caller's tenant's documents followed by the builtins it
// does not shadow (marked system_builtin). Deny without read scope.
func (m *documents[T, P]) List(ctx context.Context, caller contract.Caller) ([]T, error) {
	if err := authorizeRead(caller); err != nil {
		return nil, err
	}
	own, err := m.list(ctx, m.scope(caller).Slot())
	if err != nil {
		return nil, asErr(err)
	}
	seen := map[string]bool{}
	for i := range own {
		m.read(&own[i])
		seen[P(&own[i]).docKey()] = true
	}
	if m.scope(caller).Slot() == m.builtin {
		return own, nil
	}
	builtin, err := m.list(ctx, m.builtin)
	if err != nil {
		return nil, asErr(err)
	}
	for i := range builtin {
		d := &builtin[i]
		if !seen[P(d).docKey()] {
			m.read(d)
			*P(d).docBuiltin() = true
			own = append(own, *d)
		}
	}
	return own, nil
}

// Get returns one document of the caller's tenant, else the builtin of that
// key. Deny without read scope; not_found when neither exists.
func (m *documents[T, P]) Get(ctx context.Context, caller contract.Caller, key string) (T, error) {
	if err := authorizeRead(caller); err != nil {
		var zero T
		return zero, err
	}
	d, _, err := m.locate(ctx, m.scope(caller).Slot(), key)
	return d, err
}

// locate finds key in tenant, else among the builtins, and says where.
func (m *documents[T, P]) locate(ctx context.Context, tenant contract.TenantSlot, key string) (T, contract.TenantSlot, error) {
	var zero T
	d, err := m.get(ctx, tenant, key)
	if err == nil {
		m.read(&d)
		return d, tenant, nil
	}
	if !isNotFound(err) {
		return zero, "", asErr(err)
	}
	d, err = m.get(ctx, m.builtin, key)
	if err != nil {
		if isNotFound(err) {
			return zero, "", contract.NotFoundf(CodeNotFound, "shim: no %s %q", m.noun, key)
		}
		return zero, "", asErr(err)
	}
	m.read(&d)
	*P(&d).docBuiltin() = true
	return d, m.builtin, nil
}

// Create validates body and stores it at version 1: in the caller's
// tenant, or among the builtins when it sets system_builtin. Errors: deny
// (missing_scope, harness_required, harness_mismatch; builtin_protected
// for a non-admin builtin write or a key a builtin holds), invalid (the
// schema or a rule names the field), conflict (exists).
func (m *documents[T, P]) Create(ctx context.Context, caller contract.Caller, attested string, body []byte) (T, error) {
	var zero T
	d, err := m.decodeWrite(caller, attested, body)
	if err != nil {
		return zero, err
	}
	tenant, err := m.createTenant(ctx, caller, P(&d))
	if err != nil {
		return zero, err
	}
	P(&d).setVersion(1)
	P(&d).setUpdatedAt(contract.Timestamp(m.now()))
	out, err := m.create(ctx, tenant, d)
	if err != nil {
		return zero, asErr(err)
	}
	m.wrote(tenant)
	return out, nil
}

// decodeWrite authorizes a write by caller under the attested harness, then
// decodes and validates its body.
func (m *documents[T, P]) decodeWrite(caller contract.Caller, attested string, body []byte) (T, error) {
	if err := AuthorizeWrite(caller, attested); err != nil {
		var zero T
		return zero, err
	}
	return m.decode(body)
}

// createTenant is where d may be created by caller: the builtin tenant for
// an admin's builtin, else the caller's own, unless a builtin holds the key.
func (m *documents[T, P]) createTenant(ctx context.Context, caller contract.Caller, d P) (contract.TenantSlot, error) {
	admin := caller.Has(contract.ScopeAdmin)
	switch {
	case *d.docBuiltin() && !admin:
		return "", builtinProtected()
	case *d.docBuiltin():
		return m.builtin, nil
	case admin:
		return m.scope(caller).Slot(), nil
	}
	if _, err := m.get(ctx, m.builtin, d.docKey()); err == nil {
		return "", builtinProtected()
	} else if !isNotFound(err) {
		return "", asErr(err)
	}
	return m.scope(caller).Slot(), nil
}

// Update replaces document key if its version is ifVersion (the If-Match
// header) and returns it at ifVersion+1. A builtin can be updated only by
// an admin key. Errors: deny as Create; invalid (schema, id_mismatch,
// system_builtin_immutable); precondition (if_match_required: no
// If-Match); not_found; conflict (revision_mismatch) — and nothing
// changes.
func (m *documents[T, P]) Update(ctx context.Context, caller contract.Caller, attested, key string, ifVersion int64, body []byte) (T, error) {
	var zero T
	d, err := m.decodeWrite(caller, attested, body)
	if err != nil {
		return zero, err
	}
	if got := P(&d).docKey(); got != key {
		return zero, contract.FieldError("/"+m.keyField, CodeIDMismatch, "field %s: %q does not match the path %s %q", m.keyField, got, m.keyField, key)
	}
	if ifVersion < 1 {
		return zero, ifMatchRequired()
	}
	tenant, err := m.writeTenant(ctx, caller, key)
	if err != nil {
		return zero, err
	}
	builtin := tenant == m.builtin && tenant != m.scope(caller).Slot()
	if *P(&d).docBuiltin() && !builtin {
		if !caller.Has(contract.ScopeAdmin) {
			return zero, builtinProtected()
		}
		return zero, contract.FieldError("/system_builtin", "system_builtin_immutable", "%s", m.immutable)
	}
	if builtin {
		*P(&d).docBuiltin() = true
	}
	P(&d).setUpdatedAt(contract.Timestamp(m.now()))
	out, err := m.update(ctx, tenant, d, ifVersion)
	if err != nil {
		return zero, asErr(err)
	}
	m.wrote(tenant)
	return out, nil
}

// Delete deletes document key if its version is ifVersion. Errors as Update.
func (m *documents[T, P]) Delete(ctx context.Context, caller contract.Caller, attested, key string, ifVersion int64) error {
	if err := AuthorizeWrite(caller, attested); err != nil {
		return err
	}
	if ifVersion < 1 {
		return ifMatchRequired()
	}
	tenant, err := m.writeTenant(ctx, caller, key)
	if err != nil {
		return err
	}
	if err := m.remove(ctx, tenant, key, ifVersion); err != nil {
		return asErr(err)
	}
	m.wrote(tenant)
	return nil
}

// writeTenant locates key for a write by caller: its own tenant, or the
// builtin tenant, which only an admin key may write.
func (m *documents[T, P]) writeTenant(ctx context.Context, caller contract.Caller, key string) (contract.TenantSlot, error) {
	_, tenant, err := m.locate(ctx, m.scope(caller).Slot(), key)
	if err != nil {
		return "", err
	}
	if tenant == m.builtin && tenant != m.scope(caller).Slot() && !caller.Has(contract.ScopeAdmin) {
		return "", builtinProtected()
	}
	return tenant, nil
}

func ifMatchRequired() error {
	return contract.PreconditionRequiredf(CodeIfMatchRequired, "shim: If-Match with the current version is required")
}

// Error codes of refusals the Service returns.
const (
	CodeHarnessRequired  = "harness_required"
	CodeHarnessMismatch  = "harness_mismatch"
	CodeBuiltinProtected = "builtin_protected"
	CodeIfMatchRequired  = contract.CodeIfMatchRequired
	CodeIDMismatch       = "id_mismatch"
)

func authorizeRead(c contract.Caller) error {
	return c.RequireScope("shim: reading", contract.ScopeRoute, contract.ScopeConfigure, contract.ScopeAdmin)
}

// AuthorizeWrite is the rule of every shim write (management routes, sync):
// configure scope AND an attested harness equal to the key's.
func AuthorizeWrite(c contract.Caller, attested string) error {
	if err := c.RequireScope("shim: writing", contract.ScopeConfigure); err != nil {
		return err
	}
	if c.Harness == "" {
		return contract.Denyf(CodeHarnessRequired, "shim: writes need a key bound to a harness")
	}
	if attested == "" {
		return contract.Denyf(CodeHarnessRequired, "shim: writes need the X-Caduceus-Harness header (or its alias X-Herma-Harness)")
	}
	if subtle.ConstantTimeCompare([]byte(attested), []byte(c.Harness)) != 1 {
		return contract.Denyf(CodeHarnessMismatch, "shim: X-Caduceus-Harness does not match the key's harness")
	}
	return nil
}

func builtinProtected() error {
	return contract.Denyf(CodeBuiltinProtected, "shim: system_builtin rows are writable only by admin keys")
}
