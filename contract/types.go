package contract

// Surface is where a record was produced (schema $defs/surface).
type Surface string

// Surfaces of the common schema.
const (
	SurfaceChat     Surface = "chat"
	SurfaceWorker   Surface = "worker"
	SurfaceTelegram Surface = "telegram"
	SurfaceVoice    Surface = "voice"
	SurfaceAPI      Surface = "api"
)

// Provider is a provider class, never a vendor model name (schema $defs/provider).
type Provider string

// Providers of the common schema.
const (
	ProviderCodex  Provider = "codex"
	ProviderClaude Provider = "claude"
	ProviderLocal  Provider = "local"
)

// Effort is a requested reasoning effort (schema $defs/effort).
type Effort string

// Efforts of the common schema.
const (
	EffortLow    Effort = "low"
	EffortMedium Effort = "medium"
	EffortHigh   Effort = "high"
	EffortXHigh  Effort = "xhigh"
)

// Sensitivity classifies how widely a record may be shown (schema $defs/sensitivity).
type Sensitivity string

// Sensitivities of the common schema.
const (
	SensitivityPublic     Sensitivity = "public"
	SensitivityPersonal   Sensitivity = "personal"
	SensitivitySensitive  Sensitivity = "sensitive"
	SensitivityRestricted Sensitivity = "restricted"
)

// RedactionLevel is how much of a record was redacted.
type RedactionLevel string

// Redaction levels of the common schema.
const (
	RedactionNone    RedactionLevel = "none"
	RedactionPartial RedactionLevel = "partial"
	RedactionFull    RedactionLevel = "full"
)

// Redaction is schema $defs/redaction.
type Redaction struct {
	Level  RedactionLevel `json:"level"`
	Reason string         `json:"reason,omitempty"`
}

// ActorType is the kind of actor that produced a record.
type ActorType string

// Actor types of the common schema.
const (
	ActorUser      ActorType = "user"
	ActorAssistant ActorType = "assistant"
	ActorTool      ActorType = "tool"
	ActorSystem    ActorType = "system"
	ActorOperator  ActorType = "operator"
)

// Actor is schema $defs/actor.
type Actor struct {
	Type    ActorType `json:"type"`
	ID      string    `json:"id"`
	Display string    `json:"display,omitempty"`
}

// Route is schema $defs/route: what was asked of the router and what it resolved.
type Route struct {
	Requested      string   `json:"requested"`
	ResolvedTarget string   `json:"resolved_target,omitempty"`
	Provider       Provider `json:"provider,omitempty"`
	Effort         Effort   `json:"effort,omitempty"`
}

// Build is schema $defs/build.
type Build struct {
	Commit      string `json:"commit,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
}

// Provenance is schema $defs/provenance: who produced a record, on which
// surface, under which session or run, through which route, from which build.
type Provenance struct {
	Surface        Surface `json:"surface"`
	Actor          Actor   `json:"actor"`
	RecordedAt     string  `json:"recorded_at"`
	SessionID      string  `json:"session_id,omitempty"`
	ConversationID string  `json:"conversation_id,omitempty"`
	MessageID      string  `json:"message_id,omitempty"`
	RunID          string  `json:"run_id,omitempty"`
	Route          *Route  `json:"route,omitempty"`
	Build          *Build  `json:"build,omitempty"`
}

// EvidenceKind names what an evidence reference points at.
type EvidenceKind string

// Evidence kinds of the common schema.
const (
	EvidenceMessage         EvidenceKind = "message"
	EvidenceToolCall        EvidenceKind = "tool_call"
	EvidenceToolResult      EvidenceKind = "tool_result"
	EvidenceArtifactVersion EvidenceKind = "artifact_version"
	EvidenceSource          EvidenceKind = "source"
	EvidencePassage         EvidenceKind = "passage"
	EvidenceMemory          EvidenceKind = "memory"
	EvidenceApproval        EvidenceKind = "approval"
	EvidenceRun             EvidenceKind = "run"
	EvidenceURL             EvidenceKind = "url"
	EvidenceFile            EvidenceKind = "file"
	EvidenceBuild           EvidenceKind = "build"
	EvidenceFlux            EvidenceKind = "flux"
	EvidencePod             EvidenceKind = "pod"
	EvidenceReceipt         EvidenceKind = "receipt"
)

// EvidenceRef is schema $defs/evidence_ref: a pointer, never the payload.
type EvidenceRef struct {
	Kind EvidenceKind `json:"kind"`
	ID   string       `json:"id"`
	URI  string       `json:"uri,omitempty"`
	Hash string       `json:"hash,omitempty"`
}

// Tags is schema $defs/tags.
type Tags []string

// TenantSlot is schema $defs/tenant_slot ("slot-N").
type TenantSlot string

// Trust says how an identity was asserted (schema $defs/trust).
type Trust string

// Trust values of the common schema. API keys assert TrustRouter: the key is
// the router's tenant assignment. The relay asserts TrustRelay.
const (
	TrustRouter   Trust = "router"
	TrustRelay    Trust = "relay"
	TrustWorker   Trust = "worker"
	TrustEvidence Trust = "evidence"
)

// Identity is schema $defs/identity: the resolved caller. Every record path
// and authorization check derives from TenantSlot + Subject.
type Identity struct {
	TenantSlot TenantSlot `json:"tenant_slot"`
	Subject    string     `json:"subject"`
	Surface    Surface    `json:"surface"`
	Trust      Trust      `json:"trust"`
}

// Revision is schema $defs/revision: an optimistic concurrency counter, >= 1.
type Revision int64

// IdempotencyKey is schema $defs/idempotency_key.
type IdempotencyKey string

// Outcome is the result of an authorization decision.
type Outcome string

// Outcomes of the common schema's audit_outcome.
const (
	OutcomeAllow    Outcome = "allow"
	OutcomeDeny     Outcome = "deny"
	OutcomeNotFound Outcome = "not_found"
	OutcomeConflict Outcome = "conflict"
	OutcomeFlagOff  Outcome = "flag_off"
)

// AuditOutcome is schema $defs/audit_outcome, written for every read and mutation.
type AuditOutcome struct {
	At       string   `json:"at"`
	Identity Identity `json:"identity"`
	Action   string   `json:"action"`
	Resource string   `json:"resource"`
	Outcome  Outcome  `json:"outcome"`
	Reason   string   `json:"reason,omitempty"`
}
