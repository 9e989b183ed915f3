// Package memory is the shim's deterministic memory (seed 003, H13): it
// extracts entities (file paths, code symbols, tessera URIs, statute card
// ids, error signatures) from each proxied turn, remembers them per
// (tenant, subject, project), tracks what became of every fired provision
// (ok or retry_error on the next turn), and synthesizes candidate
// provisions from both (insights). Memory is a shim.Observer and a
// shim.TurnPlanner; it reads provisions through shim.Store and never writes
// them. Stores implement Store (and optionally TurnStore).
package memory

import (
	"context"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// DefaultProject is the project tag of a request without X-Caduceus-Project.
const DefaultProject = "default"

// projectTag is the project a request's entities are kept under: the
// X-Caduceus-Project header when well formed (wellFormedProject), else
// DefaultProject.
func projectTag(header string) string {
	if wellFormedProject(header) {
		return header
	}
	return DefaultProject
}

// wellFormedProject reports whether s is 1 to 120 bytes of A-Z, a-z, 0-9,
// '.', '_', ':', '/' and '-'. It is a loop, not a regular expression:
// every turn asks it, and as an expression it was the only one a turn
// compiled, its bounded repetition expanded 120 times, on a new Worker
// isolate's first turn (docs/edge.md, "Cold start").
func wellFormedProject(s string) bool {
	if len(s) == 0 || len(s) > 120 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '.', c == '_', c == ':', c == '/', c == '-':
		default:
			return false
		}
	}
	return true
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

// Store keeps entity memory and rule outcomes, per tenant (seed 003 H13).
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
type Store interface {
	// TouchEntities records one sighting of each entity at time at.
	TouchEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, es []shim.EntityRef, at time.Time) error
	// ListEntities returns a subject's entities in project ("" = every
	// project), most recently seen first (ties by project, kind, value), at
	// most limit. Times round to the microsecond.
	ListEntities(ctx context.Context, tenant contract.TenantSlot, subject, project string, limit int) ([]Entity, error)
	// AddOutcomes stores pending outcomes (Outcome is ignored and stored as pending).
	AddOutcomes(ctx context.Context, tenant contract.TenantSlot, os []shim.RuleOutcome) error
	// ResolveOutcomes sets every pending outcome of conversation whose
	// receipt is not exceptReceipt to outcome (with signature and
	// nextReceipt), and returns how many rows it changed.
	ResolveOutcomes(ctx context.Context, tenant contract.TenantSlot, conversation, exceptReceipt, outcome, signature, nextReceipt string, at time.Time) (int, error)
	// ListOutcomes returns outcomes newest first (by receipt id, a ULID,
	// descending, then provision), for one subject ("" = all), at most limit.
	ListOutcomes(ctx context.Context, tenant contract.TenantSlot, subject string, limit int) ([]shim.RuleOutcome, error)

	shim.SyncLedger
}

// Config configures a Memory. Store and Rules are required.
type Config struct {
	Store Store
	// Rules is the shim's provision store (insights read provisions, never write them).
	Rules shim.Store
	// BuiltinTenant holds system_builtin rows (empty: shim.DefaultBuiltinTenant).
	BuiltinTenant contract.TenantSlot
	Now           func() time.Time
	// Logger for failures the observer cannot return (nil: none logged).
	Logf func(format string, args ...any)
}

// Memory is the deterministic entity memory, outcome tracker and insight
// synthesizer. It is a shim.Observer: add it to shim.Config.Observers.
type Memory struct {
	cfg Config
}

// New returns a Memory. It panics if Store or Rules is nil (a wiring bug).
func New(cfg Config) *Memory {
	if cfg.Store == nil || cfg.Rules == nil {
		panic("shim: Config.Store and Config.Rules are required")
	}
	if cfg.BuiltinTenant == "" {
		cfg.BuiltinTenant = shim.DefaultBuiltinTenant
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Memory{cfg: cfg}
}

var _ shim.Observer = (*Memory)(nil)

// ObserveTurn records a proxied turn: its entities under (tenant, subject,
// project); then the conversation's pending outcomes become retry_error
// when this turn carries an error signature, ok otherwise; then each
// provision fired on this turn gets a pending outcome. Refused turns and
// unparsed bodies are ignored.
func (m *Memory) ObserveTurn(ctx context.Context, t shim.Turn) {
	if t.Request == nil || t.Receipt.Decision == shim.DecisionRefused {
		return
	}
	if err := m.Record(ctx, t.Caller, t.Conversation, projectTag(t.Project), t.Receipt, t.Request); err != nil {
		m.cfg.Logf("shim: memory: %v", err)
	}
}

// Record is ObserveTurn with its parts given (and its failure returned).
func (m *Memory) Record(ctx context.Context, caller contract.Caller, conversation, project string, rc shim.Receipt, req *wire.Request) error {
	tenant, subject := caller.Identity.TenantSlot, caller.Identity.Subject
	at := m.cfg.Now()
	es := turnEntities(req)
	if ts, ok := m.cfg.Store.(TurnStore); ok {
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

// TurnStore is an optional Store capability: a shim.MemoryWrite in
// one transaction (on SQLite through the group commit, shared with the
// turns that finish together).
type TurnStore interface {
	RecordMemory(ctx context.Context, w shim.MemoryWrite) error
}

var _ shim.TurnPlanner = (*Memory)(nil)

// PlanTurn implements TurnPlanner: the write ObserveTurn would make (none
// for refused turns and unparsed bodies).
func (m *Memory) PlanTurn(t shim.Turn) (shim.MemoryWrite, bool) {
	if t.Request == nil || t.Receipt.Decision == shim.DecisionRefused {
		return shim.MemoryWrite{}, false
	}
	return m.write(t.Caller, t.Conversation, projectTag(t.Project), t.Receipt, turnEntities(t.Request), m.cfg.Now()), true
}

func (m *Memory) write(caller contract.Caller, conversation, project string, rc shim.Receipt, es []shim.EntityRef, at time.Time) shim.MemoryWrite {
	subject := caller.Identity.Subject
	outcome, sig := turnOutcome(es)
	return shim.MemoryWrite{Tenant: caller.Identity.TenantSlot, Subject: subject, Project: project, Entities: es,
		Conversation: conversation, Receipt: rc.ID, Outcome: outcome, Signature: sig,
		Pending: pendingOutcomes(rc, conversation, subject, project, at), At: at}
}

// turnOutcome is what a turn says of the conversation's pending outcomes:
// retry_error with the first error signature it carries, else ok.
func turnOutcome(es []shim.EntityRef) (outcome, signature string) {
	for _, e := range es {
		if e.Kind == KindErrorSignature {
			return OutcomeRetryError, e.Value
		}
	}
	return OutcomeOK, ""
}

// pendingOutcomes are the outcomes of the provisions fired on rc (none
// without a conversation).
func pendingOutcomes(rc shim.Receipt, conversation, subject, project string, at time.Time) []shim.RuleOutcome {
	if conversation == "" || len(rc.Fired) == 0 {
		return nil
	}
	os := make([]shim.RuleOutcome, 0, len(rc.Fired))
	for _, f := range rc.Fired {
		os = append(os, shim.RuleOutcome{Receipt: rc.ID, Conversation: conversation, Subject: subject, Project: project,
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
func (m *Memory) Outcomes(ctx context.Context, caller contract.Caller, limit int) ([]shim.RuleOutcome, error) {
	if err := authorizeRead(caller); err != nil {
		return nil, err
	}
	if limit <= 0 || limit > 1000 {
		limit = 200
	}
	os, err := m.cfg.Store.ListOutcomes(ctx, caller.Identity.TenantSlot, caller.Identity.Subject, limit)
	return os, asErr(err)
}

func authorizeRead(c contract.Caller) error {
	return c.RequireScope("shim: reading", contract.ScopeRoute, contract.ScopeConfigure, contract.ScopeAdmin)
}

func isNotFound(err error) bool { return err != nil && contract.KindOf(err) == contract.KindNotFound }

// asErr is contract.AsError that keeps a nil error nil (a nil *Error in an
// error interface would not be).
func asErr(err error) error {
	if err == nil {
		return nil
	}
	return contract.AsError(err)
}
