package contract

import (
	"unicode/utf8"
)

// Validate checks the identity against the common schema's identity def
// without a round trip through JSON: the hot path of every audit record.
// TestGoValidatorsAgreeWithSchema proves it agrees with the schema.
func (id Identity) Validate() error {
	switch {
	case !tenantSlotRE.MatchString(string(id.TenantSlot)):
		return FieldError("/tenant_slot", "schema_invalid", "field tenant_slot: %q does not match ^slot-[0-9]{1,3}$", id.TenantSlot)
	case !userRefRE.MatchString(id.Subject):
		return FieldError("/subject", "schema_invalid", "field subject: %q does not match ^usr_[0-9a-f]{16,64}$", id.Subject)
	case !validSurface(id.Surface):
		return FieldError("/surface", "schema_invalid", "field surface: %q is not one of chat, worker, telegram, voice, api", id.Surface)
	case !validTrust(id.Trust):
		return FieldError("/trust", "schema_invalid", "field trust: %q is not one of router, relay, worker, evidence", id.Trust)
	}
	return nil
}

// Validate checks the outcome against the common schema's audit_outcome def.
func (o AuditOutcome) Validate() error {
	if !timestampRE.MatchString(o.At) {
		return FieldError("/at", "schema_invalid", "field at: %q is not an RFC 3339 UTC timestamp with a trailing Z", o.At)
	}
	if err := o.Identity.Validate(); err != nil {
		e := err.(*Error)
		e.Field = "/identity" + e.Field
		e.Message = "field identity." + e.Message[len("field "):]
		return e
	}
	switch {
	case !actionRE.MatchString(o.Action):
		return FieldError("/action", "schema_invalid", "field action: %q does not match ^[a-z_]+\\.[a-z_]+$", o.Action)
	case utf8.RuneCountInString(o.Resource) > 200:
		return FieldError("/resource", "schema_invalid", "field resource: longer than 200 characters")
	case !validOutcome(o.Outcome):
		return FieldError("/outcome", "schema_invalid", "field outcome: %q is not one of allow, deny, not_found, conflict, flag_off", o.Outcome)
	case utf8.RuneCountInString(o.Reason) > 200:
		return FieldError("/reason", "schema_invalid", "field reason: longer than 200 characters")
	case !utf8.ValidString(o.Resource) || !utf8.ValidString(o.Reason):
		return FieldError("/resource", "schema_invalid", "field resource or reason: not valid UTF-8")
	}
	return nil
}

func validSurface(s Surface) bool {
	switch s {
	case SurfaceChat, SurfaceWorker, SurfaceTelegram, SurfaceVoice, SurfaceAPI:
		return true
	}
	return false
}

func validTrust(t Trust) bool {
	switch t {
	case TrustRouter, TrustRelay, TrustWorker, TrustEvidence:
		return true
	}
	return false
}

func validOutcome(o Outcome) bool {
	switch o {
	case OutcomeAllow, OutcomeDeny, OutcomeNotFound, OutcomeConflict, OutcomeFlagOff:
		return true
	}
	return false
}
