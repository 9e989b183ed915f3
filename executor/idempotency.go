package executor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

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
// process died is taken over after TickKeyLease; the ref_ids of a keyed tick
// are derived from the key, so the broker's ref_id duplicate search still
// catches an order the dead process placed.
//
// A tick without a key runs every time; its envelope says so in a note, and
// its ref_ids are derived from (tenant, strategy, intent content, New York
// trading day), so re-sending an identical intent the same New York day is
// caught by the broker's ref_id duplicate search (the broker returns the
// first order instead of placing a second).

// TickKeyScope is the idempotency scope of executor ticks in the store.
const TickKeyScope = "executor.tick"

// TickKeyLease is how long a claimed, never completed key belongs to the
// tick that claimed it before another may take it over.
const TickKeyLease = 5 * time.Minute

// TickKeyWait is how long a duplicate waits for the tick holding its key in
// another process before it answers idempotency_key_in_progress.
const TickKeyWait = 30 * time.Second

// NotIdempotentNote is the envelope note of a tick that carried no key.
const NotIdempotentNote = "not idempotent: no idempotency key, so a retry runs again; ref_ids derive from tenant, strategy, intent and New York day, so the broker's ref_id search catches an identical intent re-sent the same day"

// inflight is the set of keys a tick of this process is working on.
type inflight struct {
	mu   sync.Mutex
	keys map[string]chan struct{}
}

// acquire makes the caller the process-local owner of k, or returns the
// channel closed when the current owner is done.
func (f *inflight) acquire(k string) (wait chan struct{}, owner bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ch, ok := f.keys[k]; ok {
		return ch, false
	}
	if f.keys == nil {
		f.keys = map[string]chan struct{}{}
	}
	ch := make(chan struct{})
	f.keys[k] = ch
	return ch, true
}

func (f *inflight) release(k string, ch chan struct{}) {
	f.mu.Lock()
	delete(f.keys, k)
	f.mu.Unlock()
	close(ch)
}

// TickInputHash is the sha256 of a tick's canonical input: the payload and
// the message, which is what the same idempotency key must repeat.
func TickInputHash(payload json.RawMessage, message string) (string, error) {
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
	local := string(tenant) + "\x00" + req.IdempotencyKey
	deadline := time.Now().Add(TickKeyWait)
	poll := 5 * time.Millisecond
	for {
		ch, owner := e.inflight.acquire(local)
		if !owner {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return Envelope{}, inProgress(req.IdempotencyKey)
			}
		}
		env, done, err := e.claimAndTick(ctx, req, p, hash)
		e.inflight.release(local, ch)
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

// claimAndTick claims the key and runs the tick, or replays the stored
// envelope. done is false when another process holds the key.
func (e *Executor) claimAndTick(ctx context.Context, req TickRequest, p *Payload, hash string) (Envelope, bool, error) {
	tenant := req.Identity.TenantSlot
	claim, err := e.Store.ClaimTick(ctx, tenant, req.IdempotencyKey, hash, TickKeyLease)
	if err != nil {
		return Envelope{}, true, contract.AsError(err)
	}
	switch {
	case claim.Envelope != nil:
		env, err := e.replay(ctx, req, p, claim.Envelope)
		return env, true, err
	case !claim.Claimed:
		return Envelope{}, false, nil
	}
	env, err := e.tick(ctx, req, p)
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
		// the lease and then re-runs with the same derived ref_ids.
		err = contract.Internal(fmt.Errorf("executor: store envelope of idempotency key %s: %w", req.IdempotencyKey, merr))
	}
	return env, true, err
}

// ReplayRecord is the audit payload of a replayed tick.
type ReplayRecord struct {
	TickID         string `json:"tick_id"`
	Strategy       string `json:"strategy"`
	IdempotencyKey string `json:"idempotency_key"`
	Replay         bool   `json:"replay"`
}

// replay returns a stored envelope marked as a replay, and records that
// the key was replayed (no broker was called).
func (e *Executor) replay(ctx context.Context, req TickRequest, p *Payload, stored []byte) (Envelope, error) {
	var env Envelope
	if err := json.Unmarshal(stored, &env); err != nil {
		return Envelope{}, contract.Internal(fmt.Errorf("executor: stored envelope of idempotency key %s: %w", req.IdempotencyKey, err))
	}
	env.Replay = true
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
	_, err := e.Audit.Append(context.WithoutCancel(ctx), audit.Entry{
		Outcome: contract.AuditOutcome{
			At: contract.Timestamp(wall()), Identity: req.Identity, Action: AuditAction,
			Resource: resource, Outcome: outcome, Reason: reason,
		},
		Provenance: req.Provenance,
		Payload:    ReplayRecord{TickID: env.TickID, Strategy: p.Strategy, IdempotencyKey: req.IdempotencyKey, Replay: true},
	})
	if err != nil {
		return Envelope{}, contract.Internal(fmt.Errorf("executor: audit: %w", err))
	}
	env.Audited = true
	return env, nil
}

// refFor returns the ref_id of the placement of intent i: derived from the
// idempotency key and the intent's index when the tick has a key, else from
// the tenant, strategy, intent content and New York day. It is shaped as a
// UUID (version 8, RFC 9562: the bits are a SHA-256 prefix).
func (t *tick) refFor(i int) string {
	if t.e.NewRef != nil {
		return t.e.NewRef()
	}
	h := sha256.New()
	if t.req.IdempotencyKey != "" {
		fmt.Fprintf(h, "caduceus/ref/key\x00%s\x00%s\x00%s", t.tenant(), t.req.IdempotencyKey, strconv.Itoa(i))
	} else {
		in, _ := json.Marshal(&t.p.Intents[i])
		fmt.Fprintf(h, "caduceus/ref/intent\x00%s\x00%s\x00%s\x00", t.tenant(), t.p.Strategy, t.day)
		h.Write(in)
	}
	var b [16]byte
	copy(b[:], h.Sum(nil))
	b[6] = b[6]&0x0f | 0x80
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b[:])
	return x[0:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}
