// Package auth issues and verifies API keys and turns a verified key into a
// contract.Caller.
//
// A key looks like cad_<keyid>_<secret>: keyid is 16 hex digits, secret is 52
// characters of lowercase base32 (256 random bits). Only sha256(secret) is
// stored, and it is compared in constant time. A caller's subject is usr_ +
// the hex sha256 of the key id: stable, never the raw id.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Key is a stored API key (without its secret).
type Key struct {
	ID         string
	Tenant     contract.TenantSlot
	Scopes     []contract.Scope
	Harness    string
	RunContext contract.RunContext
	Account    string // the broker account the key is bound to, if any
	SecretHash string // hex sha256 of the secret
	// Grants are the exact provider/model pairs ("openai/gpt-4.1") the key
	// may use for operator-funded LLM turns: its own and its tenant's.
	Grants    []string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Store keeps keys. Implementations: store.Keys (SQL).
type Store interface {
	// CreateKey stores a new key; conflict if the id exists.
	CreateKey(ctx context.Context, k Key) error
	// Key returns a key by id; not_found if there is none.
	Key(ctx context.Context, id string) (Key, error)
	// ListKeys returns every key, revoked ones included, oldest first.
	ListKeys(ctx context.Context) ([]Key, error)
	// RevokeKey marks a key revoked; not_found if there is none, conflict if
	// it was already revoked.
	RevokeKey(ctx context.Context, id string) error
	// TenantGrants returns the grants every key of tenant holds, sorted.
	TenantGrants(ctx context.Context, tenant contract.TenantSlot) ([]string, error)
	// SetTenantGrants replaces the grants every key of tenant holds with
	// grants, already checked, and tells every watcher (WatchKeys).
	SetTenantGrants(ctx context.Context, tenant contract.TenantSlot, grants []string) error
}

// ReservedTenant holds system-wide rows (the shim's builtin provisions);
// no key is ever issued for it, so no caller acts inside it.
const ReservedTenant contract.TenantSlot = "slot-0"

// Spec is what a new key is made of.
type Spec struct {
	Tenant     contract.TenantSlot
	Scopes     []contract.Scope
	Harness    string
	RunContext contract.RunContext
	// Account binds the key to one broker account (CheckAccount); empty:
	// unbound.
	Account string
	// Grants: exact provider/model pairs (checkGrants).
	Grants []string
}

// Service issues and verifies keys.
type Service struct {
	store Store
	now   func() time.Time
	// cacheTTL bounds how long a verified key is trusted without a store
	// read. Revocation through this Service is immediate; a revocation made
	// by another process takes effect when Watch hears of it, and within
	// cacheTTL at the latest.
	cacheTTL time.Duration
	mu       sync.Mutex
	cache    map[string]cached
	// gen counts invalidations; a store read that raced one is not cached.
	gen uint64
}

// Watcher is a Store that reports key changes made by any process (another
// server, the CLI): Postgres LISTEN/NOTIFY, a SQLite change counter.
type Watcher interface {
	// WatchKeys calls changed after keys changed anywhere (and whenever it
	// may have missed a change) until ctx ends; then it returns ctx.Err().
	WatchKeys(ctx context.Context, changed func()) error
}

type cached struct {
	key     Key
	expires time.Time
}

// DefaultCacheTTL is how long a verified key is cached.
const DefaultCacheTTL = 5 * time.Second

// NewService returns a Service over store. A cacheTTL of 0 disables caching.
func NewService(store Store, now func() time.Time, cacheTTL time.Duration) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: store, now: now, cacheTTL: cacheTTL, cache: map[string]cached{}}
}

// CheckTenant checks a tenant keys may be issued or grants set for: a slot
// (slot-N), not ReservedTenant. It returns an invalid Error on field tenant.
func CheckTenant(t contract.TenantSlot) error {
	if !contract.ValidTenantSlot(string(t)) {
		return contract.FieldError("tenant", "bad_tenant", "tenant %q must look like slot-N (1 to 3 digits)", t)
	}
	if t == ReservedTenant {
		return contract.FieldError("tenant", "reserved_tenant", "tenant %s holds the builtin rules; no key is issued for it", t)
	}
	return nil
}

// checkGrants checks grants as a key or a tenant holds them
// (contract.CheckGrants: exact provider/model pairs or explicit patterns, no
// contributor-tier models) and returns them sorted and without duplicates.
// A bad one is an invalid Error on field, bad_grant, naming it.
func checkGrants(field string, grants []string) ([]string, error) {
	out, err := contract.CheckGrants(grants)
	if err != nil {
		return nil, contract.FieldError(field, "bad_grant", "%s", err.Error())
	}
	return out, nil
}

// Validate checks a spec. It returns an invalid Error naming the bad field.
func (s Spec) Validate() error {
	if err := CheckTenant(s.Tenant); err != nil {
		return err
	}
	if len(s.Scopes) == 0 {
		return contract.FieldError("scopes", "bad_scopes", "a key needs at least one scope (route, configure, operate, admin)")
	}
	for _, sc := range s.Scopes {
		if !slices.Contains(contract.Scopes, sc) {
			return contract.FieldError("scopes", "bad_scopes", "unknown scope %q (want route, configure, operate or admin)", sc)
		}
	}
	switch s.RunContext {
	case contract.RunNone, contract.RunCron, contract.RunChat, contract.RunAnalyst:
	default:
		return contract.FieldError("context", "bad_run_context", "unknown run context %q (want cron, chat or analyst)", s.RunContext)
	}
	if len(s.Harness) > 64 || strings.ContainsAny(s.Harness, " \t\r\n,") {
		return contract.FieldError("harness", "bad_harness", "harness %q must be at most 64 characters without spaces or commas", s.Harness)
	}
	if err := CheckAccount(s.Account); err != nil {
		return err
	}
	_, err := checkGrants("models", s.Grants)
	return err
}

// CheckAccount checks the broker account a key is bound to: empty (no
// binding), or 1 to 64 of A-Z a-z 0-9 . _ : -. It returns an invalid Error
// on the field account, code bad_account.
func CheckAccount(account string) error {
	if account == "" {
		return nil
	}
	if !contract.ValidAccount(account) {
		return contract.FieldError("account", "bad_account", "account %q must be 1 to 64 of A-Z a-z 0-9 . _ : -", account)
	}
	return nil
}

var b32 = base32.StdEncoding.WithPadding(base32.NoPadding)

// Create makes a key and returns its token, which is shown once and never
// stored.
func (s *Service) Create(ctx context.Context, spec Spec) (token string, key Key, err error) {
	if err := spec.Validate(); err != nil {
		return "", Key{}, err
	}
	var idb [8]byte
	var secret [32]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return "", Key{}, err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return "", Key{}, err
	}
	id := hex.EncodeToString(idb[:])
	sec := strings.ToLower(b32.EncodeToString(secret[:]))
	scopes := slices.Clone(spec.Scopes)
	slices.Sort(scopes)
	scopes = slices.Compact(scopes)
	grants, _ := checkGrants("models", spec.Grants) // checked by Validate
	key = Key{ID: id, Tenant: spec.Tenant, Scopes: scopes, Harness: spec.Harness, RunContext: spec.RunContext, Account: spec.Account,
		Grants: grants, SecretHash: hashSecret(sec), CreatedAt: s.now().UTC()}
	if err := s.store.CreateKey(ctx, key); err != nil {
		return "", Key{}, err
	}
	return "cad_" + id + "_" + sec, key, nil
}

// Adopt stores the key a token someone else made stands for, with spec's
// tenant and scopes, unless a key with its id exists (then it changes
// nothing and reports false). A deployment with no console to print a
// first key on (the Worker at the edge) is given its admin token as a
// secret and adopts it. A malformed token or a bad spec is refused.
func (s *Service) Adopt(ctx context.Context, token string, spec Spec) (bool, error) {
	id, secret, err := ParseToken(token)
	if err != nil {
		return false, err
	}
	if err := spec.Validate(); err != nil {
		return false, err
	}
	if _, err := s.store.Key(ctx, id); contract.KindOf(err) != contract.KindNotFound {
		return false, err
	}
	scopes := slices.Clone(spec.Scopes)
	slices.Sort(scopes)
	grants, _ := checkGrants("models", spec.Grants) // checked by Validate
	key := Key{ID: id, Tenant: spec.Tenant, Scopes: slices.Compact(scopes), Harness: spec.Harness, RunContext: spec.RunContext, Account: spec.Account,
		Grants: grants, SecretHash: hashSecret(secret), CreatedAt: s.now().UTC()}
	err = s.store.CreateKey(ctx, key)
	if contract.KindOf(err) == contract.KindConflict {
		return false, nil // adopted by another process meanwhile
	}
	return err == nil, err
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// ParseToken splits a token into key id and secret. It returns an
// unauthenticated Error for anything that is not a well-formed token.
func ParseToken(token string) (id, secret string, err error) {
	rest, ok := strings.CutPrefix(token, "cad_")
	if !ok {
		return "", "", errMalformed
	}
	id, secret, ok = strings.Cut(rest, "_")
	if !ok || len(id) != 16 || len(secret) != 52 || !isHex(id) {
		return "", "", errMalformed
	}
	return id, secret, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

var (
	errMalformed = &contract.Error{Kind: contract.KindUnauthenticated, Code: "bad_key", Message: "the API key is not a Caduceus key (cad_<id>_<secret>)"}
	errBadKey    = &contract.Error{Kind: contract.KindUnauthenticated, Code: "bad_key", Message: "the API key is not valid"}
	errRevoked   = &contract.Error{Kind: contract.KindUnauthenticated, Code: "key_revoked", Message: "the API key was revoked"}
)

// dummyHash is compared against when a key id is unknown, so an unknown id
// costs the same as a wrong secret.
var dummyHash = hashSecret("caduceus-unknown-key")

// Verify checks a token and returns the caller it stands for. Unknown ids,
// wrong secrets and revoked keys are unauthenticated Errors; a store failure
// is an internal Error. When the id is known but the secret is wrong, the
// returned Caller still names the key's tenant and subject (so the refusal can
// be audited under that tenant) along with the error.
func (s *Service) Verify(ctx context.Context, token string) (contract.Caller, error) {
	id, secret, err := ParseToken(token)
	if err != nil {
		return contract.Caller{}, err
	}
	key, err := s.lookup(ctx, id)
	if contract.KindOf(err) == contract.KindNotFound {
		subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(dummyHash))
		return contract.Caller{}, errBadKey
	}
	if err != nil {
		return contract.Caller{}, contract.Internal(err)
	}
	caller := CallerOf(key)
	if subtle.ConstantTimeCompare([]byte(hashSecret(secret)), []byte(key.SecretHash)) != 1 {
		return caller, errBadKey
	}
	if key.RevokedAt != nil {
		return caller, errRevoked
	}
	return caller, nil
}

func (s *Service) lookup(ctx context.Context, id string) (Key, error) {
	now := s.now()
	if s.cacheTTL > 0 {
		s.mu.Lock()
		c, ok := s.cache[id]
		s.mu.Unlock()
		if ok && now.Before(c.expires) {
			return c.key, nil
		}
	}
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	key, err := s.store.Key(ctx, id)
	if err != nil {
		return Key{}, err
	}
	if s.cacheTTL > 0 {
		s.mu.Lock()
		if len(s.cache) > 10000 {
			clear(s.cache)
		}
		if s.gen == gen { // no invalidation raced the read
			s.cache[id] = cached{key: key, expires: now.Add(s.cacheTTL)}
		}
		s.mu.Unlock()
	}
	return key, nil
}

// Invalidate drops every cached key: the next Verify of each reads the
// store. Watch calls it when another process changed keys.
func (s *Service) Invalidate() {
	s.mu.Lock()
	s.gen++
	clear(s.cache)
	s.mu.Unlock()
}

// Watch invalidates the cache whenever keys change in any process, so a
// revocation made elsewhere takes effect within the watcher's latency
// (milliseconds) rather than the cache TTL. It blocks until ctx ends. A
// store that is not a Watcher leaves the TTL as the bound; Watch then
// returns at once with nil.
func (s *Service) Watch(ctx context.Context) error {
	w, ok := s.store.(Watcher)
	if !ok || s.cacheTTL <= 0 {
		return nil
	}
	return w.WatchKeys(ctx, s.Invalidate)
}

// Revoke revokes a key; it takes effect in this process at once.
func (s *Service) Revoke(ctx context.Context, id string) error {
	if err := s.store.RevokeKey(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.cache, id)
	s.mu.Unlock()
	return nil
}

// TenantGrants returns the provider/model grants every key of tenant holds
// besides its own, sorted. A tenant that is not a slot is an invalid Error
// (CheckTenant).
func (s *Service) TenantGrants(ctx context.Context, tenant contract.TenantSlot) ([]string, error) {
	if err := CheckTenant(tenant); err != nil {
		return nil, err
	}
	return s.store.TenantGrants(ctx, tenant)
}

// SetTenantGrants replaces the grants every key of tenant holds besides its
// own (none: the tenant's keys keep only their own) and returns them as
// held: sorted, without duplicates. Grants are checked like a key's; a bad
// tenant or grant is an invalid Error naming it (fields tenant, grants) and
// changes nothing. The change takes effect in this process at once, in
// others when Watch hears of it.
func (s *Service) SetTenantGrants(ctx context.Context, tenant contract.TenantSlot, grants []string) ([]string, error) {
	if err := CheckTenant(tenant); err != nil {
		return nil, err
	}
	grants, err := checkGrants("grants", grants)
	if err != nil {
		return nil, err
	}
	if err := s.store.SetTenantGrants(ctx, tenant, grants); err != nil {
		return nil, err
	}
	s.Invalidate()
	return grants, nil
}

// List returns every key.
func (s *Service) List(ctx context.Context) ([]Key, error) { return s.store.ListKeys(ctx) }

// HasActiveAdmin reports whether any unrevoked key holds the admin scope.
func (s *Service) HasActiveAdmin(ctx context.Context) (bool, error) {
	keys, err := s.store.ListKeys(ctx)
	if err != nil {
		return false, err
	}
	for _, k := range keys {
		if k.RevokedAt == nil && slices.Contains(k.Scopes, contract.ScopeAdmin) {
			return true, nil
		}
	}
	return false, nil
}

// Subject is the HUX user_ref of a key id: usr_ + hex sha256(id).
func Subject(keyID string) string {
	sum := sha256.Sum256([]byte(keyID))
	return "usr_" + hex.EncodeToString(sum[:])
}

// CallerOf is the caller a key stands for. API keys are asserted by the
// router (trust "router") on the api surface.
func CallerOf(k Key) contract.Caller {
	return contract.Caller{
		Identity: contract.Identity{
			TenantSlot: k.Tenant,
			Subject:    Subject(k.ID),
			Surface:    contract.SurfaceAPI,
			Trust:      contract.TrustRouter,
		},
		KeyID:      k.ID,
		Scopes:     slices.Clone(k.Scopes),
		Harness:    k.Harness,
		RunContext: k.RunContext,
		Account:    k.Account,
		Grants:     slices.Clone(k.Grants),
	}
}

// ParseScopes parses a comma-separated scope list ("route,configure").
func ParseScopes(s string) ([]contract.Scope, error) {
	var out []contract.Scope
	for p := range strings.SplitSeq(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(contract.Scopes, contract.Scope(p)) {
			return nil, contract.FieldError("scopes", "bad_scopes", "unknown scope %q (want route, configure, operate or admin)", p)
		}
		out = append(out, contract.Scope(p))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("auth: %w", contract.FieldError("scopes", "bad_scopes", "no scopes given"))
	}
	return out, nil
}
