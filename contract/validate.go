package contract

import (
	"strings"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/internal/lazyre"
)

// Validate checks the identity against the common schema's identity def
// without a round trip through JSON: the hot path of every audit record.
// TestGoValidatorsAgreeWithSchema proves it agrees with the schema.
func (id Identity) Validate() error {
	switch {
	case !matchTenantSlot(string(id.TenantSlot)):
		return FieldError("/tenant_slot", "schema_invalid", "field tenant_slot: %q does not match ^slot-[0-9]{1,3}$", id.TenantSlot)
	case !matchUserRef(id.Subject):
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
	if !matchTimestamp(o.At) {
		return FieldError("/at", "schema_invalid", "field at: %q is not an RFC 3339 UTC timestamp with a trailing Z", o.At)
	}
	if err := o.Identity.Validate(); err != nil {
		e := err.(*Error)
		e.Field = "/identity" + e.Field
		e.Message = "field identity." + e.Message[len("field "):]
		return e
	}
	switch {
	case !matchAction(o.Action):
		return FieldError("/action", "schema_invalid", "field action: %q does not match ^[a-z_]+\\.[a-z_]+$", o.Action)
	case utf8.RuneCountInString(o.Resource) > 200:
		return FieldError("/resource", "schema_invalid", "field resource: longer than 200 characters")
	case !validOutcome(o.Outcome):
		return FieldError("/outcome", "schema_invalid", "field outcome: %q is not one of allow, deny, not_found, conflict, flag_off", o.Outcome)
	case utf8.RuneCountInString(o.Reason) > 200:
		return FieldError("/reason", "schema_invalid", "field reason: longer than 200 characters")
	case !storableText(o.Resource):
		return FieldError("/resource", "schema_invalid", "field resource: not valid UTF-8, or holds a NUL character")
	case !storableText(o.Reason):
		return FieldError("/reason", "schema_invalid", "field reason: not valid UTF-8, or holds a NUL character")
	}
	return nil
}

// StorableText is s as an audit record's text keeps it on every store:
// invalid UTF-8 and NUL characters become U+FFFD, and the text is cut to
// at most n bytes on a character boundary. A writer of records whose
// text comes from outside (a request's path, a gateway's session key)
// passes it through here, so the record is written rather than refused
// by AuditOutcome.Validate.
func StorableText(s string, n int) string {
	if !storableText(s) {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	for !utf8.RuneStart(s[n]) { // s is valid UTF-8 here: s[0] starts a character
		n--
	}
	return s[:n]
}

// storableText says whether every store keeps s as text: valid UTF-8 with
// no NUL character (Postgres refuses both in a text column; SQLite would
// keep them, so a record would be written on one store and refused on the
// other).
func storableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
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

// Validate checks the provenance against the common schema's provenance def
// without a round trip through JSON. TestGoValidatorsAgreeWithSchema proves
// it agrees with the schema.
func (p *Provenance) Validate() error {
	bad := func(field, format string, args ...any) error {
		return FieldError("/"+strings.ReplaceAll(field, ".", "/"), "schema_invalid", "field "+field+": "+format, args...)
	}
	switch {
	case !validSurface(p.Surface):
		return bad("surface", "%q is not one of chat, worker, telegram, voice, api", p.Surface)
	case !validActorType(p.Actor.Type):
		return bad("actor.type", "%q is not one of user, assistant, tool, system, operator", p.Actor.Type)
	case p.Actor.ID == "" || runes(p.Actor.ID) > 120:
		return bad("actor.id", "must be 1 to 120 characters")
	case runes(p.Actor.Display) > 120:
		return bad("actor.display", "longer than 120 characters")
	case !matchTimestamp(p.RecordedAt):
		return bad("recorded_at", "%q is not an RFC 3339 UTC timestamp with a trailing Z", p.RecordedAt)
	case runes(p.SessionID) > 120:
		return bad("session_id", "longer than 120 characters")
	case p.ConversationID != "" && !matchID(p.ConversationID):
		return bad("conversation_id", "%q is not a prefix-typed id", p.ConversationID)
	case runes(p.MessageID) > 120:
		return bad("message_id", "longer than 120 characters")
	case runes(p.RunID) > 120:
		return bad("run_id", "longer than 120 characters")
	}
	if r := p.Route; r != nil {
		switch {
		case r.Requested == "" || runes(r.Requested) > 120:
			return bad("route.requested", "must be 1 to 120 characters")
		case runes(r.ResolvedTarget) > 120:
			return bad("route.resolved_target", "longer than 120 characters")
		case r.Provider != "" && r.Provider != ProviderCodex && r.Provider != ProviderClaude && r.Provider != ProviderLocal:
			return bad("route.provider", "%q is not one of codex, claude, local", r.Provider)
		case r.Effort != "" && r.Effort != EffortLow && r.Effort != EffortMedium && r.Effort != EffortHigh && r.Effort != EffortXHigh:
			return bad("route.effort", "%q is not one of low, medium, high, xhigh", r.Effort)
		}
	}
	if b := p.Build; b != nil {
		switch {
		case b.Commit != "" && !commitRE().MatchString(b.Commit):
			return bad("build.commit", "%q is not 40 lowercase hex digits", b.Commit)
		case b.ImageDigest != "" && !matchSHA256(b.ImageDigest):
			return bad("build.image_digest", "%q is not sha256:<64 hex>", b.ImageDigest)
		}
	}
	return nil
}

var commitRE = lazyre.New(`^[0-9a-f]{40}$`)

// runes counts characters as JSON Schema's maxLength does (code points);
// invalid UTF-8 counts as the U+FFFD it decodes to.
func runes(s string) int { return utf8.RuneCountInString(s) }

func validActorType(t ActorType) bool {
	switch t {
	case ActorUser, ActorAssistant, ActorTool, ActorSystem, ActorOperator:
		return true
	}
	return false
}

// Validate checks a sensitivity against the common schema's sensitivity
// def. TestSensitivityAndRedactionValidatorsAgreeWithSchema proves it
// agrees with the schema.
func (s Sensitivity) Validate() error {
	switch s {
	case SensitivityPublic, SensitivityPersonal, SensitivitySensitive, SensitivityRestricted:
		return nil
	}
	return FieldError("/sensitivity", "schema_invalid", "field sensitivity: %q is not one of public, personal, sensitive, restricted", s)
}

// Validate checks a redaction against the common schema's redaction def.
func (r *Redaction) Validate() error {
	switch r.Level {
	case RedactionNone, RedactionPartial, RedactionFull:
	default:
		return FieldError("/redaction/level", "schema_invalid", "field redaction.level: %q is not one of none, partial, full", r.Level)
	}
	if runes(r.Reason) > 200 {
		return FieldError("/redaction/reason", "schema_invalid", "field redaction.reason: longer than 200 characters")
	}
	return nil
}
