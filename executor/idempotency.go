package executor

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
)

// Idempotent ticks.
//
// A tick that carries an idempotency key (HTTP Idempotency-Key header, MCP
// and HTTP body idempotency_key, CLI --idempotency-key) runs at most once per
// (tenant, key): the key is claimed in the store before any broker call and
// completed with the envelope after the tick, each in its own short
// transaction (a tick calls the broker and writes the audit log, so it cannot
// run inside the claiming transaction). The same key with the same canonical
// input (payload and message) returns the stored envelope with replay set and
// calls no broker; with another input it is a conflict. Duplicates that
// arrive while the first is running wait for it: in-process on a channel,
// across processes by reading the key again (at most TickKeyWait, then a
// conflict idempotency_key_in_progress the client may retry). A claim whose
// process died is taken over after TickKeyLease. The ref_ids of a keyed tick
// (uuid4(), one per intent) are recorded with its key when it claims it
// (Store.TickRefs), so the taker places under the same ref_ids: it first
// looks them up in the account's orders and reports an order the dead
// process placed as already_placed instead of placing again.
//
// A tick without a key runs every time, and its envelope says so in a
// note; its ref_ids are fresh, so a tick re-sent with identical intents
// places again (two ticks are two ticks).

// TickKeyScope is the idempotency scope of executor ticks in the store.
const TickKeyScope = "executor.tick"

// TickKeyLease is how long a claimed, never completed key belongs to the
// tick that claimed it before another may take it over.
const TickKeyLease = 5 * time.Minute

// TickKeyWait is how long a duplicate waits for the tick holding its key in
// another process before it answers idempotency_key_in_progress.
const TickKeyWait = 30 * time.Second

// NotIdempotentNote is the envelope note of a tick that carried no key.
const NotIdempotentNote = "not idempotent: no idempotency key, so a retry runs again and places again under fresh ref_ids; send an idempotency key to make a retry safe"

// TickInputHash is the sha256 of a tick's canonical input: the payload and
// the message, which is what the same idempotency key must repeat. The
// canonical input is the canonical JSON of {"payload": ..., "message": ...};
// it is written directly (the payload canonicalized once, the message
// escaped as CanonicalJSON escapes strings) rather than by marshalling the
// object and canonicalizing it again, and gives the same bytes.
func TickInputHash(payload json.RawMessage, message string) (string, error) {
	if payload == nil {
		payload = json.RawMessage("null") // as json.Marshal writes it
	}
	if !utf8.ValidString(message) {
		// encoding/json turns each invalid byte into U+FFFD; keep exactly
		// the bytes (and so the hashes) it gives.
		return tickInputHashMarshalled(payload, message)
	}
	c, err := contract.CanonicalJSON(payload)
	if err != nil {
		return "", contract.Invalidf("bad_json", "executor: payload: %v", err)
	}
	var b bytes.Buffer
	b.Grow(len(c) + len(message) + 32)
	b.WriteString(`{"message":`)
	contract.WriteJSONString(&b, message)
	b.WriteString(`,"payload":`)
	b.Write(c)
	b.WriteByte('}')
	return contract.SHA256(b.Bytes()), nil
}

// tickInputHashMarshalled is TickInputHash by way of json.Marshal and
// CanonicalJSON: the definition TickInputHash must agree with.
func tickInputHashMarshalled(payload json.RawMessage, message string) (string, error) {
	b, err := json.Marshal(struct {
		Payload json.RawMessage `json:"payload"`
		Message string          `json:"message"`
	}{payload, message})
	if err != nil {
		return "", contract.Invalidf("bad_json", "executor: payload: %v", err)
	}
	c, err := contract.CanonicalJSON(b)
	if err != nil {
		return "", err
	}
	return contract.SHA256(c), nil
}

// idempotentTick runs req at most once per (tenant, key).
func (e *Executor) idempotentTick(ctx context.Context, req TickRequest, p *Payload) (Envelope, error) {
	tenant := req.Identity.TenantSlot
	hash, err := TickInputHash(req.Payload, req.Message)
	if err != nil {
		return Envelope{}, err
	}
	if req.ProfileAccount != "" {
		// The account is input too: the same key naming another account
		// is a conflict. Ticks without one keep the hash of payload and
		// message alone.
		hash = contract.SHA256([]byte(hash + "\x00account\x00" + req.ProfileAccount))
	}
	rp := e.replayer()
	local := string(tenant) + "\x00" + req.IdempotencyKey
	deadline := time.Now().Add(TickKeyWait)
	poll := 5 * time.Millisecond
	for {
		ch, owner := e.inflight.Acquire(local)
		if !owner {
			// A call of this process holds the key. If the key is
			// complete (the holder is only replaying it too), replay now:
			// retries of a finished tick never queue behind each other.
			// Otherwise wait for the holder, which may be the first run.
			if rp != nil {
				claim, env, err := e.claimOrReplay(ctx, rp, req, p, hash, false)
				if err != nil || claim.Envelope != nil {
					return env, err
				}
			}
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return Envelope{}, inProgress(req.IdempotencyKey)
			}
		}
		env, done, err := e.claimAndTick(ctx, rp, req, p, hash)
		e.inflight.Release(local, ch)
		if done {
			return env, err
		}
		// Another process holds the key: read it again shortly.
		if time.Now().After(deadline) {
			return Envelope{}, inProgress(req.IdempotencyKey)
		}
		timer := time.NewTimer(poll)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return Envelope{}, inProgress(req.IdempotencyKey)
		}
		poll = min(poll*2, 200*time.Millisecond)
	}
}

func inProgress(key string) error {
	return contract.Conflictf("idempotency_key_in_progress", "executor: a tick with idempotency key %q is still running; retry later for its envelope", key)
}

// replayer returns the store's one-transaction replay when the store also
// holds the executor's audit log, else nil (ClaimTick, then a separate
// audit append).
func (e *Executor) replayer() TickReplayer {
	if rp, ok := e.Store.(TickReplayer); ok && rp.AuditsTo(e.Audit) {
		return rp
	}
	return nil
}

// claimAndTick claims the key and runs the tick, or replays the stored
// envelope. done is false when another process holds the key.
func (e *Executor) claimAndTick(ctx context.Context, rp TickReplayer, req TickRequest, p *Payload, hash string) (Envelope, bool, error) {
	tenant := req.Identity.TenantSlot
	var claim TickClaim
	var err error
	if rp != nil {
		var env Envelope
		claim, env, err = e.claimOrReplay(ctx, rp, req, p, hash, true)
		if err != nil || claim.Envelope != nil {
			return env, true, err
		}
	} else {
		claim, err = e.Store.ClaimTick(ctx, tenant, req.IdempotencyKey, hash, TickKeyLease)
		if err != nil {
			return Envelope{}, true, contract.AsError(err)
		}
		if claim.Envelope != nil {
			env, err := e.replay(ctx, req, p, claim.Envelope)
			return env, true, err
		}
	}
	if !claim.Claimed {
		return Envelope{}, false, nil
	}
	refs, reused, err := e.keyRefs(ctx, req, p)
	if err != nil {
		if rerr := e.Store.ReleaseTick(context.WithoutCancel(ctx), tenant, req.IdempotencyKey); rerr != nil {
			err = contract.Internal(fmt.Errorf("%w; release: %v", err, rerr))
		}
		return Envelope{}, true, err
	}
	env, err := e.tick(ctx, req, p, tickRefs{ids: refs, reused: reused})
	if env.TickID == "" {
		// Nothing happened (no broker call, no record): free the key.
		if rerr := e.Store.ReleaseTick(context.WithoutCancel(ctx), tenant, req.IdempotencyKey); rerr != nil && err == nil {
			err = contract.Internal(rerr)
		}
		return env, true, err
	}
	b, merr := json.Marshal(env)
	if merr == nil {
		merr = e.Store.CompleteTick(context.WithoutCancel(ctx), tenant, req.IdempotencyKey, b)
	}
	if merr != nil && err == nil {
		// The tick happened; its key stays claimed, so a retry waits out
		// the lease and then re-runs with the ref_ids recorded for the key.
		err = contract.Internal(fmt.Errorf("executor: store envelope of idempotency key %s: %w", req.IdempotencyKey, merr))
	}
	return env, true, err
}

// claimOrReplay is ClaimOrReplayTick: when the key is complete, env is its
// stored envelope marked as a replay whose audit record was committed with
// the read of the key.
func (e *Executor) claimOrReplay(ctx context.Context, rp TickReplayer, req TickRequest, p *Payload, hash string, claim bool) (TickClaim, Envelope, error) {
	var env Envelope
	c, err := rp.ClaimOrReplayTick(ctx, req.Identity.TenantSlot, req.IdempotencyKey, hash, TickKeyLease, claim,
		func(stored []byte) (audit.Entry, error) {
			var err error
			if env, err = storedEnvelope(req, stored); err != nil {
				return audit.Entry{}, err
			}
			return e.replayAuditEntry(req, p, env), nil
		})
	if err != nil {
		return TickClaim{}, Envelope{}, contract.AsError(err)
	}
	if c.Envelope != nil {
		env.Replay, env.Audited = true, true
	}
	return c, env, nil
}

// ReplayRecord is the audit payload of a replayed tick.
type ReplayRecord struct {
	TickID         string `json:"tick_id"`
	Strategy       string `json:"strategy"`
	IdempotencyKey string `json:"idempotency_key"`
	Replay         bool   `json:"replay"`
}

// storedEnvelope decodes the stored envelope of a completed key.
func storedEnvelope(req TickRequest, stored []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(stored, &env); err != nil {
		return Envelope{}, contract.Internal(fmt.Errorf("executor: stored envelope of idempotency key %s: %w", req.IdempotencyKey, err))
	}
	return env, nil
}

// replayAuditEntry is the audit record of a replay of env: no broker was
// called; the outcome is the replayed tick's.
func (e *Executor) replayAuditEntry(req TickRequest, p *Payload, env Envelope) audit.Entry {
	outcome, reason := contract.OutcomeAllow, ""
	if env.Aborted != nil {
		outcome, reason = contract.OutcomeDeny, *env.Aborted
	}
	wall := time.Now
	if e.Now != nil {
		wall = e.Now
	}
	resource := "strategist:" + p.Strategy
	if len(resource) > 200 {
		resource = resource[:200]
	}
	return audit.Entry{
		Outcome: contract.AuditOutcome{
			At: contract.Timestamp(wall()), Identity: req.Identity, Action: AuditAction,
			Resource: resource, Outcome: outcome, Reason: reason,
		},
		Provenance: req.Provenance,
		Payload:    ReplayRecord{TickID: env.TickID, Strategy: p.Strategy, IdempotencyKey: req.IdempotencyKey, Replay: true},
	}
}

// replay returns a stored envelope marked as a replay, and records that
// the key was replayed (no broker was called), for a store that does not
// hold the audit log (see TickReplayer).
func (e *Executor) replay(ctx context.Context, req TickRequest, p *Payload, stored []byte) (Envelope, error) {
	env, err := storedEnvelope(req, stored)
	if err != nil {
		return Envelope{}, err
	}
	env.Replay = true
	if _, err := e.Audit.Append(context.WithoutCancel(ctx), e.replayAuditEntry(req, p, env)); err != nil {
		return Envelope{}, contract.Internal(fmt.Errorf("executor: audit: %w", err))
	}
	env.Audited = true
	return env, nil
}

// refFor returns the ref_id of the placement of intent i (seed 001:
// place_args.ref_id = uuid4()): for a keyed tick the one recorded with its
// key (TickRefs), else a fresh one. A retry of one placement (5xx or
// timeout) keeps it: place asks once per placement.
func (t *tick) refFor(i int) string {
	if i < len(t.refs) {
		return t.refs[i]
	}
	return t.e.newRef()
}

// newRef returns a fresh ref_id: NewRef's, else a random UUID version 4.
func (e *Executor) newRef() string {
	if e.NewRef != nil {
		return e.NewRef()
	}
	return NewUUIDv4()
}

// NewUUIDv4 returns a random UUID, version 4 (RFC 9562), in its canonical
// lower-case form.
func NewUUIDv4() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// keyRefs returns the ref_ids of a keyed tick that holds its key: fresh
// ones recorded with the key, or, when the key's first run recorded some
// (this run took over its expired claim), those; reused says which.
func (e *Executor) keyRefs(ctx context.Context, req TickRequest, p *Payload) (refs []string, reused bool, err error) {
	fresh := make([]string, len(p.Intents))
	for i := range fresh {
		fresh[i] = e.newRef()
	}
	refs, err = e.Store.TickRefs(ctx, req.Identity.TenantSlot, req.IdempotencyKey, fresh)
	if err != nil {
		return nil, false, contract.Internal(fmt.Errorf("executor: ref_ids of idempotency key %s: %w", req.IdempotencyKey, err))
	}
	if len(refs) != len(fresh) {
		return nil, false, contract.Internal(fmt.Errorf("executor: idempotency key %s has %d ref_ids recorded for %d intents", req.IdempotencyKey, len(refs), len(fresh)))
	}
	return refs, !slices.Equal(refs, fresh), nil
}
