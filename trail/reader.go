package trail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// Source is what a Reader reads: the audit records filed under a
// conversation (the store indexes provenance.conversation_id), the recent
// conversations, and ranges of a tenant's chain to verify them.
// store.DB.Trail() implements it.
type Source interface {
	// ConversationRecords returns tenant's records of conversation id
	// (a conv_ id), in chain order.
	ConversationRecords(ctx context.Context, tenant contract.TenantSlot, id string) ([]audit.Row, error)
	// ConversationTenants returns, across every tenant, the conversations
	// named name (a conv_ id, or a session key as provenance.session_id
	// records it), the one with the newest record first.
	ConversationTenants(ctx context.Context, name string) ([]Match, error)
	// Conversations returns the conversations of tenant ("" every tenant)
	// with the newest last record first, at most limit.
	Conversations(ctx context.Context, tenant contract.TenantSlot, limit int) ([]Head, error)
	// ScanRange calls fn with tenant's rows from seq from through to (to
	// the end when to is 0), in chain order.
	ScanRange(ctx context.Context, tenant contract.TenantSlot, from, to int64, fn func(audit.Row) error) error
	// FindHead returns where the store believes tenant's chain ends.
	FindHead(ctx context.Context, tenant contract.TenantSlot) (seq int64, hash string, found bool, err error)
}

// Match is one tenant's conversation of a name (Source.ConversationTenants).
type Match struct {
	Tenant         contract.TenantSlot
	ConversationID string
}

// Head is one conversation as Source.Conversations lists it.
type Head struct {
	Tenant         contract.TenantSlot
	ConversationID string
	SessionID      string // provenance session_id of its records, if any
	FirstAt        string // audit timestamps of its first and last records
	LastAt         string
	Records        int
	Actions        []string // the distinct audit actions of its records
}

// Options tune New.
type Options struct {
	// Checkpoint, when set, returns the latest signed checkpoint (nil when
	// there is none). A tenant it names is verified from the checkpoint's
	// record instead of from genesis: backwards to the conversation's first
	// record, forwards to the chain's head.
	Checkpoint func(ctx context.Context) (*audit.Checkpoint, error)
}

// New returns the Reader of src: the HTTP API, `caduceus trace` and the
// console read trails through it.
func New(src Source, opt Options) Reader {
	return &reader{src: src, opt: opt}
}

type reader struct {
	src Source
	opt Options
}

// MaxList bounds List's limit.
const MaxList = 500

func (r *reader) List(ctx context.Context, tenant string, limit int) ([]Summary, error) {
	if limit <= 0 || limit > MaxList {
		limit = min(max(limit, 50), MaxList)
	}
	heads, err := r.src.Conversations(ctx, contract.TenantSlot(tenant), limit)
	if err != nil {
		return nil, err
	}
	out := make([]Summary, 0, len(heads))
	for _, h := range heads {
		s := Summary{ConversationID: h.ConversationID, Tenant: string(h.Tenant), Events: h.Records, Gates: []Gate{}}
		if h.SessionID != "" && !strings.HasPrefix(h.SessionID, "sha256:") {
			s.SessionKey = h.SessionID
		}
		s.FirstAt, _ = time.Parse(time.RFC3339Nano, h.FirstAt)
		s.LastAt, _ = time.Parse(time.RFC3339Nano, h.LastAt)
		for _, a := range h.Actions {
			if g := gateOf(a); !slices.Contains(s.Gates, g) {
				s.Gates = append(s.Gates, g)
			}
		}
		slices.SortFunc(s.Gates, func(a, b Gate) int { return gateOrder(a) - gateOrder(b) })
		out = append(out, s)
	}
	return out, nil
}

func (r *reader) Get(ctx context.Context, tenant, id string) (Trail, error) {
	if err := contract.CheckConversation("conversation id", id); err != nil {
		return Trail{}, err
	}
	t := contract.TenantSlot(tenant)
	conv := ""
	if t == "" {
		ms, err := r.src.ConversationTenants(ctx, id)
		if err != nil {
			return Trail{}, err
		}
		if len(ms) == 0 {
			return Trail{}, ErrNotFound
		}
		t, conv = ms[0].Tenant, ms[0].ConversationID
	} else {
		conv = contract.ConversationFor(t, id)
	}
	rows, err := r.src.ConversationRecords(ctx, t, conv)
	if err != nil {
		return Trail{}, err
	}
	if len(rows) == 0 {
		return Trail{}, ErrNotFound
	}
	tr := Trail{ConversationID: conv, Tenant: string(t), Events: make([]Event, 0, len(rows))}
	if !contract.IsConversationID(id) {
		tr.SessionKey = id
	}
	var recs []audit.Record
	for _, row := range rows {
		rec, err := audit.Decode(row.Body)
		if err != nil || rec.ID != row.ID || rec.Seq != row.Seq || rec.Provenance == nil || rec.Provenance.ConversationID != conv {
			// The index disagrees with the hashed body: not this
			// conversation's record as far as the chain can tell.
			continue
		}
		if tr.SessionKey == "" && rec.Provenance.SessionID != "" && !strings.HasPrefix(rec.Provenance.SessionID, "sha256:") {
			tr.SessionKey = rec.Provenance.SessionID
		}
		recs = append(recs, rec)
	}
	if len(recs) == 0 {
		return Trail{}, ErrNotFound
	}
	v, err := r.verify(ctx, t, recs[0].Seq)
	if err != nil {
		return Trail{}, err
	}
	tr.Verified = true
	tr.Break, tr.Checkpoint = v.reason, v.checkpoint
	for _, rec := range recs {
		ev := eventOf(rec)
		ev.Verified = v.ok(rec.Seq)
		tr.Verified = tr.Verified && ev.Verified
		tr.Events = append(tr.Events, ev)
	}
	return tr, nil
}

// verdict is the result of verifying a tenant's chain: records with seq in
// [from, to] verify (to < 0: through the end).
type verdict struct {
	from, to   int64
	reason     string // why the rest does not, if anything is wrong
	checkpoint string // the checkpoint verification started from, if any
}

func (v verdict) ok(seq int64) bool { return seq >= v.from && (v.to < 0 || seq <= v.to) }

// verify checks tenant's chain once: from genesis, or, when the latest
// checkpoint names the tenant, from the checkpoint's record backwards to
// first (the conversation's first record) and forwards to the head.
func (r *reader) verify(ctx context.Context, tenant contract.TenantSlot, first int64) (verdict, error) {
	headSeq, headHash, headFound, err := r.src.FindHead(ctx, tenant)
	if err != nil {
		return verdict{}, err
	}
	v := verdict{from: 1, to: -1}
	anchor, err := r.anchor(ctx, tenant, &v)
	if err != nil {
		return verdict{}, err
	}
	prev, next := audit.Genesis, int64(1)
	// Where the pass up to the anchor found the chain to end, when it ends
	// before the anchor (-1: it reaches the anchor).
	lastSeen, lastSeenHash := int64(-1), ""
	if anchor != nil {
		if first <= anchor.Seq {
			if lastSeen, lastSeenHash, err = r.verifyToAnchor(ctx, tenant, first, anchor, &v); err != nil {
				return verdict{}, err
			}
		} else {
			v.from = anchor.Seq + 1
		}
		prev, next = anchor.Hash, anchor.Seq+1
	}
	last, lastHash, err := r.verifyForward(ctx, tenant, prev, next, &v)
	if err != nil {
		return verdict{}, err
	}
	if lastSeen >= 0 && last == next-1 {
		// Nothing followed the anchor: the chain ends where the pass up to
		// the anchor found it to end.
		last, lastHash = lastSeen, lastSeenHash
	}
	if v.to < 0 {
		v.checkHead(headFound, headSeq, headHash, last, lastHash)
	}
	return v, nil
}

// anchor is the latest checkpoint's head of tenant, if any (noting the
// checkpoint in v).
func (r *reader) anchor(ctx context.Context, tenant contract.TenantSlot, v *verdict) (*audit.End, error) {
	if r.opt.Checkpoint == nil {
		return nil, nil
	}
	cp, err := r.opt.Checkpoint(ctx)
	if err != nil {
		return nil, fmt.Errorf("trail: checkpoint: %w", err)
	}
	var anchor *audit.End
	if cp != nil {
		for _, h := range cp.Heads {
			if h.Tenant == tenant {
				anchor = &h
				v.checkpoint = cp.Name()
			}
		}
	}
	return anchor, nil
}

// verifyToAnchor verifies first up to the anchor: a record verifies when
// every link from it to the checkpoint's record holds and that record has
// the hash the checkpoint signed. One pass in chain order keeps the highest
// seq where that fails: it and every earlier record are unverified. It
// returns where the chain ends when it ends before the anchor (seq -1: it
// reaches the anchor).
func (r *reader) verifyToAnchor(ctx context.Context, tenant contract.TenantSlot, first int64, anchor *audit.End, v *verdict) (int64, string, error) {
	var bad int64
	fail := func(seq int64, reason string) { bad, v.reason = seq, reason }
	prevHash, want := "", first
	if err := r.src.ScanRange(ctx, tenant, first, anchor.Seq, func(row audit.Row) error {
		if row.Seq != want {
			fail(row.Seq-1, fmt.Sprintf("records from seq %d to %d are missing", want, row.Seq-1))
		} else if want > first && row.PrevHash != prevHash {
			fail(row.Seq-1, fmt.Sprintf("record %s at seq %d: its prev_hash does not match the previous record's hash", row.ID, row.Seq))
		}
		if reason := checkRow(row, row.PrevHash, row.Seq); reason != "" {
			fail(row.Seq, fmt.Sprintf("record %s at seq %d: %s", row.ID, row.Seq, reason))
		}
		prevHash, want = row.Hash, row.Seq+1
		return nil
	}); err != nil {
		return 0, "", err
	}
	lastSeen, lastSeenHash := int64(-1), ""
	switch {
	case want <= anchor.Seq:
		fail(anchor.Seq, fmt.Sprintf("records from seq %d to the checkpoint's seq %d are missing", want, anchor.Seq))
		lastSeen, lastSeenHash = want-1, prevHash
	case prevHash != anchor.Hash:
		fail(anchor.Seq, fmt.Sprintf("the record at seq %d does not have the hash the checkpoint signed: the history was rewritten", anchor.Seq))
	}
	v.from = max(first, bad+1)
	return lastSeen, lastSeenHash, nil
}

// verifyForward verifies the chain from next (linked to prev) to its end,
// setting v.to before the first record that fails; it returns the last
// record it read (next-1 and prev when none).
func (r *reader) verifyForward(ctx context.Context, tenant contract.TenantSlot, prev string, next int64, v *verdict) (int64, string, error) {
	last, lastHash := next-1, prev
	err := r.src.ScanRange(ctx, tenant, next, 0, func(row audit.Row) error {
		if reason := checkRow(row, prev, next); reason != "" {
			v.to = row.Seq - 1
			if v.reason == "" {
				v.reason = fmt.Sprintf("record %s at seq %d: %s", row.ID, row.Seq, reason)
			}
			return errStop
		}
		prev, next = row.Hash, next+1
		last, lastHash = row.Seq, row.Hash
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return 0, "", err
	}
	return last, lastHash, nil
}

// checkHead compares the chain's end with what its head says; the first
// reason found is kept.
func (v *verdict) checkHead(headFound bool, headSeq int64, headHash string, last int64, lastHash string) {
	reason := ""
	switch {
	case !headFound && last > 0:
		reason = "the chain has no head row: the head was removed"
	case headFound && last > headSeq:
		v.to = headSeq
		reason = fmt.Sprintf("head is seq %d but the chain goes on to seq %d: the head was rewound", headSeq, last)
	case headFound && last < headSeq:
		reason = fmt.Sprintf("chain ends at seq %d but its head is seq %d: records were removed", last, headSeq)
	case headFound && last > 0 && lastHash != headHash:
		v.to = last - 1
		reason = "the head's hash disagrees with the chain's last record"
	}
	if v.reason == "" {
		v.reason = reason
	}
}

var errStop = errors.New("stop")

// checkRow is one link of audit.VerifyWith: the row is at seq, links to
// prev, its body hashes to its hash and its columns match its body.
func checkRow(row audit.Row, prev string, seq int64) string {
	if row.Seq != seq {
		return fmt.Sprintf("expected seq %d, found %d: a record was removed", seq, row.Seq)
	}
	if row.PrevHash != prev {
		return "prev_hash does not match the previous record's hash"
	}
	h, err := audit.Link(prev, row.Body)
	if err != nil {
		return err.Error()
	}
	if h != row.Hash {
		return "hash does not match the record body: the record was altered"
	}
	return audit.CheckColumns(row)
}

// eventOf turns one audit record into an event.
func eventOf(rec audit.Record) Event {
	ev := Event{
		Gate:     gateOf(rec.Outcome.Action),
		Kind:     rec.Outcome.Action,
		AuditID:  rec.ID,
		AuditSeq: rec.Seq,
		Outcome:  string(rec.Outcome.Outcome),
		RunID:    rec.Provenance.RunID,
		Summary:  rec.Outcome.Action + " " + rec.Outcome.Resource,
	}
	ev.At, _ = time.Parse(time.RFC3339Nano, rec.Outcome.At)
	describe(&ev, rec)
	if rec.Outcome.Reason != "" {
		if ev.Detail == nil {
			ev.Detail = map[string]any{}
		}
		ev.Detail["reason"] = rec.Outcome.Reason
	}
	if rt := rec.Provenance.Route; rt != nil {
		if ev.Detail == nil {
			ev.Detail = map[string]any{}
		}
		ev.Detail["route"] = rt
	}
	return ev
}

// gateOf is the gate that wrote a record: its action's prefix
// ("trader.apply": trader).
func gateOf(action string) Gate {
	g, _, _ := strings.Cut(action, ".")
	return Gate(g)
}

func gateOrder(g Gate) int {
	switch g {
	case GateRelay:
		return 0
	case GateShim:
		return 1
	case GateTrader:
		return 2
	case GateExecutor:
		return 3
	}
	return 4
}

// decode reads rec's payload into v; false when it has none or another shape.
func decode(rec audit.Record, v any) bool {
	return len(rec.Payload) > 0 && json.Unmarshal(rec.Payload, v) == nil
}
