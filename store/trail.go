package store

import (
	"context"
	"fmt"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trail"
)

// TrailLog is the audit trail as trail.New reads it: one conversation's
// records (the conversation_id index of audit_records), the recent
// conversations, and chain ranges to verify them.
type TrailLog struct{ AuditLog }

// Trail returns the store's trail source.
func (db *DB) Trail() *TrailLog { return &TrailLog{AuditLog{db: db}} }

var _ trail.Source = (*TrailLog)(nil)

const rowColumns = `tenant, id, seq, at, action, resource, outcome, body, prev_hash, hash`

func scanRows(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
}, fn func(audit.Row) error) error {
	for rows.Next() {
		var r audit.Row
		var tenant, body string
		if err := rows.Scan(&tenant, &r.ID, &r.Seq, &r.At, &r.Action, &r.Resource, &r.Outcome, &body, &r.PrevHash, &r.Hash); err != nil {
			return err
		}
		r.Tenant, r.Body = contract.TenantSlot(tenant), []byte(body)
		if err := fn(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

// ConversationRecords implements trail.Source: the records filed under
// conversation id in tenant, in chain order.
func (l *TrailLog) ConversationRecords(ctx context.Context, tenant contract.TenantSlot, id string) ([]audit.Row, error) {
	rows, err := l.db.Query(ctx, `SELECT `+rowColumns+` FROM audit_records WHERE tenant = ? AND conversation_id = ? ORDER BY seq`, string(tenant), id)
	if err != nil {
		return nil, fmt.Errorf("store: conversation records: %w", err)
	}
	defer rows.Close()
	var out []audit.Row
	if err := scanRows(rows, func(r audit.Row) error { out = append(out, r); return nil }); err != nil {
		return nil, fmt.Errorf("store: conversation records: %w", err)
	}
	return out, nil
}

// ConversationTenants implements trail.Source: the tenants with records
// of the conversation named id (a conv_ id, or a session key as recorded
// in session_id), the one with the newest record first.
func (l *TrailLog) ConversationTenants(ctx context.Context, id string) ([]trail.Match, error) {
	rows, err := l.db.Query(ctx, `SELECT tenant, conversation_id, MAX(seq) FROM audit_records
		WHERE conversation_id = ? OR session_id = ? GROUP BY tenant, conversation_id ORDER BY MAX(at) DESC, tenant`, id, contract.SessionIDFor(id))
	if err != nil {
		return nil, fmt.Errorf("store: conversation tenants: %w", err)
	}
	defer rows.Close()
	var out []trail.Match
	for rows.Next() {
		var m trail.Match
		var tenant string
		var last int64
		if err := rows.Scan(&tenant, &m.ConversationID, &last); err != nil {
			return nil, fmt.Errorf("store: conversation tenants: %w", err)
		}
		m.Tenant = contract.TenantSlot(tenant)
		out = append(out, m)
	}
	return out, rows.Err()
}

// Conversations implements trail.Source: the conversations with the
// newest last record first, of tenant ("" every tenant), at most limit.
func (l *TrailLog) Conversations(ctx context.Context, tenant contract.TenantSlot, limit int) ([]trail.Head, error) {
	q := `SELECT tenant, conversation_id, MAX(session_id), MIN(at), MAX(at), COUNT(*) FROM audit_records WHERE conversation_id IS NOT NULL`
	var args []any
	if tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, string(tenant))
	}
	q += ` GROUP BY tenant, conversation_id ORDER BY MAX(at) DESC, tenant, conversation_id LIMIT ?`
	args = append(args, limit)
	rows, err := l.db.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: conversations: %w", err)
	}
	defer rows.Close()
	var out []trail.Head
	for rows.Next() {
		var h trail.Head
		var t string
		var session *string
		if err := rows.Scan(&t, &h.ConversationID, &session, &h.FirstAt, &h.LastAt, &h.Records); err != nil {
			return nil, fmt.Errorf("store: conversations: %w", err)
		}
		h.Tenant = contract.TenantSlot(t)
		if session != nil {
			h.SessionID = *session
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		acts, err := l.conversationActions(ctx, out[i].Tenant, out[i].ConversationID)
		if err != nil {
			return nil, err
		}
		out[i].Actions = acts
	}
	return out, nil
}

func (l *TrailLog) conversationActions(ctx context.Context, tenant contract.TenantSlot, id string) ([]string, error) {
	rows, err := l.db.Query(ctx, `SELECT DISTINCT action FROM audit_records WHERE tenant = ? AND conversation_id = ? ORDER BY action`, string(tenant), id)
	if err != nil {
		return nil, fmt.Errorf("store: conversation actions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// ScanRange implements trail.Source: tenant's rows with from <= seq (and
// seq <= to when to > 0), in chain order.
func (l *TrailLog) ScanRange(ctx context.Context, tenant contract.TenantSlot, from, to int64, fn func(audit.Row) error) error {
	q := `SELECT ` + rowColumns + ` FROM audit_records WHERE tenant = ? AND seq >= ?`
	args := []any{string(tenant), from}
	if to > 0 {
		q += ` AND seq <= ?`
		args = append(args, to)
	}
	rows, err := l.db.Query(ctx, q+` ORDER BY seq`, args...)
	if err != nil {
		return fmt.Errorf("store: audit scan: %w", err)
	}
	defer rows.Close()
	return scanRows(rows, fn)
}
