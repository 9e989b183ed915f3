package audit

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/caduceus-dev/caduceus/contract"
)

// Row is a stored record as the store hands it to Verify: every column as
// stored, the body and the two hashes.
type Row struct {
	ID       string
	Tenant   contract.TenantSlot
	Seq      int64
	At       string
	Action   string
	Resource string
	Outcome  string
	Body     []byte
	PrevHash string
	Hash     string
}

// Source is what Verify reads: the tenants, each tenant's rows in chain
// order, and the head the store believes each chain ends at.
//
// Tenants must come from the records themselves (not only from the heads),
// so that a removed head cannot hide a chain.
type Source interface {
	Tenants(ctx context.Context) ([]contract.TenantSlot, error)
	Head(ctx context.Context, tenant contract.TenantSlot) (seq int64, hash string, err error)
	Scan(ctx context.Context, tenant contract.TenantSlot, fn func(Row) error) error
}

// Snapshotter is a Source that can be read as of one moment: fn's Source
// sees the head and the records of each chain as they were together, so a
// verification beside writers never sees a head behind records appended
// after it was read. VerifyWith reads each tenant's chain in a snapshot of
// its own when the Source offers them.
type Snapshotter interface {
	Snapshot(ctx context.Context, fn func(Source) error) error
}

// HeadFinder is a Source that can tell a missing head apart from an empty
// chain. The SQL store implements it; Verify reports a chain without a head.
type HeadFinder interface {
	FindHead(ctx context.Context, tenant contract.TenantSlot) (seq int64, hash string, found bool, err error)
}

// Break describes the first broken link found.
type Break struct {
	Tenant contract.TenantSlot
	Seq    int64
	ID     string
	Reason string
	// Checkpoint names the checkpoint the chain no longer reaches (its
	// creation time and key id), when that is the break.
	Checkpoint string
}

func (b *Break) Error() string {
	if b.Checkpoint != "" {
		return fmt.Sprintf("audit: chain of %s does not reach checkpoint %s: %s", b.Tenant, b.Checkpoint, b.Reason)
	}
	if b.ID == "" {
		return fmt.Sprintf("audit: chain of %s broken at seq %d: %s", b.Tenant, b.Seq, b.Reason)
	}
	return fmt.Sprintf("audit: chain of %s broken at seq %d (record %s): %s", b.Tenant, b.Seq, b.ID, b.Reason)
}

// End is where a verified chain ends: what a checkpoint signs.
type End struct {
	Tenant contract.TenantSlot `json:"tenant"`
	Seq    int64               `json:"seq"`
	Hash   string              `json:"hash"`
}

// Report is the result of Verify.
type Report struct {
	Tenants int
	Records int64
	Break   *Break // nil when every chain is whole
	// Ends are the verified ends of the chains walked, in tenant order
	// (complete only when Break is nil).
	Ends []End
}

// Options tune VerifyWith.
type Options struct {
	// Tenants limits verification to these tenants (all when empty).
	Tenants []contract.TenantSlot
	// Progress, if not nil, is called every 10,000 records.
	Progress func(checked int64)
	// Checkpoint, if not nil, is an anchor every chain it names must still
	// reach: the record at its seq exists and has its hash.
	Checkpoint *Checkpoint
}

// Verify recomputes the chains of the given tenants (all when none); see
// VerifyWith.
func Verify(ctx context.Context, src Source, progress func(checked int64), tenants ...contract.TenantSlot) (Report, error) {
	return VerifyWith(ctx, src, Options{Tenants: tenants, Progress: progress})
}

// VerifyWith recomputes the chains and stops at the first broken link: a
// body whose hash differs (an altered row), a prev_hash that does not match
// the previous record, a gap in seq (a removed row), any stored column
// (id, tenant, seq, at, action, resource, outcome) that disagrees with the
// hashed body, a head that disagrees with the end of its chain or is
// missing, and, with a checkpoint, a chain that no longer reaches the
// checkpoint's record (truncated, rewound or rewritten).
func VerifyWith(ctx context.Context, src Source, opt Options) (Report, error) {
	var rep Report
	tenants, err := tenantsToVerify(ctx, src, opt)
	if err != nil {
		return rep, err
	}
	anchors := map[contract.TenantSlot]End{}
	cpName := ""
	if opt.Checkpoint != nil {
		cpName = opt.Checkpoint.Name()
		for _, h := range opt.Checkpoint.Heads {
			anchors[h.Tenant] = h
		}
	}
	for _, tenant := range tenants {
		rep.Tenants++
		w := &chainWalk{tenant: tenant, cpName: cpName, progress: opt.Progress, rep: &rep}
		w.anchor, w.anchored = anchors[tenant]
		var end End
		if ss, ok := src.(Snapshotter); ok {
			err = ss.Snapshot(ctx, func(snap Source) error {
				var err error
				end, err = w.verify(ctx, snap)
				return err
			})
		} else {
			end, err = w.verify(ctx, src)
		}
		if err != nil || rep.Break != nil {
			return rep, err
		}
		if end.Seq > 0 {
			rep.Ends = append(rep.Ends, end)
		}
	}
	return rep, nil
}

// tenantsToVerify is opt.Tenants, else every tenant of src plus those of
// the checkpoint: a checkpoint's tenant whose every record is gone is still
// verified (and found short).
func tenantsToVerify(ctx context.Context, src Source, opt Options) ([]contract.TenantSlot, error) {
	if len(opt.Tenants) > 0 {
		return opt.Tenants, nil
	}
	tenants, err := src.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	if opt.Checkpoint != nil {
		for _, h := range opt.Checkpoint.Heads {
			if !slices.Contains(tenants, h.Tenant) {
				tenants = append(tenants, h.Tenant)
			}
		}
		slices.Sort(tenants)
	}
	return tenants, nil
}

// chainWalk verifies one tenant's chain, record by record, into rep.
type chainWalk struct {
	tenant   contract.TenantSlot
	anchor   End // the checkpoint's head of this tenant, when anchored
	anchored bool
	cpName   string
	progress func(checked int64)
	rep      *Report

	prev string // the hash of the last verified record
	next int64  // the seq the next record must have
}

// verify walks the chain and checks its head and the checkpoint's anchor.
// It returns the chain's verified end, or sets rep.Break.
func (w *chainWalk) verify(ctx context.Context, src Source) (End, error) {
	headSeq, headHash, headFound, err := findHead(ctx, src, w.tenant)
	if err != nil {
		return End{}, err
	}
	w.prev, w.next = Genesis, 1
	err = src.Scan(ctx, w.tenant, w.link)
	if err == errStop {
		return End{}, nil
	}
	if err != nil {
		return End{}, err
	}
	last := w.next - 1
	if b := w.headBreak(last, headSeq, headHash, headFound); b != nil {
		w.rep.Break = b
		return End{}, nil
	}
	if w.anchored && last < w.anchor.Seq {
		w.rep.Break = &Break{Tenant: w.tenant, Seq: w.next, Checkpoint: w.cpName,
			Reason: fmt.Sprintf("the chain ends at seq %d but the checkpoint signed seq %d: records were removed (truncated or rewound)", last, w.anchor.Seq)}
		return End{}, nil
	}
	return End{Tenant: w.tenant, Seq: last, Hash: w.prev}, nil
}

// link checks one record against the chain so far: its seq, its prev_hash,
// its hash over its body, its stored columns, and the checkpoint's hash at
// the anchor's seq.
func (w *chainWalk) link(r Row) error {
	brk := func(reason string) error {
		w.rep.Break = &Break{Tenant: w.tenant, Seq: r.Seq, ID: r.ID, Reason: reason}
		return errStop
	}
	if r.Seq != w.next {
		return brk(fmt.Sprintf("expected seq %d, found %d: a record was removed", w.next, r.Seq))
	}
	if r.PrevHash != w.prev {
		return brk("prev_hash does not match the previous record's hash")
	}
	h, err := Link(w.prev, r.Body)
	if err != nil {
		return brk(err.Error())
	}
	if h != r.Hash {
		return brk("hash does not match the record body: the record was altered")
	}
	if reason := columnsMatch(r); reason != "" {
		return brk(reason)
	}
	if w.anchored && r.Seq == w.anchor.Seq && h != w.anchor.Hash {
		w.rep.Break = &Break{Tenant: w.tenant, Seq: r.Seq, ID: r.ID, Checkpoint: w.cpName,
			Reason: fmt.Sprintf("record %s at seq %d hashes to %s but the checkpoint signed %s: the history was rewritten", r.ID, r.Seq, h, w.anchor.Hash)}
		return errStop
	}
	w.prev = h
	w.next++
	w.rep.Records++
	if w.progress != nil && w.rep.Records%10000 == 0 {
		w.progress(w.rep.Records)
	}
	return nil
}

// headBreak checks the head row against the chain that ends at seq last:
// present when there are records, at the same seq, with the same hash.
func (w *chainWalk) headBreak(last, headSeq int64, headHash string, headFound bool) *Break {
	switch {
	case !headFound && last > 0:
		return &Break{Tenant: w.tenant, Seq: last, Reason: fmt.Sprintf("the chain has %d records but no head row: the head was removed", last)}
	case headFound && last < headSeq:
		return &Break{Tenant: w.tenant, Seq: w.next, Reason: fmt.Sprintf("chain ends at seq %d but its head is seq %d: records were removed", last, headSeq)}
	case headFound && last > headSeq:
		return &Break{Tenant: w.tenant, Seq: headSeq, Reason: fmt.Sprintf("head is seq %d but the chain goes on to seq %d: the head was rewound", headSeq, last)}
	case headFound && last > 0 && w.prev != headHash:
		return &Break{Tenant: w.tenant, Seq: last, Reason: fmt.Sprintf("head hash %s disagrees with the chain's last hash %s", headHash, w.prev)}
	}
	return nil
}

func findHead(ctx context.Context, src Source, t contract.TenantSlot) (int64, string, bool, error) {
	if hf, ok := src.(HeadFinder); ok {
		return hf.FindHead(ctx, t)
	}
	seq, hash, err := src.Head(ctx, t)
	return seq, hash, true, err
}

type stopErr struct{}

func (stopErr) Error() string { return "stop" }

var errStop error = stopErr{}

// CheckColumns reports why a row's stored columns (id, tenant, seq, at,
// action, resource, outcome) disagree with its hashed body; "" when they
// agree. It is the column check of VerifyWith, for readers that verify a
// range of a chain themselves.
func CheckColumns(r Row) string { return columnsMatch(r) }

// columnsMatch checks every stored column against the hashed body without
// a full decode. The body is canonical JSON written by Seal, so its shape is
// fixed: {"id":…,"outcome":{…},["payload":…,]["provenance":…,]"seq":…,"tenant":…}.
// id, seq and tenant are checked at their fixed places; at, action,
// resource and outcome inside the outcome object only (never in a payload
// that happens to carry such a key).
func columnsMatch(r Row) string {
	id := `{"id":` + jsonString(r.ID) + `,"outcome":{`
	if !bytes.HasPrefix(r.Body, []byte(id)) {
		return "stored column id does not match the record body"
	}
	tail := `,"seq":` + strconv.FormatInt(r.Seq, 10) + `,"tenant":` + jsonString(string(r.Tenant)) + `}`
	if !bytes.HasSuffix(r.Body, []byte(tail)) {
		return "stored column seq or tenant does not match the record body"
	}
	obj := objectAt(r.Body, len(id)-1)
	checks := []struct{ key, want string }{
		{`"at":`, jsonString(r.At)},
		{`"action":`, jsonString(r.Action)},
		{`"resource":`, jsonString(r.Resource)},
		{`"outcome":`, jsonString(r.Outcome)},
	}
	for _, c := range checks {
		if !hasField(obj, c.key, c.want) {
			return "stored column " + c.key[1:len(c.key)-2] + " does not match the record body"
		}
	}
	return ""
}

// objectAt returns the JSON object that starts at b[i] ('{'), found by a
// string-aware scan; the rest of b if it never closes.
func objectAt(b []byte, i int) []byte {
	depth, inStr := 0, false
	for j := i; j < len(b); j++ {
		ch := b[j]
		switch {
		case inStr:
			if ch == '\\' {
				j++
			} else if ch == '"' {
				inStr = false
			}
		case ch == '"':
			inStr = true
		case ch == '{' || ch == '[':
			depth++
		case ch == '}' || ch == ']':
			depth--
			if depth == 0 {
				return b[i : j+1]
			}
		}
	}
	return b[i:]
}

func jsonString(s string) string {
	var b bytes.Buffer
	contract.WriteJSONString(&b, s)
	return b.String()
}

// hasField reports whether the member key (preceded by '{' or ',', so
// structural, not inside a string) is followed by want in obj.
func hasField(obj []byte, key, want string) bool {
	body := obj
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(key))
		if j < 0 {
			return false
		}
		at := i + j
		i = at + len(key)
		if at == 0 || (body[at-1] != '{' && body[at-1] != ',') {
			continue
		}
		if bytes.HasPrefix(body[i:], []byte(want)) {
			rest := body[i+len(want):]
			if len(rest) > 0 && (rest[0] == ',' || rest[0] == '}') {
				return true
			}
		}
	}
}
