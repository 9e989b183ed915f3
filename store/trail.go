package store

import (
	"context"

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

// scanAuditRow scans a row of rowColumns.
func scanAuditRow(row Scanner) (audit.Row, error) {
	var r audit.Row
	var tenant, body string
	err := row.Scan(&tenant, &r.ID, &r.Seq, &r.At, &r.Action, &r.Resource, &r.Outcome, &body, &r.PrevHash, &r.Hash)
	r.Tenant, r.Body = contract.TenantSlot(tenant), []byte(body)
	return r, err
}

// ConversationRecords implements trail.Source: the records filed under
// conversation id in tenant, in chain order.
func (l *TrailLog) ConversationRecords(ctx context.Context, tenant contract.TenantSlot, id string) ([]audit.Row, error) {
	return AppendRows(nil, QueryRows(ctx, l.db, "conversation records", scanAuditRow,
		`SELECT `+rowColumns+` FROM audit_records WHERE tenant = ? AND conversation_id = ? ORDER BY seq`, string(tenant), id))
}

// ConversationTenants implements trail.Source: the tenants with records
// of the conversation named id (a conv_ id, or a session key as recorded
// in session_id), the one with the newest record first.
func (l *TrailLog) ConversationTenants(ctx context.Context, id string) ([]trail.Match, error) {
	return AppendRows(nil, QueryRows(ctx, l.db, "conversation tenants", scanMatch,
		`SELECT tenant, conversation_id, MAX(seq) FROM audit_records
		WHERE conversation_id = ? OR session_id = ? GROUP BY tenant, conversation_id ORDER BY MAX(at) DESC, tenant`, id, contract.SessionIDFor(id)))
}

func scanMatch(row Scanner) (trail.Match, error) {
	var m trail.Match
	var tenant string
	var last int64
	err := row.Scan(&tenant, &m.ConversationID, &last)
	m.Tenant = contract.TenantSlot(tenant)
	return m, err
}

// Conversations implements trail.Source: the conversations with the
// newest last record first, of tenant ("" every tenant), at most limit.
func (l *TrailLog) Conversations(ctx context.Context, tenant contract.TenantSlot, limit int) ([]trail.Head, error) {
	q := Statement{SQL: `SELECT tenant, conversation_id, MAX(session_id), MIN(at), MAX(at), COUNT(*) FROM audit_records WHERE conversation_id IS NOT NULL`}
	q.AndEq("tenant", string(tenant))
	q.Add(` GROUP BY tenant, conversation_id ORDER BY MAX(at) DESC, tenant, conversation_id LIMIT ?`, limit)
	out, err := AppendRows(nil, QueryRows(ctx, l.db, "conversations", scanHead, q.SQL, q.Args...))
	if err != nil {
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

func scanHead(row Scanner) (trail.Head, error) {
	var h trail.Head
	var t string
	var session *string
	err := row.Scan(&t, &h.ConversationID, &session, &h.FirstAt, &h.LastAt, &h.Records)
	h.Tenant = contract.TenantSlot(t)
	if session != nil {
		h.SessionID = *session
	}
	return h, err
}

func (l *TrailLog) conversationActions(ctx context.Context, tenant contract.TenantSlot, id string) ([]string, error) {
	return AppendRows(nil, QueryRows(ctx, l.db, "conversation actions", ScanValue[string],
		`SELECT DISTINCT action FROM audit_records WHERE tenant = ? AND conversation_id = ? ORDER BY action`, string(tenant), id))
}

// ScanRange implements trail.Source: tenant's rows with from <= seq (and
// seq <= to when to > 0), in chain order.
func (l *TrailLog) ScanRange(ctx context.Context, tenant contract.TenantSlot, from, to int64, fn func(audit.Row) error) error {
	q := Statement{SQL: `SELECT ` + rowColumns + ` FROM audit_records WHERE tenant = ? AND seq >= ?`, Args: []any{string(tenant), from}}
	if to > 0 {
		q.Add(` AND seq <= ?`, to)
	}
	q.Add(` ORDER BY seq`)
	return EachRow(QueryRows(ctx, l.db, "audit scan", scanAuditRow, q.SQL, q.Args...), fn)
}
