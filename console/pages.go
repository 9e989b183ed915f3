package console

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/relaysql"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/shimsql"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradersql"
	"github.com/caduceus-dev/caduceus/trail"
)

// listLimit bounds every list page: the console shows what is recent.
const listLimit = 100

func (c *Console) conversations(w http.ResponseWriter, r *http.Request, s scope) error {
	list, err := c.cfg.Trails.List(r.Context(), string(s.tenant()), listLimit)
	if err != nil {
		return err
	}
	return c.renderPage(w, r, s, "conversations", "Conversations", list)
}

func (c *Console) conversation(w http.ResponseWriter, r *http.Request, s scope) error {
	t, err := c.cfg.Trails.Get(r.Context(), string(s.tenant()), r.PathValue("id"))
	if errors.Is(err, trail.ErrNotFound) {
		return errNotFound
	}
	if err != nil {
		return err
	}
	if !s.sees(contract.TenantSlot(t.Tenant)) {
		return errNotFound // the reader answered for another tenant: never shown
	}
	return c.renderPage(w, r, s, "conversation", "Conversation "+t.ConversationID, t)
}

// recordView is one audit record as the record page shows it.
type recordView struct {
	Record       audit.Record
	Verified     bool
	Break        string
	Conversation string // a conversation id or session key to link to
	Payload      []field
}

func (c *Console) record(w http.ResponseWriter, r *http.Request, s scope) error {
	rec, found, err := c.cfg.DB.Audit().Record(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if !found || !s.sees(rec.Tenant) {
		return errNotFound
	}
	v := recordView{Record: rec}
	rep, err := audit.Verify(r.Context(), c.cfg.DB.Audit(), nil, rec.Tenant)
	if err != nil {
		return err
	}
	v.Verified = rep.Break == nil || rep.Break.Seq > rec.Seq
	if rep.Break != nil {
		v.Break = rep.Break.Error()
	}
	if p := rec.Provenance; p != nil {
		v.Conversation = cmp.Or(p.ConversationID, p.SessionID)
	}
	if len(rec.Payload) > 0 {
		var payload any
		if json.Unmarshal(rec.Payload, &payload) == nil {
			v.Payload = flatten(payload)
		}
	}
	return c.renderPage(w, r, s, "record", "Audit record "+rec.ID, v)
}

// visibleTenants are the tenants the session sees: its own, or every
// tenant with audit records or keys (one, with a filter).
func (c *Console) visibleTenants(s scope) ([]contract.TenantSlot, error) {
	if t := s.tenant(); t != "" {
		return []contract.TenantSlot{t}, nil
	}
	ts, err := c.cfg.DB.Audit().Tenants(s.ctx)
	if err != nil {
		return nil, err
	}
	keys, err := c.cfg.DB.Keys().ListKeys(s.ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		ts = append(ts, k.Tenant)
	}
	slices.Sort(ts)
	return slices.Compact(ts), nil
}

func (c *Console) receipts(w http.ResponseWriter, r *http.Request, s scope) error {
	ts, err := c.visibleTenants(s)
	if err != nil {
		return err
	}
	var all []shim.Receipt
	for _, t := range ts {
		rs, err := shimsql.New(c.cfg.DB).ListReceipts(r.Context(), t, listLimit, "")
		if err != nil {
			return err
		}
		all = append(all, rs...)
	}
	slices.SortFunc(all, func(a, b shim.Receipt) int { return cmp.Compare(b.ID, a.ID) })
	return c.renderPage(w, r, s, "receipts", "Receipts", all[:min(len(all), listLimit)])
}

// attempt is a trader decision attempt with its tenant.
type attempt struct {
	trader.Attempt
	Tenant contract.TenantSlot
}

func (c *Console) decisions(w http.ResponseWriter, r *http.Request, s scope) error {
	ts, err := c.visibleTenants(s)
	if err != nil {
		return err
	}
	var all []attempt
	for _, t := range ts {
		err := tradersql.New(c.cfg.DB).InTx(r.Context(), t, func(tx trader.Tx) error {
			as, err := tx.Attempts(r.Context(), trader.AttemptFilter{Limit: listLimit})
			for _, a := range as {
				all = append(all, attempt{a, t})
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	slices.SortFunc(all, func(a, b attempt) int { return cmp.Compare(b.ID, a.ID) })
	return c.renderPage(w, r, s, "decisions", "Decisions", all[:min(len(all), listLimit)])
}

// tickView is one executor tick read from its audit record.
type tickView struct {
	Record       audit.Record
	Tick         executor.TickRecord
	Replay       bool
	Conversation string
}

func (c *Console) ticks(w http.ResponseWriter, r *http.Request, s scope) error {
	recs, err := c.cfg.DB.Audit().Tail(r.Context(), store.AuditFilter{Tenant: s.tenant(), Action: executor.AuditAction, Limit: listLimit})
	if err != nil {
		return err
	}
	var out []tickView
	for _, rec := range recs {
		if !s.sees(rec.Tenant) {
			continue
		}
		v := tickView{Record: rec}
		if err := json.Unmarshal(rec.Payload, &v.Tick); err != nil {
			c.log.Warn("console: tick record payload unreadable", "record", rec.ID, "err", err)
		}
		var replay executor.ReplayRecord
		if json.Unmarshal(rec.Payload, &replay) == nil && replay.Replay {
			v.Replay = true
			v.Tick.TickID, v.Tick.Strategy = replay.TickID, replay.Strategy
		}
		if p := rec.Provenance; p != nil {
			v.Conversation = cmp.Or(p.ConversationID, p.SessionID)
		}
		out = append(out, v)
	}
	return c.renderPage(w, r, s, "ticks", "Ticks", out)
}

// relayView is the relay page: open gateway connections and the buffer.
type relayView struct {
	Served   bool
	Gateways []connector.Connection
	Buffered []bufferedView
}

type bufferedView struct {
	relaysql.BufferedEvent
	Summary string
}

func (c *Console) relay(w http.ResponseWriter, r *http.Request, s scope) error {
	v := relayView{Served: c.cfg.Relay != nil}
	if c.cfg.Relay != nil {
		v.Gateways = c.cfg.Relay.OpenConnections(s.tenant())
	}
	bs, err := relaysql.New(c.cfg.DB).Buffered(r.Context(), s.tenant(), listLimit)
	if err != nil {
		return err
	}
	for _, b := range bs {
		v.Buffered = append(v.Buffered, bufferedView{b, eventSummary(b.Event)})
	}
	return c.renderPage(w, r, s, "relay", "Relay", v)
}

// eventSummary is one line of a buffered MessageEvent: its type and the
// start of its text.
func eventSummary(event []byte) string {
	var ev struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(event, &ev) != nil {
		return fmt.Sprintf("%d bytes", len(event))
	}
	return clip(ev.Type+" "+ev.Text, 120)
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request, s scope) error {
	all, err := c.cfg.DB.Keys().ListKeys(r.Context())
	if err != nil {
		return err
	}
	var out []keyView
	for _, k := range all {
		if s.sees(k.Tenant) {
			kv := keyView{ID: k.ID, Tenant: k.Tenant, Harness: k.Harness, Context: string(k.RunContext), Account: k.Account, Created: k.CreatedAt, Revoked: k.RevokedAt}
			for _, sc := range k.Scopes {
				kv.Scopes = append(kv.Scopes, string(sc))
			}
			out = append(out, kv)
		}
	}
	return c.renderPage(w, r, s, "keys", "Keys", out)
}

// keyView is what the keys page shows of a key: never its secret or hash.
type keyView struct {
	ID      string
	Tenant  contract.TenantSlot
	Scopes  []string
	Harness string
	Context string
	Account string // the broker account the key is bound to, if any
	Created time.Time
	Revoked *time.Time
}

// chainView is one tenant's audit chain on the audit page.
type chainView struct {
	Tenant     contract.TenantSlot
	Records    int64
	HeadSeq    int64
	HeadHash   string
	Break      *audit.Break
	Checkpoint *audit.End // the latest checkpoint's end of this chain, if any
}

type auditView struct {
	Chains         []chainView
	CheckpointFile string
	Checkpoint     *audit.Checkpoint
	CheckpointErr  string
}

func (c *Console) audit(w http.ResponseWriter, r *http.Request, s scope) error {
	v := auditView{CheckpointFile: c.cfg.CheckpointFile}
	if v.CheckpointFile != "" {
		b, err := os.ReadFile(v.CheckpointFile)
		if err == nil {
			var cp audit.Checkpoint
			cp, err = audit.ParseCheckpoint(b, c.cfg.CheckpointKey)
			if err == nil {
				v.Checkpoint = &cp
			}
		}
		if err != nil {
			v.CheckpointErr = err.Error()
		}
	}
	ts, err := c.visibleTenants(s)
	if err != nil {
		return err
	}
	for _, t := range ts {
		opt := audit.Options{Tenants: []contract.TenantSlot{t}, Checkpoint: v.Checkpoint}
		rep, err := audit.VerifyWith(r.Context(), c.cfg.DB.Audit(), opt)
		if err != nil {
			return err
		}
		seq, hash, err := c.cfg.DB.Audit().Head(r.Context(), t)
		if err != nil {
			return err
		}
		cv := chainView{Tenant: t, Records: rep.Records, HeadSeq: seq, HeadHash: hash, Break: rep.Break}
		if v.Checkpoint != nil {
			for _, h := range v.Checkpoint.Heads {
				if h.Tenant == t {
					cv.Checkpoint = &h
				}
			}
		}
		v.Chains = append(v.Chains, cv)
	}
	return c.renderPage(w, r, s, "audit", "Audit chains", v)
}
