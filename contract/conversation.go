package contract

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/caduceus-dev/caduceus/internal/lazyre"
)

var convIDRE = lazyre.New(`^conv_[A-Za-z0-9._-]{4,80}$`)

// ConversationFor is the HUX conversation id of a tenant's conversation
// named by key: a relay session key ("agent:main:telegram:dm:42") or any
// caller-chosen name. A key that already is a conv_ id is returned as it
// is; any other key maps to "conv_" and 32 hex digits of
// sha256(tenant, 0, key), so every gate that sees the same session key in
// the same tenant files its records under the same id, and the same key in
// another tenant under a different one. The key itself belongs in
// Provenance.SessionID beside the id.
func ConversationFor(tenant TenantSlot, key string) string {
	if convIDRE().MatchString(key) {
		return key
	}
	h := sha256.New()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return "conv_" + hex.EncodeToString(h.Sum(nil))[:32]
}

// IsConversationID reports whether s has the shape of a conv_ id.
func IsConversationID(s string) bool { return convIDRE().MatchString(s) }
