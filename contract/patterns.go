package contract

import (
	"regexp"
	"sync"
)

// The patterns of the common schema, for fast checks outside full schema
// validation. schema_test.go proves they agree with the embedded schema.
var (
	idRE             = lazyRegexp(`^[a-z]{2,6}_[A-Za-z0-9._-]{4,80}$`)
	userRefRE        = lazyRegexp(`^usr_[0-9a-f]{16,64}$`)
	timestampRE      = lazyRegexp(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$`)
	sha256RE         = lazyRegexp(`^sha256:[0-9a-f]{64}$`)
	tenantSlotRE     = lazyRegexp(`^slot-[0-9]{1,3}$`)
	idempotencyKeyRE = lazyRegexp(`^[A-Za-z0-9._:-]{8,120}$`)
	actionRE         = lazyRegexp(`^[a-z_]+\.[a-z_]+$`)
	versionRE        = lazyRegexp(`^1\.[0-9]+\.[0-9]+$`)
	tagRE            = lazyRegexp(`^[a-z0-9][a-z0-9-]{0,39}$`)
)

// ValidID reports whether s is a prefix-typed id.
func ValidID(s string) bool { return matchID(s) }

// ValidUserRef reports whether s is a hashed subject (usr_<hex>).
func ValidUserRef(s string) bool { return matchUserRef(s) }

// ValidSHA256 reports whether s is "sha256:" and 64 lowercase hex digits.
func ValidSHA256(s string) bool { return matchSHA256(s) }

// ValidTenantSlot reports whether s is a tenant slot ("slot-N").
func ValidTenantSlot(s string) bool { return matchTenantSlot(s) }

// ValidIdempotencyKey reports whether s is an acceptable idempotency key.
func ValidIdempotencyKey(s string) bool { return idempotencyKeyRE().MatchString(s) }

// ValidAction reports whether s is an audit action ("noun.verb").
func ValidAction(s string) bool { return matchAction(s) }

// ValidContractVersion reports whether s is a 1.x.y contract version.
func ValidContractVersion(s string) bool { return versionRE().MatchString(s) }

// ValidTag reports whether s is a tag.
func ValidTag(s string) bool { return tagRE().MatchString(s) }

// ValidAccount reports whether s can name a broker account (a key's bound
// account, a tick's named one): 1 to 64 of A-Z a-z 0-9 . _ : -.
func ValidAccount(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == ':', r == '-':
		default:
			return false
		}
	}
	return true
}

// lazyRegexp returns a function that compiles expr on its first call and
// returns the same *regexp.Regexp from then on (panicking, like
// regexp.MustCompile, if it does not compile): a package-level
// MustCompile would run in every process before main, the edge's Worker
// included, where package initialisation is on a new isolate's first
// request (docs/edge.md). internal/lazyre is the same for the packages
// above contract, which imports nothing of this module's. Not inlined, so
// that callers share one copy of sync.OnceValue's closures.
//
//go:noinline
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
