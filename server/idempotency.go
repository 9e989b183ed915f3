package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Idempotent writes (seed 002 idempotency_key).
//
// Every write route of the wrapper (POST, PUT, PATCH, DELETE; not the LLM
// routes, whose Idempotency-Key belongs to the provider and is forwarded,
// not the public and Raw ones, not a route that takes the key itself:
// Route.OwnIdempotency) accepts an Idempotency-Key header:
//
//   - first use: the key is claimed (store.ClaimLeasedKey, tenant-wide,
//     scope KeyScope), the handler runs and its answer is held back until
//     it is stored: status, the headers of storedHeaders and the body. An
//     answer of 400 or more changed nothing (a refusal changes nothing; a
//     5xx failed): the key is released and a retry runs again;
//   - the same key with the same request (method, path and query,
//     If-Match and canonical JSON body): the stored answer, marked
//     Idempotent-Replayed: true; the handler does not run;
//   - the same key with another request: 409 idempotency_key_conflict,
//     nothing runs;
//   - a duplicate that arrives while the first runs waits for its answer
//     (in this process on a channel, across processes by reading the key
//     again), at most Config.IdempotencyWait, then 409
//     idempotency_key_in_progress, which the client may retry.
//
// A claim whose process died before it stored the answer is taken over
// after KeyLease.

// KeyScope is the idempotency scope of the wrapper's keys in the store.
const KeyScope = "http"

// KeyLease is how long a claimed key whose answer was never stored belongs
// to the request that claimed it.
const KeyLease = 5 * time.Minute

// DefaultIdempotencyWait is how long a duplicate waits for the request that
// holds its key (Config.IdempotencyWait).
const DefaultIdempotencyWait = 30 * time.Second

// HeaderIdempotencyKey and HeaderReplayed are the request's key and the
// mark of a replayed answer.
const (
	HeaderIdempotencyKey = "Idempotency-Key"
	HeaderReplayed       = "Idempotent-Replayed"
)

// storedHeaders are the answer headers a replay repeats.
var storedHeaders = []string{"Content-Type", "ETag", "Location", "Cache-Control"}

// keyed reports whether rt takes Idempotency-Key in the wrapper.
func keyed(rt Route) bool {
	method, _, ok := strings.Cut(rt.Pattern, " ")
	if !ok || rt.Raw != nil || rt.Envelope != nil || rt.Public || rt.OwnIdempotency {
		return false
	}
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// storedAnswer is an answer as the idempotency key stores it.
type storedAnswer struct {
	Status int                 `json:"status"`
	Header map[string][]string `json:"header,omitempty"`
	Body   []byte              `json:"body,omitempty"`
	// Resource is the audit resource of the first run.
	Resource string `json:"resource,omitempty"`
}

// replayRecord is the audit payload of a replayed answer.
type replayRecord struct {
	IdempotencyKey string `json:"idempotency_key"`
	Replay         bool   `json:"replay"`
	Status         int    `json:"status"`
}

// heldKey is a key a request of this process works under.
type heldKey struct {
	tenant contract.TenantSlot
	key    string
	local  string
	done   chan struct{}
	// buf holds the answer back until it is stored.
	buf *heldWriter
	// finished is set by finish; abandon frees a key it never reached.
	finished bool
}

// requestHash is the sha256 of what the same key must repeat: the method,
// the path and query, If-Match and the canonical JSON body.
func requestHash(r *http.Request) (string, error) {
	body, err := ReadBody(r)
	if err != nil {
		return "", err
	}
	r.Body = nopBody(body)
	canon := json.RawMessage("null")
	if len(bytes.TrimSpace(body)) > 0 {
		if canon, err = contract.CanonicalJSON(body); err != nil {
			return "", contract.Invalidf("bad_json", "the body is not JSON: %v", err)
		}
	}
	b, err := json.Marshal(struct {
		Method  string          `json:"method"`
		Path    string          `json:"path"`
		IfMatch string          `json:"if_match"`
		Body    json.RawMessage `json:"body"`
	}{r.Method, r.URL.RequestURI(), r.Header.Get("If-Match"), canon})
	if err != nil {
		return "", err
	}
	return contract.SHA256(b), nil
}

// claimKey claims the request's Idempotency-Key, or finds its stored
// answer. It returns (nil, nil, nil) when r has no key.
func (s *Server) claimKey(r *http.Request, caller contract.Caller) (*heldKey, *storedAnswer, error) {
	vs := r.Header.Values(HeaderIdempotencyKey)
	if len(vs) == 0 {
		return nil, nil, nil
	}
	if len(vs) > 1 {
		return nil, nil, contract.FieldError(HeaderIdempotencyKey, "bad_idempotency_key", "%s is given %d times; give it once", HeaderIdempotencyKey, len(vs))
	}
	key := vs[0]
	if !contract.ValidIdempotencyKey(key) {
		return nil, nil, contract.FieldError(HeaderIdempotencyKey, "bad_idempotency_key", "%s %q must match ^[A-Za-z0-9._:-]{8,120}$", HeaderIdempotencyKey, Clip(key, 130))
	}
	if s.keys == nil {
		return nil, nil, contract.Invalidf("idempotency_unavailable", "this server keeps no idempotency keys; send the request without %s", HeaderIdempotencyKey)
	}
	hash, err := requestHash(r)
	if err != nil {
		return nil, nil, err
	}
	tenant := caller.Identity.TenantSlot
	local := string(tenant) + "\x00" + key
	ctx := r.Context()
	deadline := time.Now().Add(s.cfg.IdempotencyWait)
	if s.cfg.IdempotencyNoWait {
		deadline = time.Time{} // past: every wait below gives up at once
	}
	poll := 5 * time.Millisecond
	for {
		ch, owner := s.inflight.Acquire(local)
		if !owner {
			// A request of this process holds the key: wait for it.
			if !wait(ctx, ch, deadline) {
				return nil, nil, inProgress(key)
			}
			continue
		}
		claim, err := s.keys.ClaimLeasedKey(ctx, tenant, KeyScope, key, hash, KeyLease)
		switch {
		case err != nil:
			s.inflight.Release(local, ch)
			return nil, nil, err
		case claim.Claimed:
			return &heldKey{tenant: tenant, key: key, local: local, done: ch}, nil, nil
		case !claim.InProgress():
			s.inflight.Release(local, ch)
			var a storedAnswer
			if err := json.Unmarshal(claim.Result, &a); err != nil {
				return nil, nil, contract.Internal(fmt.Errorf("server: stored answer of idempotency key %s: %w", key, err))
			}
			return nil, &a, nil
		}
		// Another process holds the key: read it again shortly.
		s.inflight.Release(local, ch)
		timer := time.NewTimer(poll)
		ok := wait(ctx, timer.C, deadline)
		timer.Stop()
		if !ok {
			return nil, nil, inProgress(key)
		}
		poll = min(poll*2, 200*time.Millisecond)
	}
}

func nopBody(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// wait waits for ch until deadline or ctx ends; false: it did not come.
func wait[T any](ctx context.Context, ch <-chan T, deadline time.Time) bool {
	d := time.Until(deadline)
	if d <= 0 {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ch:
		return true
	case <-timer.C:
	case <-ctx.Done():
	}
	return false
}

func inProgress(key string) error {
	return contract.Conflictf("idempotency_key_in_progress", "a request with %s %q is still running; retry later for its answer", HeaderIdempotencyKey, key)
}

// finish stores the held answer (status below 400) or releases the key,
// then sends the answer: a client never sees an answer its retry could not
// replay.
func (s *Server) finish(ctx context.Context, k *heldKey, c *Call, w http.ResponseWriter) {
	k.finished = true
	defer s.inflight.Release(k.local, k.done)
	ctx = context.WithoutCancel(ctx)
	b := k.buf
	if b.status == 0 {
		b.status = http.StatusOK
	}
	if b.status >= 400 {
		if err := s.keys.ReleaseLeasedKey(ctx, k.tenant, KeyScope, k.key); err != nil {
			s.log.Error("idempotency key not released", "key", k.key, "err", err)
		}
	} else {
		a := storedAnswer{Status: b.status, Header: map[string][]string{}, Body: b.body.Bytes(), Resource: c.Resource}
		if c.ReplayBody != nil {
			a.Body = c.ReplayBody
		}
		for _, h := range storedHeaders {
			if vs := w.Header().Values(h); len(vs) > 0 {
				a.Header[h] = vs
			}
		}
		res, err := json.Marshal(a)
		if err == nil {
			err = s.keys.CompleteLeasedKey(ctx, k.tenant, KeyScope, k.key, res)
		}
		if err != nil {
			// The change is made: answer it. The key stays claimed, so a
			// retry waits, and runs again after KeyLease.
			s.log.Error("idempotency answer not stored", "key", k.key, "err", err)
		}
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}

// abandon frees the key of a request whose handler panicked: finish never
// ran, and nothing was answered.
func (s *Server) abandon(k *heldKey) {
	if k.finished {
		return
	}
	k.finished = true
	if err := s.keys.ReleaseLeasedKey(context.Background(), k.tenant, KeyScope, k.key); err != nil {
		s.log.Error("idempotency key not released", "key", k.key, "err", err)
	}
	s.inflight.Release(k.local, k.done)
}

// replay writes a stored answer, marked as replayed.
func replay(w http.ResponseWriter, a *storedAnswer) {
	for h, vs := range a.Header {
		w.Header()[h] = vs
	}
	w.Header().Set(HeaderReplayed, "true")
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

// heldWriter holds an answer back: the headers go to the real writer's map,
// the status and the body are kept until finish sends them.
type heldWriter struct {
	w      http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (h *heldWriter) Header() http.Header { return h.w.Header() }

func (h *heldWriter) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

func (h *heldWriter) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return h.body.Write(b)
}

// Flush does nothing: the answer is sent once it is stored.
func (h *heldWriter) Flush() {}
