package main

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trail"
)

// auditTrails reads conversations straight from the audit records that
// name one in their provenance (conversation id or session key): one event
// per record, summarised from its outcome. It is the console's reader
// until the trail package's own assembler is wired.
type auditTrails struct{ db *store.DB }

// trailScan bounds how many recent records a read looks through.
const trailScan = 5000

func (t auditTrails) records(ctx context.Context, tenant string) ([]audit.Record, error) {
	return t.db.Audit().Tail(ctx, store.AuditFilter{Tenant: contract.TenantSlot(tenant), Limit: trailScan})
}

func convOf(r audit.Record) (id, key string) {
	p := r.Provenance
	if p == nil {
		return "", ""
	}
	switch {
	case p.ConversationID != "":
		return contract.ConversationFor(r.Tenant, p.ConversationID), p.SessionID
	case p.SessionID != "":
		return contract.ConversationFor(r.Tenant, p.SessionID), p.SessionID
	}
	return "", ""
}

func gateOf(action string) trail.Gate {
	for _, g := range []trail.Gate{trail.GateRelay, trail.GateShim, trail.GateTrader, trail.GateExecutor} {
		if len(action) > len(g) && action[:len(g)] == string(g) && action[len(g)] == '.' {
			return g
		}
	}
	return trail.Gate(action)
}

func (t auditTrails) List(ctx context.Context, tenant string, limit int) ([]trail.Summary, error) {
	recs, err := t.records(ctx, tenant)
	if err != nil {
		return nil, err
	}
	byID := map[string]*trail.Summary{}
	var order []*trail.Summary
	for _, r := range recs {
		id, key := convOf(r)
		if id == "" {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, r.Outcome.At)
		k := string(r.Tenant) + "\x00" + id
		s := byID[k]
		if s == nil {
			s = &trail.Summary{ConversationID: id, Tenant: string(r.Tenant), FirstAt: at, LastAt: at}
			byID[k] = s
			order = append(order, s)
		}
		s.SessionKey = cmp.Or(s.SessionKey, key)
		s.Events++
		if at.Before(s.FirstAt) {
			s.FirstAt = at
		}
		if at.After(s.LastAt) {
			s.LastAt = at
		}
		if g := gateOf(r.Outcome.Action); !slices.Contains(s.Gates, g) {
			s.Gates = append(s.Gates, g)
		}
	}
	out := make([]trail.Summary, 0, len(order))
	for _, s := range order {
		slices.Sort(s.Gates)
		out = append(out, *s)
	}
	return out[:min(len(out), max(limit, 1))], nil
}

func (t auditTrails) Get(ctx context.Context, tenant, id string) (trail.Trail, error) {
	recs, err := t.records(ctx, tenant)
	if err != nil {
		return trail.Trail{}, err
	}
	var tr trail.Trail
	for _, r := range slices.Backward(recs) {
		rid, key := convOf(r)
		if rid == "" || (rid != id && rid != contract.ConversationFor(r.Tenant, id)) {
			continue
		}
		if tr.Tenant != "" && tr.Tenant != string(r.Tenant) {
			continue // the same name in another tenant (all-tenants reads): the first one found
		}
		tr.ConversationID, tr.Tenant = rid, string(r.Tenant)
		tr.SessionKey = cmp.Or(tr.SessionKey, key)
		at, _ := time.Parse(time.RFC3339Nano, r.Outcome.At)
		ev := trail.Event{At: at, Gate: gateOf(r.Outcome.Action), Kind: r.Outcome.Action, AuditID: r.ID, AuditSeq: r.Seq,
			Outcome: string(r.Outcome.Outcome), Summary: r.Outcome.Resource}
		if r.Outcome.Reason != "" {
			ev.Summary += " — " + r.Outcome.Reason
		}
		if r.Provenance != nil {
			ev.RunID = r.Provenance.RunID
		}
		tr.Events = append(tr.Events, ev)
	}
	if len(tr.Events) == 0 {
		return trail.Trail{}, trail.ErrNotFound
	}
	rep, err := audit.Verify(ctx, t.db.Audit(), nil, contract.TenantSlot(tr.Tenant))
	if err != nil {
		return trail.Trail{}, err
	}
	tr.Verified = true
	for i := range tr.Events {
		e := &tr.Events[i]
		e.Verified = rep.Break == nil || rep.Break.Seq > e.AuditSeq
		tr.Verified = tr.Verified && e.Verified
	}
	return tr, nil
}
