package trader

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"go.yaml.in/yaml/v3"
)

// Format is the format of an import file.
type Format string

// Import file formats.
const (
	FormatYAML Format = "yaml"
	FormatJSON Format = "json"
)

// FormatOf returns the format of a file by its extension (.yaml, .yml,
// .json), or an invalid Error.
func FormatOf(name string) (Format, error) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml":
		return FormatYAML, nil
	case ".json":
		return FormatJSON, nil
	}
	return "", contract.Invalidf("bad_format", "trader: %s: an import file ends in .yaml, .yml or .json", filepath.Base(name))
}

// MaxImportBytes bounds an import file.
const MaxImportBytes = 4 << 20

// File is the content of an import file:
//
//	concerns:
//	  - {concern_id: "qndd8o9ppop6:xrpusd", execution_state: healthy}
//	strategies:
//	  - {id: 9cf29124-65a7-4950-ac18-65f938e0239b, account_id: qndd8o9ppop6, market_symbol: xrpusd,
//	     name: trend, status: active, runnable: true, risk_mode: normal}
type File struct {
	Concerns   []FileConcern  `json:"concerns" yaml:"concerns"`
	Strategies []FileStrategy `json:"strategies" yaml:"strategies"`
}

// FileConcern is a concern in an import file.
type FileConcern struct {
	ConcernID      string         `json:"concern_id" yaml:"concern_id"`
	ExecutionState ExecutionState `json:"execution_state" yaml:"execution_state"`
}

// FileStrategy is a strategy in an import file. An empty risk_mode is the
// first configured one; runnable must be given.
type FileStrategy struct {
	ID           string `json:"id" yaml:"id"`
	AccountID    string `json:"account_id" yaml:"account_id"`
	MarketSymbol string `json:"market_symbol" yaml:"market_symbol"`
	Name         string `json:"name" yaml:"name"`
	Status       Status `json:"status" yaml:"status"`
	Runnable     *bool  `json:"runnable" yaml:"runnable"`
	RiskMode     string `json:"risk_mode" yaml:"risk_mode"`
}

// ParseFile decodes an import file strictly: unknown fields, wrong types,
// duplicate ids and trailing documents are refused with an invalid Error
// naming what is wrong. It does not check the entries against a store.
func ParseFile(data []byte, format Format) (File, error) {
	var f File
	if len(data) > MaxImportBytes {
		return f, contract.Invalidf("file_too_large", "trader: import file is %d bytes; the limit is %d", len(data), MaxImportBytes)
	}
	switch format {
	case FormatJSON:
		switch err := contract.DecodeStrict(data, &f); {
		case errors.Is(err, contract.ErrTrailingData):
			return File{}, contract.Invalidf("bad_file", "trader: import file: trailing data after the document")
		case err != nil:
			return File{}, contract.Invalidf("bad_file", "trader: import file: %v", err)
		}
	case FormatYAML:
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&f); err != nil {
			if errors.Is(err, io.EOF) {
				return File{}, contract.Invalidf("bad_file", "trader: import file is empty")
			}
			return File{}, contract.Invalidf("bad_file", "trader: import file: %v", err)
		}
		var extra any
		if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
			return File{}, contract.Invalidf("bad_file", "trader: import file: only one YAML document is allowed")
		}
	default:
		return File{}, contract.Invalidf("bad_format", "trader: import format %q is not yaml or json", format)
	}
	seen := map[string]bool{}
	for i, c := range f.Concerns {
		if seen["c:"+c.ConcernID] {
			return File{}, contract.FieldError(fmt.Sprintf("concerns[%d].concern_id", i), "duplicate_id", "trader: concern %s is listed twice", clip(c.ConcernID, 130))
		}
		seen["c:"+c.ConcernID] = true
	}
	for i, s := range f.Strategies {
		if seen["s:"+s.ID] {
			return File{}, contract.FieldError(fmt.Sprintf("strategies[%d].id", i), "duplicate_id", "trader: strategy %s is listed twice", clip(s.ID, 64))
		}
		seen["s:"+s.ID] = true
	}
	return f, nil
}

// ImportResult counts what an import changed.
type ImportResult struct {
	ConcernsCreated   int `json:"concerns_created"`
	ConcernsUpdated   int `json:"concerns_updated"`
	StrategiesCreated int `json:"strategies_created"`
	StrategiesUpdated int `json:"strategies_updated"`
	Unchanged         int `json:"unchanged"`
}

// Changed reports whether the import changed anything.
func (r ImportResult) Changed() bool {
	return r.ConcernsCreated+r.ConcernsUpdated+r.StrategiesCreated+r.StrategiesUpdated > 0
}

// Import loads concerns and strategies from an import file (caduceus trader
// import FILE) into the caller's tenant, all or nothing, in one transaction.
// Entries that already hold the same values are left alone (re-importing a
// file changes nothing, not even revisions); others are created or updated
// (revision + 1). A strategy's concern is created healthy if neither the
// store nor the file has it. Changed strategies are reconciled through the
// Runtime. Every import is audited (trader.import; reason "unchanged" when
// it changed nothing; refusals in a transaction of their own).
//
// It returns what changed, or: a deny Error without the configure scope; an
// invalid Error naming the entry for a malformed file or entry, a strategy
// moved to another account or market, or a result with two active or paused
// strategies on one concern; an internal Error when the store or runtime
// fails.
func (s *Service) Import(ctx context.Context, caller contract.Caller, data []byte, format Format) (ImportResult, error) {
	if err := authorize(caller, contract.ScopeConfigure); err != nil {
		return ImportResult{}, err
	}
	ctx = context.WithoutCancel(ctx)
	res, err := s.importFile(ctx, caller, data, format)
	return res, s.finishWrite(ctx, caller, AuditImport, "trader/import", err)
}

func (s *Service) importFile(ctx context.Context, caller contract.Caller, data []byte, format Format) (ImportResult, error) {
	f, err := ParseFile(data, format)
	if err != nil {
		return ImportResult{}, err
	}
	wanted, err := s.checkImport(f)
	if err != nil {
		return ImportResult{}, err
	}
	var res ImportResult
	var refusal error
	err = s.store.InTx(ctx, caller.Identity.TenantSlot, func(tx Tx) error {
		res, refusal = ImportResult{}, nil
		now := stamp(s.now())
		if err := importConcerns(ctx, tx, f.Concerns, now, &res); err != nil {
			return err
		}
		for _, st := range wanted {
			var err error
			if refusal, err = s.importStrategy(ctx, tx, st, now, &res); err != nil {
				return err
			}
			if refusal != nil {
				return refusal
			}
		}
		reason := "import"
		if !res.Changed() {
			reason = "unchanged"
		}
		payload := map[string]any{"file_sha256": contract.SHA256(data), "format": format, "result": res}
		_, err := tx.AppendAudit(ctx, s.entry(caller, AuditImport, "trader/import", contract.OutcomeAllow, reason, now, contract.ActorOperator, payload))
		return err
	})
	if refusal != nil {
		return ImportResult{}, refusal
	}
	if err != nil {
		return ImportResult{}, err
	}
	return res, nil
}

// checkImport checks every entry of f before anything is read or written
// and returns the strategies as they are to be stored (risk mode defaulted),
// demotions first: the unique index on current strategies is checked per
// statement, so a strategy leaves "current" before another enters it.
func (s *Service) checkImport(f File) ([]Strategy, error) {
	for i, c := range f.Concerns {
		if err := checkConcern(Concern{ConcernID: c.ConcernID, ExecutionState: c.ExecutionState}); err != nil {
			return nil, prefixField(err, fmt.Sprintf("concerns[%d]", i))
		}
	}
	wanted := make([]Strategy, len(f.Strategies))
	for i, fs := range f.Strategies {
		st := Strategy{ID: fs.ID, AccountID: fs.AccountID, MarketSymbol: fs.MarketSymbol, Name: fs.Name, Status: fs.Status, RiskMode: fs.RiskMode}
		if st.RiskMode == "" {
			st.RiskMode = s.risk[0]
		}
		if fs.Runnable == nil {
			return nil, contract.FieldError(fmt.Sprintf("strategies[%d].runnable", i), CodeMissingField, "trader: strategy %s: runnable is required", clip(fs.ID, 64))
		}
		st.Runnable = *fs.Runnable
		if err := s.checkStrategy(st); err != nil {
			return nil, prefixField(err, fmt.Sprintf("strategies[%d]", i))
		}
		wanted[i] = st
	}
	slices.SortStableFunc(wanted, func(a, b Strategy) int {
		return boolInt(a.Status.Current()) - boolInt(b.Status.Current())
	})
	return wanted, nil
}

// importConcerns creates the file's concerns that are new and updates those
// whose execution state differs; the others are counted unchanged.
func importConcerns(ctx context.Context, tx Tx, concerns []FileConcern, now time.Time, res *ImportResult) error {
	for _, fc := range concerns {
		old, ok, err := tx.LockConcern(ctx, fc.ConcernID)
		switch {
		case err != nil:
			return err
		case !ok:
			res.ConcernsCreated++
			err = tx.InsertConcern(ctx, Concern{ConcernID: fc.ConcernID, ExecutionState: fc.ExecutionState, Revision: 1, UpdatedAt: now})
		case old.ExecutionState == fc.ExecutionState:
			res.Unchanged++
		default:
			res.ConcernsUpdated++
			next := old
			next.ExecutionState, next.Revision, next.UpdatedAt = fc.ExecutionState, old.Revision+1, now
			err = tx.UpdateConcern(ctx, next, old.Revision)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// importStrategy creates or updates one strategy (its concern created
// healthy when missing) and reconciles it when its status or risk mode
// changed; one that holds the same values is counted unchanged. It returns
// a refusal (the whole import is) for a strategy moved to another concern
// or a second current strategy on a concern.
func (s *Service) importStrategy(ctx context.Context, tx Tx, st Strategy, now time.Time, res *ImportResult) (refusal, err error) {
	if err := ensureConcern(ctx, tx, st.ConcernID(), now); err != nil {
		return nil, err
	}
	old, ok, err := tx.Strategy(ctx, st.ID)
	if err != nil {
		return nil, err
	}
	if ok && (old.AccountID != st.AccountID || old.MarketSymbol != st.MarketSymbol) {
		return contract.FieldError("strategies", "immutable_field", "trader: strategy %s belongs to %s; an import cannot move it to %s", st.ID, old.ConcernID(), st.ConcernID()), nil
	}
	if ok && old.Name == st.Name && old.Status == st.Status && old.Runnable == st.Runnable && old.RiskMode == st.RiskMode {
		res.Unchanged++
		return nil, nil
	}
	if refusal, err = s.checkCurrent(ctx, tx, st); err != nil || refusal != nil {
		if refusal != nil {
			refusal = contract.FieldError("strategies", "concern_has_current", "%s", contract.AsError(refusal).Message)
		}
		return refusal, err
	}
	st.UpdatedAt = now
	if ok {
		res.StrategiesUpdated++
		st.Revision = old.Revision + 1
		err = tx.UpdateStrategy(ctx, st, old.Revision)
	} else {
		res.StrategiesCreated++
		st.Revision = 1
		err = tx.InsertStrategy(ctx, st)
	}
	if err != nil {
		return nil, err
	}
	if !ok || old.Status != st.Status || old.RiskMode != st.RiskMode {
		if _, err := s.rt.Reconcile(ctx, tx, st); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// prefixField qualifies an invalid Error's field with the entry it is in.
func prefixField(err error, prefix string) error {
	ce := contract.AsError(err)
	out := *ce
	out.Field = prefix + "." + ce.Field
	out.Message = strings.Replace(ce.Message, "trader: ", "trader: "+prefix+": ", 1)
	return &out
}
