package contract

import "github.com/caduceus-dev/caduceus/internal/lazyre"

// The patterns of the common schema, for fast checks outside full schema
// validation. schema_test.go proves they agree with the embedded schema.
var (
	idRE             = lazyre.New(`^[a-z]{2,6}_[A-Za-z0-9._-]{4,80}$`)
	userRefRE        = lazyre.New(`^usr_[0-9a-f]{16,64}$`)
	timestampRE      = lazyre.New(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?Z$`)
	sha256RE         = lazyre.New(`^sha256:[0-9a-f]{64}$`)
	tenantSlotRE     = lazyre.New(`^slot-[0-9]{1,3}$`)
	idempotencyKeyRE = lazyre.New(`^[A-Za-z0-9._:-]{8,120}$`)
	actionRE         = lazyre.New(`^[a-z_]+\.[a-z_]+$`)
	versionRE        = lazyre.New(`^1\.[0-9]+\.[0-9]+$`)
	tagRE            = lazyre.New(`^[a-z0-9][a-z0-9-]{0,39}$`)
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
