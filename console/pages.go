package console

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/trail"
)

// listLimit bounds every list page: the console shows what is recent.
const listLimit = gate.ListLimit

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

// modulePage renders a module's page for the session.
func (c *Console) modulePage(p gate.Page) pageFunc {
	return func(w http.ResponseWriter, r *http.Request, s scope) error {
		data, err := p.Load(r.Context(), gate.View{
			Tenant:  s.tenant(),
			Tenants: func() ([]contract.TenantSlot, error) { return c.visibleTenants(s) },
			Sees:    s.sees,
		})
		if err != nil {
			return err
		}
		return c.renderPage(w, r, s, p.Name, p.Title, data)
	}
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
