// Package tradersql is the trader gate's SQL: trader.Store over the store
// core (tables of migrations/100_trader.sql), on SQLite and Postgres.
package tradersql

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trader"
)

// Store is the SQL trader.Store. Every statement filters on the
// transaction's tenant.
type Store struct{ db *store.DB }

// New returns db's trader.Store.
func New(db *store.DB) *Store { return &Store{db: db} }

var _ trader.Store = (*Store)(nil)

//go:embed migrations/*.sql
var migrations embed.FS

func init() { store.RegisterMigrations("tradersql", migrations, "migrations") }

// InTx implements trader.Store. A unique-key violation, a conditional update
// that matched no row, and a serialization failure or deadlock that outlived
// the DB's own retries are reported wrapping trader.ErrConflict.
func (s *Store) InTx(ctx context.Context, tenant contract.TenantSlot, fn func(trader.Tx) error) error {
	err := s.db.InTxFor(ctx, tenant, func(tx *store.Tx) error {
		return fn(&traderTx{tx: tx, tenant: string(tenant)})
	})
	if err != nil && !errors.Is(err, trader.ErrConflict) && (store.IsUniqueViolation(err) || store.IsRetryable(err)) {
		return fmt.Errorf("%w: %w", trader.ErrConflict, err)
	}
	return err
}

type traderTx struct {
	tx     *store.Tx
	tenant string
}

// conflict wraps a unique violation as trader.ErrConflict.
func conflict(op string, err error) error {
	if store.IsUniqueViolation(err) || store.IsRetryable(err) {
		return fmt.Errorf("store: %s: %w: %w", op, trader.ErrConflict, err)
	}
	return fmt.Errorf("store: %s: %w", op, err)
}

const strategyColumns = `id, account_id, market_symbol, name, status, runnable, risk_mode, revision, updated_at`

func scanStrategy(row store.Scanner) (trader.Strategy, error) {
	var s trader.Strategy
	var status string
	var rev, updated int64
	if err := row.Scan(&s.ID, &s.AccountID, &s.MarketSymbol, &s.Name, &status, &s.Runnable, &s.RiskMode, &rev, &updated); err != nil {
		return trader.Strategy{}, err
	}
	s.Status, s.Revision, s.UpdatedAt = trader.Status(status), contract.Revision(rev), store.FromMicros(updated)
	return s, nil
}

func (t *traderTx) Strategy(ctx context.Context, id string) (trader.Strategy, bool, error) {
	s, err := scanStrategy(t.tx.QueryRow(ctx, `SELECT `+strategyColumns+` FROM trader_strategies WHERE tenant = ? AND id = ?`, t.tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return trader.Strategy{}, false, nil
	}
	if err != nil {
		return trader.Strategy{}, false, fmt.Errorf("store: trader strategy: %w", err)
	}
	return s, true, nil
}

func (t *traderTx) Strategies(ctx context.Context, f trader.StrategyFilter) ([]trader.Strategy, error) {
	q := store.Statement{SQL: `SELECT ` + strategyColumns + ` FROM trader_strategies WHERE tenant = ?`, Args: []any{t.tenant}}
	if f.ConcernID != "" {
		account, market, ok := strings.Cut(f.ConcernID, ":")
		if !ok {
			return nil, nil
		}
		q.Add(` AND account_id = ? AND market_symbol = ?`, account, market)
	}
	q.AndEq("account_id", f.AccountID)
	q.AndEq("market_symbol", f.MarketSymbol)
	q.AndEq("status", string(f.Status))
	q.Add(` ORDER BY id`)
	return store.AppendRows(nil, store.QueryRows(ctx, t.tx, "trader strategies", scanStrategy, q.SQL, q.Args...))
}

func (t *traderTx) InsertStrategy(ctx context.Context, s trader.Strategy) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO trader_strategies (tenant, `+strategyColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.tenant, s.ID, s.AccountID, s.MarketSymbol, s.Name, string(s.Status), s.Runnable, s.RiskMode, int64(s.Revision), store.Micros(s.UpdatedAt))
	if err != nil {
		return conflict("trader insert strategy", err)
	}
	return nil
}

func (t *traderTx) UpdateStrategy(ctx context.Context, s trader.Strategy, expect contract.Revision) error {
	res, err := t.tx.Exec(ctx, `UPDATE trader_strategies SET account_id = ?, market_symbol = ?, name = ?, status = ?, runnable = ?, risk_mode = ?, revision = ?, updated_at = ?
		WHERE tenant = ? AND id = ? AND revision = ?`,
		s.AccountID, s.MarketSymbol, s.Name, string(s.Status), s.Runnable, s.RiskMode, int64(s.Revision), store.Micros(s.UpdatedAt),
		t.tenant, s.ID, int64(expect))
	if err != nil {
		return conflict("trader update strategy", err)
	}
	return t.oneRow(res, "strategy "+s.ID, expect)
}

func (t *traderTx) oneRow(res sql.Result, what string, expect contract.Revision) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("store: trader update %s: %w", what, err)
	}
	if n != 1 {
		return fmt.Errorf("store: %s is missing or not at revision %d: %w", what, expect, trader.ErrConflict)
	}
	return nil
}

func (t *traderTx) Concern(ctx context.Context, id string) (trader.Concern, bool, error) {
	return t.concern(ctx, "trader concern", id, "")
}

func (t *traderTx) LockConcern(ctx context.Context, id string) (trader.Concern, bool, error) {
	return t.concern(ctx, "trader lock concern", id, t.tx.Dialect().ForUpdate())
}

// concern reads one concern; suffix ends the SELECT (a row lock or nothing).
func (t *traderTx) concern(ctx context.Context, what, id, suffix string) (trader.Concern, bool, error) {
	c, err := scanConcern(t.tx.QueryRow(ctx, `SELECT `+concernColumns+` FROM trader_concerns WHERE tenant = ? AND concern_id = ?`+suffix, t.tenant, id))
	if errors.Is(err, sql.ErrNoRows) {
		return trader.Concern{}, false, nil
	}
	if err != nil {
		return trader.Concern{}, false, fmt.Errorf("store: %s: %w", what, err)
	}
	return c, true, nil
}

const concernColumns = `concern_id, execution_state, revision, updated_at`

func scanConcern(row store.Scanner) (trader.Concern, error) {
	var c trader.Concern
	var state string
	var rev, updated int64
	if err := row.Scan(&c.ConcernID, &state, &rev, &updated); err != nil {
		return trader.Concern{}, err
	}
	c.ExecutionState, c.Revision, c.UpdatedAt = trader.ExecutionState(state), contract.Revision(rev), store.FromMicros(updated)
	return c, nil
}

func (t *traderTx) Concerns(ctx context.Context) ([]trader.Concern, error) {
	return store.AppendRows(nil, store.QueryRows(ctx, t.tx, "trader concerns", scanConcern,
		`SELECT `+concernColumns+` FROM trader_concerns WHERE tenant = ? ORDER BY concern_id`, t.tenant))
}

func (t *traderTx) InsertConcern(ctx context.Context, c trader.Concern) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO trader_concerns (tenant, concern_id, execution_state, revision, updated_at) VALUES (?, ?, ?, ?, ?)`,
		t.tenant, c.ConcernID, string(c.ExecutionState), int64(c.Revision), store.Micros(c.UpdatedAt))
	if err != nil {
		return conflict("trader insert concern", err)
	}
	return nil
}

func (t *traderTx) UpdateConcern(ctx context.Context, c trader.Concern, expect contract.Revision) error {
	res, err := t.tx.Exec(ctx, `UPDATE trader_concerns SET execution_state = ?, revision = ?, updated_at = ? WHERE tenant = ? AND concern_id = ? AND revision = ?`,
		string(c.ExecutionState), int64(c.Revision), store.Micros(c.UpdatedAt), t.tenant, c.ConcernID, int64(expect))
	if err != nil {
		return conflict("trader update concern", err)
	}
	return t.oneRow(res, "concern "+c.ConcernID, expect)
}

func (t *traderTx) LookupDecision(ctx context.Context, id string) (trader.Decision, bool, error) {
	var d trader.Decision
	var status, response string
	var created int64
	err := t.tx.QueryRow(ctx, `SELECT decision_id, concern_id, fingerprint, status, response, attempt_id, created_at FROM trader_decisions WHERE tenant = ? AND decision_id = ?`,
		t.tenant, id).Scan(&d.DecisionID, &d.ConcernID, &d.Fingerprint, &status, &response, &d.AttemptID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return trader.Decision{}, false, nil
	}
	if err != nil {
		return trader.Decision{}, false, fmt.Errorf("store: trader decision: %w", err)
	}
	if err := json.Unmarshal([]byte(response), &d.Response); err != nil {
		return trader.Decision{}, false, fmt.Errorf("store: trader decision %s: %w", id, err)
	}
	d.Status, d.CreatedAt = trader.Outcome(status), store.FromMicros(created)
	return d, true, nil
}

func (t *traderTx) SaveDecision(ctx context.Context, d trader.Decision) error {
	response, err := json.Marshal(d.Response)
	if err != nil {
		return fmt.Errorf("store: trader save decision: %w", err)
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO trader_decisions (tenant, decision_id, concern_id, fingerprint, status, response, attempt_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		t.tenant, d.DecisionID, d.ConcernID, d.Fingerprint, string(d.Status), string(response), d.AttemptID, store.Micros(d.CreatedAt))
	if err != nil {
		return conflict("trader save decision", err)
	}
	return nil
}

func (t *traderTx) AddAttempt(ctx context.Context, a trader.Attempt) error {
	body, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("store: trader attempt: %w", err)
	}
	_, err = t.tx.Exec(ctx, `INSERT INTO trader_attempts (tenant, id, decision_id, concern_id, status, received_at, body) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		t.tenant, a.ID, a.DecisionID, a.ConcernID, string(a.Status), store.Micros(a.ReceivedAt), string(body))
	if err != nil {
		return conflict("trader attempt", err)
	}
	return nil
}

func (t *traderTx) Attempts(ctx context.Context, f trader.AttemptFilter) ([]trader.Attempt, error) {
	q := store.Statement{SQL: `SELECT body FROM trader_attempts WHERE tenant = ?`, Args: []any{t.tenant}}
	q.AndEq("concern_id", f.ConcernID)
	q.AndEq("decision_id", f.DecisionID)
	q.Add(` ORDER BY id DESC`)
	if f.Limit > 0 {
		q.Add(` LIMIT ?`, f.Limit)
	}
	return store.AppendRows(nil, store.QueryRows(ctx, t.tx, "trader attempts", store.ScanJSON[trader.Attempt], q.SQL, q.Args...))
}

func (t *traderTx) Instance(ctx context.Context, id string) (trader.Instance, bool, error) {
	var in trader.Instance
	var desired, actual string
	var updated int64
	err := t.tx.QueryRow(ctx, `SELECT strategy_id, desired, actual, risk_mode, updated_at FROM trader_instances WHERE tenant = ? AND strategy_id = ?`,
		t.tenant, id).Scan(&in.StrategyID, &desired, &actual, &in.RiskMode, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return trader.Instance{}, false, nil
	}
	if err != nil {
		return trader.Instance{}, false, fmt.Errorf("store: trader instance: %w", err)
	}
	in.Desired, in.Actual, in.UpdatedAt = trader.Status(desired), trader.Status(actual), store.FromMicros(updated)
	return in, true, nil
}

func (t *traderTx) PutInstance(ctx context.Context, in trader.Instance) error {
	_, err := t.tx.Exec(ctx, `INSERT INTO trader_instances (tenant, strategy_id, desired, actual, risk_mode, updated_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (tenant, strategy_id) DO UPDATE SET desired = excluded.desired, actual = excluded.actual, risk_mode = excluded.risk_mode, updated_at = excluded.updated_at`,
		t.tenant, in.StrategyID, string(in.Desired), string(in.Actual), in.RiskMode, store.Micros(in.UpdatedAt))
	if err != nil {
		return conflict("trader instance", err)
	}
	return nil
}

func (t *traderTx) AppendAudit(ctx context.Context, e audit.Entry) (audit.Record, error) {
	if string(e.Outcome.Identity.TenantSlot) != t.tenant {
		return audit.Record{}, fmt.Errorf("store: audit entry of tenant %s in a transaction of %s", e.Outcome.Identity.TenantSlot, t.tenant)
	}
	rec, err := store.AppendAudit(ctx, t.tx, e)
	if err != nil {
		return audit.Record{}, conflict("trader audit", err)
	}
	return rec, nil
}
