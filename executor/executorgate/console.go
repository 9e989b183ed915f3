package executorgate

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"log/slog"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/store"
)

//go:embed console_ticks.html
var ticksTemplate string

// AuditTail reads the newest audit records (the store's audit log has
// it).
type AuditTail interface {
	Tail(ctx context.Context, f store.AuditFilter) ([]audit.Record, error)
}

// tickView is one executor tick read from its audit record.
type tickView struct {
	Record       audit.Record
	Tick         executor.TickRecord
	Replay       bool
	Conversation string
}

// TicksPage is the console's ticks page: the most recent executor ticks
// in the audit log, read from their records.
func TicksPage(log AuditTail) gate.Page {
	return gate.Page{Name: "ticks", Title: "Ticks", Template: ticksTemplate, Rows: []string{"tick_id"},
		Load: func(ctx context.Context, v gate.View) (any, error) {
			recs, err := log.Tail(ctx, store.AuditFilter{Tenant: v.Tenant, Action: executor.AuditAction, Limit: gate.ListLimit})
			if err != nil {
				return nil, err
			}
			var out []tickView
			for _, rec := range recs {
				if !v.Sees(rec.Tenant) {
					continue
				}
				tv := tickView{Record: rec}
				if err := json.Unmarshal(rec.Payload, &tv.Tick); err != nil {
					slog.Warn("console: tick record payload unreadable", "record", rec.ID, "err", err)
				}
				var replay executor.ReplayRecord
				if json.Unmarshal(rec.Payload, &replay) == nil && replay.Replay {
					tv.Replay = true
					tv.Tick.TickID, tv.Tick.Strategy = replay.TickID, replay.Strategy
				}
				if p := rec.Provenance; p != nil {
					tv.Conversation = cmp.Or(p.ConversationID, p.SessionID)
				}
				out = append(out, tv)
			}
			return out, nil
		}}
}

// Pages implements gate.Paged: the ticks page, over the executor's audit
// log when it can be read back.
func (g *Gate) Pages() []gate.Page {
	if g.ex == nil {
		return nil
	}
	if t, ok := g.ex.Audit.(AuditTail); ok {
		return []gate.Page{TicksPage(t)}
	}
	return nil
}
