package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
)

// ExecutorState is the executor's state in SQL; it implements
// executor.Store. Every statement filters on the tenant.
type ExecutorState struct{ db *DB }

// ExecutorState returns the executor's tables.
func (db *DB) ExecutorState() *ExecutorState { return &ExecutorState{db: db} }

var _ executor.Store = (*ExecutorState)(nil)

// CaptureDayStart implements executor.Store: INSERT ... ON CONFLICT DO
// NOTHING on the writer, then read back the row that won. No transaction is
// needed: the unique key decides the winner and the row never changes.
func (s *ExecutorState) CaptureDayStart(ctx context.Context, t contract.TenantSlot, account, day string, value float64) (float64, error) {
	if _, err := s.db.Exec(ctx, `INSERT INTO executor_day_start (tenant, account, ny_day, start_value, captured_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tenant, account, ny_day) DO NOTHING`, string(t), account, day, value, Micros(s.db.Now())); err != nil {
		return 0, fmt.Errorf("store: executor day start: %w", err)
	}
	var got float64
	if err := s.db.QueryRow(ctx, `SELECT start_value FROM executor_day_start WHERE tenant = ? AND account = ? AND ny_day = ?`, string(t), account, day).Scan(&got); err != nil {
		return 0, fmt.Errorf("store: executor day start: %w", err)
	}
	return got, nil
}

// Anomalies implements executor.Store.
func (s *ExecutorState) Anomalies(ctx context.Context, t contract.TenantSlot, account, day string) (int, error) {
	var n int64
	err := s.db.QueryRow(ctx, `SELECT n FROM executor_anomalies WHERE tenant = ? AND account = ? AND ny_day = ?`, string(t), account, day).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: executor anomalies: %w", err)
	}
	return int(n), nil
}

// AddAnomaly implements executor.Store: one atomic UPSERT increment on the
// writer, then a read of the count (which includes this increment, and any
// that landed concurrently).
func (s *ExecutorState) AddAnomaly(ctx context.Context, t contract.TenantSlot, account, day string) (int, error) {
	if _, err := s.db.Exec(ctx, `INSERT INTO executor_anomalies (tenant, account, ny_day, n, updated_at) VALUES (?, ?, ?, 1, ?)
		ON CONFLICT (tenant, account, ny_day) DO UPDATE SET n = executor_anomalies.n + 1, updated_at = excluded.updated_at`,
		string(t), account, day, Micros(s.db.Now())); err != nil {
		return 0, fmt.Errorf("store: executor add anomaly: %w", err)
	}
	return s.Anomalies(ctx, t, account, day)
}

// BrokerState implements executor.Store.
func (s *ExecutorState) BrokerState(ctx context.Context, t contract.TenantSlot, name string) ([]byte, error) {
	var state string
	err := s.db.QueryRow(ctx, `SELECT state FROM executor_broker_state WHERE tenant = ? AND name = ?`, string(t), name).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: executor broker state: %w", err)
	}
	return []byte(state), nil
}

// SaveBrokerState implements executor.Store. The state is kept as text and
// must be UTF-8 (the paper broker saves JSON).
func (s *ExecutorState) SaveBrokerState(ctx context.Context, t contract.TenantSlot, name string, state []byte) error {
	if !utf8.Valid(state) {
		return fmt.Errorf("store: executor broker state %s is not UTF-8", name)
	}
	_, err := s.db.Exec(ctx, `INSERT INTO executor_broker_state (tenant, name, state, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (tenant, name) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at`,
		string(t), name, string(state), Micros(s.db.Now()))
	if err != nil {
		return fmt.Errorf("store: executor save broker state: %w", err)
	}
	return nil
}
