package shim

import (
	"context"
	"regexp"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// DefaultProject is the project tag of a request without X-Caduceus-Project.
const DefaultProject = "default"

var projectRE = regexp.MustCompile(`^[A-Za-z0-9._:/-]{1,120}$`)

// ProjectTag is the project a request's entities are kept under: the
// X-Caduceus-Project header when well formed, else DefaultProject.
func ProjectTag(header string) string {
	if projectRE.MatchString(header) {
		return header
	}
	return DefaultProject
}

// Entity is one remembered entity of a (tenant, subject, project).
type Entity struct {
	Subject   string `json:"subject"`
	Project   string `json:"project"`
	Kind      string `json:"kind"`
	Value     string `json:"value"`
	FirstSeen string `json:"first_seen"`
	LastSeen  string `json:"last_seen"`
	Count     int64  `json:"count"`
}

// Outcome values of a fired provision.
const (
	OutcomePending    = "pending"     // the conversation has not moved on yet
	OutcomeOK         = "ok"          // the next turn carried no error signature
	OutcomeRetryError = "retry_error" // the next turn carried an error signature
)

// RuleOutcome is what became of one provision fired on one turn.
type RuleOutcome struct {
	Receipt      string `json:"receipt"` // the turn's receipt id
	Conversation string `json:"conversation"`
	Subject      string `json:"subject"`
	Project      string `json:"project"`
	Provision    string `json:"provision"`
	Version      int64  `json:"version"`
	Builtin      bool   `json:"builtin,omitempty"`
	Outcome      string `json:"outcome"`
	// ErrorSignature is the first error signature of the next turn (retry_error only).
	ErrorSignature string `json:"error_signature,omitempty"`
	// NextReceipt is the receipt of the turn that resolved the outcome.
	NextReceipt string `json:"next_receipt,omitempty"`
	FiredAt     string `json:"fired_at"`
	ResolvedAt  string `json:"resolved_at,omitempty"`
}

// MemoryStore keeps entity memory and rule outcomes, per tenant (issue 6).
// Each method is one or two statements:
//
//   - TouchEntities is an upsert per entity: INSERT ... ON CONFLICT
//     (tenant, subject, project, kind, value) DO UPDATE SET count = count
//   - 1, last_seen = excluded.last_seen (first_seen kept).
//   - AddOutcomes inserts pending rows keyed (tenant, receipt, provision);
//     a duplicate key is ignored.
//   - ResolveOutcomes is one conditional UPDATE: WHERE tenant = ? AND
//     conversation = ? AND outcome = 'pending' AND receipt <> ?, so two
//     processes resolving the same turn cannot both flip a row.
//
// Errors are failures only.
type MemoryStore interface {
	// TouchEntities records one sighting of each entity at time at.
	TouchEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, es []EntityRef, at time.Time) error
	// ListEntities returns a subject's entities in project ("" = every
	// project), most recently seen first (ties by project, kind, value), at
	// most limit. Times round to the microsecond.
	ListEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, limit int) ([]Entity, error)
	// AddOutcomes stores pending outcomes (Outcome is ignored and stored as pending).
	AddOutcomes(ctx context.Context, tenant contract.TenantSlot, os []RuleOutcome) error
	// ResolveOutcomes sets every pending outcome of conversation whose
	// receipt is not exceptReceipt to outcome (with signature and
	// nextReceipt), and returns how many rows it changed.
	ResolveOutcomes(ctx context.Context, tenant contract.TenantSlot, conversation, exceptReceipt, outcome, signature, nextReceipt string, at time.Time) (int, error)
	// ListOutcomes returns outcomes newest first (by receipt id, a ULID,
	// descending, then provision), for one subject ("" = all), at most limit.
	ListOutcomes(ctx context.Context, tenant contract.TenantSlot, subject string, limit int) ([]RuleOutcome, error)

	SyncLedger
}

// SyncMark remembers what the last sync of one record did: the source
// version it took and the local version that write produced. A local
// version other than LocalVersion means the record was edited locally
// since, and a sync will not overwrite it.
type SyncMark struct {
	Kind          string `json:"kind"` // provision, context
	ID            string `json:"id"`
	SourceVersion int64  `json:"source_version"`
	LocalVersion  int64  `json:"local_version"`
}

// SyncLedger keeps SyncMarks per tenant (part of MemoryStore). PutSyncMark
// is one upsert on (tenant, kind, id).
type SyncLedger interface {
	// GetSyncMark returns the mark of a record, and false when there is none.
	GetSyncMark(ctx context.Context, tenant contract.TenantSlot, kind, id string) (SyncMark, bool, error)
	// PutSyncMark stores m, replacing the record's previous mark.
	PutSyncMark(ctx context.Context, tenant contract.TenantSlot, m SyncMark) error
}

// MemoryConfig configures a Memory. Store and Rules are required.
type MemoryConfig struct {
	Store MemoryStore
	// Rules is the shim's provision store (insights read provisions, never write them).
	Rules Store
	// BuiltinTenant holds system_builtin rows (empty: DefaultBuiltinTenant).
	BuiltinTenant contract.TenantSlot
	Now           func() time.Time
	// Logger for failures the observer cannot return (nil: none logged).
	Logf func(format string, args ...any)
}

// Memory is the deterministic entity memory, outcome tracker and insight
// synthesizer. It is a shim Observer: add it to Config.Observers.
type Memory struct {
	cfg MemoryConfig
}

// NewMemory returns a Memory. It panics if Store or Rules is nil (a wiring bug).
func NewMemory(cfg MemoryConfig) *Memory {
	if cfg.Store == nil || cfg.Rules == nil {
		panic("shim: MemoryConfig.Store and MemoryConfig.Rules are required")
	}
	if cfg.BuiltinTenant == "" {
		cfg.BuiltinTenant = DefaultBuiltinTenant
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Memory{cfg: cfg}
}

var _ Observer = (*Memory)(nil)

// ObserveTurn records a proxied turn: its entities under (tenant, subject,
// project); then the conversation's pending outcomes become retry_error
// when this turn carries an error signature, ok otherwise; then each
// provision fired on this turn gets a pending outcome. Refused turns and
// unparsed bodies are ignored.
func (m *Memory) ObserveTurn(ctx context.Context, t Turn) {
	if t.Request == nil || t.Receipt.Decision == DecisionRefused {
		return
	}
	if err := m.Record(ctx, t.Caller, t.Conversation, ProjectTag(t.Project), t.Receipt, t.Request); err != nil {
		m.cfg.Logf("shim: memory: %v", err)
	}
}

// Record is ObserveTurn with its parts given (and its failure returned).
func (m *Memory) Record(ctx context.Context, caller contract.Caller, conversation, project string, rc Receipt, req *wire.Request) error {
	tenant, subject := caller.Identity.TenantSlot, caller.Identity.Subject
	at := m.cfg.Now()
	es := TurnEntities(req)
	if ts, ok := m.cfg.Store.(TurnMemoryStore); ok {
		return ts.RecordMemory(ctx, m.write(caller, conversation, project, rc, es, at))
	}
	if len(es) > 0 {
		if err := m.cfg.Store.TouchEntities(ctx, tenant, subject, project, es, at); err != nil {
			return err
		}
	}
	if conversation == "" {
		return nil
	}
	outcome, sig := turnOutcome(es)
	if _, err := m.cfg.Store.ResolveOutcomes(ctx, tenant, conversation, rc.ID, outcome, sig, rc.ID, at); err != nil {
		return err
	}
	if len(rc.Fired) == 0 {
		return nil
	}
	return m.cfg.Store.AddOutcomes(ctx, tenant, pendingOutcomes(rc, conversation, subject, project, at))
}

// MemoryWrite is one turn's memory update: touch Entities; then, when
// Conversation is not empty, resolve the conversation's pending outcomes of
// other receipts to Outcome (with Signature, and Receipt as the next
// receipt) and add Pending.
type MemoryWrite struct {
	Tenant             contract.TenantSlot
	Subject, Project   string
	Entities           []EntityRef
	Conversation       string
	Receipt            string
	Outcome, Signature string
	Pending            []RuleOutcome
	At                 time.Time
}

// TurnMemoryStore is an optional MemoryStore capability: a MemoryWrite in
// one transaction (on SQLite through the group commit, shared with the
// turns that finish together).
type TurnMemoryStore interface {
	RecordMemory(ctx context.Context, w MemoryWrite) error
}

// TurnPlanner is an Observer whose work on a turn is a MemoryWrite. With
// Config.Turns, the Service asks it for that write and commits it in the
// turn's own transaction, with the receipt and its audit record, instead
// of calling ObserveTurn.
type TurnPlanner interface {
	Observer
	PlanTurn(t Turn) (MemoryWrite, bool)
}

var _ TurnPlanner = (*Memory)(nil)

// PlanTurn implements TurnPlanner: the write ObserveTurn would make (none
// for refused turns and unparsed bodies).
func (m *Memory) PlanTurn(t Turn) (MemoryWrite, bool) {
	if t.Request == nil || t.Receipt.Decision == DecisionRefused {
		return MemoryWrite{}, false
	}
	return m.write(t.Caller, t.Conversation, ProjectTag(t.Project), t.Receipt, TurnEntities(t.Request), m.cfg.Now()), true
}

func (m *Memory) write(caller contract.Caller, conversation, project string, rc Receipt, es []EntityRef, at time.Time) MemoryWrite {
	subject := caller.Identity.Subject
	outcome, sig := turnOutcome(es)
	return MemoryWrite{Tenant: caller.Identity.TenantSlot, Subject: subject, Project: project, Entities: es,
		Conversation: conversation, Receipt: rc.ID, Outcome: outcome, Signature: sig,
		Pending: pendingOutcomes(rc, conversation, subject, project, at), At: at}
}

// turnOutcome is what a turn says of the conversation's pending outcomes:
// retry_error with the first error signature it carries, else ok.
func turnOutcome(es []EntityRef) (outcome, signature string) {
	for _, e := range es {
		if e.Kind == KindErrorSignature {
			return OutcomeRetryError, e.Value
		}
	}
	return OutcomeOK, ""
}

// pendingOutcomes are the outcomes of the provisions fired on rc (none
// without a conversation).
func pendingOutcomes(rc Receipt, conversation, subject, project string, at time.Time) []RuleOutcome {
	if conversation == "" || len(rc.Fired) == 0 {
		return nil
	}
	os := make([]RuleOutcome, 0, len(rc.Fired))
	for _, f := range rc.Fired {
		os = append(os, RuleOutcome{Receipt: rc.ID, Conversation: conversation, Subject: subject, Project: project,
			Provision: f.ID, Version: f.Version, Builtin: f.Builtin, Outcome: OutcomePending, FiredAt: contract.Timestamp(at)})
	}
	return os
}

// Entities returns the caller's remembered entities in project ("": all
// projects), most recently seen first, at most limit (0: 200). Errors:
// deny (missing_scope) without route, configure or admin scope.
func (m *Memory) Entities(ctx context.Context, caller contract.Caller, project string, limit int) ([]Entity, error) {
	if err := authorizeRead(caller); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	es, err := m.cfg.Store.ListEntities(ctx, caller.Identity.TenantSlot, caller.Identity.Subject, project, limit)
	return es, asErr(err)
}

// Outcomes returns the caller's rule outcomes newest first, at most limit
// (0: 200). Errors: deny (missing_scope) without read scope.
func (m *Memory) Outcomes(ctx context.Context, caller contract.Caller, limit int) ([]RuleOutcome, error) {
	if err := authorizeRead(caller); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	os, err := m.cfg.Store.ListOutcomes(ctx, caller.Identity.TenantSlot, caller.Identity.Subject, limit)
	return os, asErr(err)
}
