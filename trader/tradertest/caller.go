package tradertest

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/caduceus-dev/caduceus/contract"
)

// Caller returns a test caller of tenant with the given scopes (all of them
// when none are given), an API-surface identity whose subject is derived from
// the tenant and name.
func Caller(tenant contract.TenantSlot, name string, scopes ...contract.Scope) contract.Caller {
	if len(scopes) == 0 {
		scopes = contract.Scopes
	}
	sum := sha256.Sum256([]byte(string(tenant) + "/" + name))
	return contract.Caller{
		Identity: contract.Identity{TenantSlot: tenant, Subject: "usr_" + hex.EncodeToString(sum[:16]), Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
		KeyID:    "key_" + name,
		Scopes:   scopes,
	}
}
