package trail_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/trail"
)

// chain is a trail.Source over one tenant's rows held in memory, so the
// tests can remove, alter and rewind what a store would hold.
type chain struct {
	rows    []audit.Row
	conv    map[int64]string // seq -> conversation id
	headSeq int64
	head    string
	noHead  bool
}

const tenant contract.TenantSlot = "slot-1"

func newChain(t *testing.T, convs ...string) *chain {
	t.Helper()
	c := &chain{conv: map[int64]string{}, head: audit.Genesis}
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for i, name := range convs {
		caller := contract.Caller{Identity: contract.Identity{TenantSlot: tenant, Subject: "usr_0123456789abcdef", Surface: contract.SurfaceAPI, Trust: contract.TrustRouter},
			Trace: contract.Trace{Conversation: name}}
		ts := contract.Timestamp(at.Add(time.Duration(i) * time.Second))
		e := audit.Entry{Outcome: contract.AuditOutcome{At: ts, Identity: caller.Identity, Action: "trader.apply", Resource: "decision/d", Outcome: contract.OutcomeAllow},
			Provenance: caller.Provenance(contract.ActorUser, ts)}
		rec, err := audit.Seal(e, fmt.Sprintf("evt_%04d", i+1), int64(i+1), c.head)
		if err != nil {
			t.Fatal(err)
		}
		c.rows = append(c.rows, audit.Row{ID: rec.ID, Tenant: tenant, Seq: rec.Seq, At: ts, Action: "trader.apply", Resource: "decision/d",
			Outcome: "allow", Body: rec.Body, PrevHash: rec.PrevHash, Hash: rec.Hash})
		if name != "" {
			c.conv[rec.Seq] = contract.ConversationFor(tenant, name)
		}
		c.headSeq, c.head = rec.Seq, rec.Hash
	}
	return c
}

func (c *chain) ConversationRecords(_ context.Context, t contract.TenantSlot, id string) ([]audit.Row, error) {
	var out []audit.Row
	for _, r := range c.rows {
		if t == tenant && c.conv[r.Seq] == id {
			out = append(out, r)
		}
	}
	return out, nil
}

func (c *chain) ConversationTenants(_ context.Context, name string) ([]trail.Match, error) {
	id := contract.ConversationFor(tenant, name)
	for _, v := range c.conv {
		if v == id {
			return []trail.Match{{Tenant: tenant, ConversationID: id}}, nil
		}
	}
	return nil, nil
}

func (c *chain) Conversations(context.Context, contract.TenantSlot, int) ([]trail.Head, error) {
	return nil, nil
}

func (c *chain) ScanRange(_ context.Context, t contract.TenantSlot, from, to int64, fn func(audit.Row) error) error {
	for _, r := range c.rows {
		if r.Seq >= from && (to == 0 || r.Seq <= to) {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *chain) FindHead(context.Context, contract.TenantSlot) (int64, string, bool, error) {
	if c.noHead {
		return 0, audit.Genesis, false, nil
	}
	return c.headSeq, c.head, true, nil
}

func (c *chain) remove(seq int64) {
	c.rows = slices.DeleteFunc(c.rows, func(r audit.Row) bool { return r.Seq == seq })
}

func (c *chain) alter(seq int64) {
	for i := range c.rows {
		if c.rows[i].Seq == seq {
			c.rows[i].Body = []byte(strings.Replace(string(c.rows[i].Body), "decision/d", "decision/x", 2))
		}
	}
}

func (c *chain) checkpoint(t *testing.T) *audit.Checkpoint {
	t.Helper()
	_, priv, _ := ed25519.GenerateKey(nil)
	cp, err := audit.Sign(priv, []audit.End{{Tenant: tenant, Seq: c.headSeq, Hash: c.head}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return &cp
}

// verified returns the audit seqs of the trail's events and which verify.
func verified(t *testing.T, tr trail.Trail) string {
	t.Helper()
	var b strings.Builder
	for _, e := range tr.Events {
		mark := "-"
		if e.Verified {
			mark = "+"
		}
		fmt.Fprintf(&b, "%d%s ", e.AuditSeq, mark)
	}
	return strings.TrimSpace(b.String())
}

// TestVerification marks events by where the tenant's chain breaks, from
// genesis and from a checkpoint: altered, removed, truncated and rewound
// chains.
func TestVerification(t *testing.T) {
	const k = "agent:main:telegram:dm:42"
	// Records 1..8; the conversation has 2, 4, 6 and 8.
	layout := []string{"", k, "", k, "", k, "", k}
	for _, tc := range []struct {
		name       string
		damage     func(c *chain)
		checkpoint bool // a checkpoint of the chain before the damage and two more records
		want       string
		whole      bool
	}{
		{"whole from genesis", func(*chain) {}, false, "2+ 4+ 6+ 8+ 10+", true},
		{"whole from a checkpoint", func(*chain) {}, true, "2+ 4+ 6+ 8+ 10+", true},
		{"altered from genesis", func(c *chain) { c.alter(4) }, false, "2+ 4- 6- 8- 10-", false},
		{"altered from a checkpoint", func(c *chain) { c.alter(4) }, true, "2- 4- 6+ 8+ 10+", false},
		{"removed from genesis", func(c *chain) { c.remove(5) }, false, "2+ 4+ 6- 8- 10-", false},
		{"removed from a checkpoint", func(c *chain) { c.remove(5) }, true, "2- 4- 6+ 8+ 10+", false},
		{"altered after the checkpoint", func(c *chain) { c.alter(9) }, true, "2+ 4+ 6+ 8+ 10-", false},
		{"head rewound", func(c *chain) { c.headSeq, c.head = 8, c.rows[7].Hash }, false, "2+ 4+ 6+ 8+ 10-", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newChain(t, append(layout, "", k)...)
			var opt trail.Options
			if tc.checkpoint {
				// The checkpoint signs seq 8; 9 and 10 come after it.
				full := c.rows
				c.rows, c.headSeq, c.head = full[:8], 8, full[7].Hash
				cp := c.checkpoint(t)
				c.rows, c.headSeq, c.head = full, 10, full[9].Hash
				opt.Checkpoint = func(context.Context) (*audit.Checkpoint, error) { return cp, nil }
			}
			tc.damage(c)
			tr, err := trail.New(c, opt).Get(t.Context(), string(tenant), k)
			if err != nil {
				t.Fatal(err)
			}
			if got := verified(t, tr); got != tc.want || tr.Verified != tc.whole || (tr.Break == "") != tc.whole {
				t.Errorf("events %s (verified %v, break %q), want %s", got, tr.Verified, tr.Break, tc.want)
			}
			if tc.checkpoint != (tr.Checkpoint != "") {
				t.Errorf("checkpoint %q", tr.Checkpoint)
			}
		})
	}

	// A checkpoint whose records were cut off: nothing up to it verifies.
	c := newChain(t, layout...)
	cp := c.checkpoint(t)
	c.remove(8)
	c.remove(7)
	c.headSeq, c.head = 6, c.rows[5].Hash
	tr, err := trail.New(c, trail.Options{Checkpoint: func(context.Context) (*audit.Checkpoint, error) { return cp, nil }}).Get(t.Context(), string(tenant), k)
	if err != nil {
		t.Fatal(err)
	}
	if got := verified(t, tr); got != "2- 4- 6-" || !strings.Contains(tr.Break, "missing") {
		t.Errorf("truncated below the checkpoint: %s (%q)", got, tr.Break)
	}
}
