package shim

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"strconv"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// How a turn ends: its answer or refusal goes out only once its receipt
// and audit record are stored (finish); when they cannot be, unrecorded's
// 503 goes out in their place.

func (s *Service) refuse(w http.ResponseWriter, t *turn, status int, code, msg string) {
	// Every refusal here is deterministic but a slow body: retrying cannot
	// change it.
	s.reject(w, t, w.Header().Clone(), false, rejection{DecisionRefused, status, code, msg, status == http.StatusRequestTimeout})
}

// rejection is an answer the shim gives itself: the receipt's decision,
// the status, the code and message of its error envelope, and whether an
// SDK may retry it.
type rejection struct {
	decision Decision
	status   int
	code     string
	msg      string
	retry    bool
}

// reject answers the request itself, in its protocol's envelope, with
// decision on the receipt; retry false adds x-should-retry: false. The
// refusal goes out once its receipt and audit record are stored: when they
// cannot be, the client gets unrecorded's 503 instead, with the headers
// before (ran: an upstream ran the request), so no refusal is ever given
// that the trail does not hold.
func (s *Service) reject(w http.ResponseWriter, t *turn, before http.Header, ran bool, rj rejection) {
	decision, status, code, msg, retry := rj.decision, rj.status, rj.code, rj.msg, rj.retry
	t.rc.Decision = decision
	t.rc.Refusal = &Refusal{Code: code, Message: msg}
	t.headers(w)
	if !retry {
		w.Header().Set(headerShouldRetry, "false")
	}
	body := wire.ErrorBody(t.rc.Protocol, status, code, msg)
	t.rc.ResponseSHA256 = contract.SHA256(body)
	if !s.finish(t) {
		s.unrecorded(w, t, before, ran)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// fail answers 500 internal for a failure of the shim itself (a store read,
// the ledger), once the receipt that names it is stored; when it cannot
// be, or the failure is the store being unavailable (Config.Unavailable),
// unrecorded's 503 with the headers before (ran: an upstream ran the
// request), so the client is never handed a receipt id that is not stored.
func (s *Service) fail(w http.ResponseWriter, t *turn, before http.Header, ran bool, err error) {
	s.log.Error("shim: proxy failure", "receipt", t.rc.ID, "err", err)
	if s.cfg.Unavailable != nil && s.cfg.Unavailable(err) {
		// The store cannot be reached or written now (a stopped database,
		// a full disk): nothing of the turn can be recorded, and the
		// client may come back (unrecorded's 503 with Retry-After), as
		// when the receipt itself could not be stored.
		t.unstored = err
		s.closeDeferred(context.WithoutCancel(t.r.Context()), t)
		s.unrecorded(w, t, before, ran)
		return
	}
	t.rc.Decision = DecisionFailed
	t.rc.Refusal = &Refusal{Code: "internal", Message: "internal error"}
	t.headers(w)
	if !s.finish(t) {
		s.unrecorded(w, t, before, ran)
		return
	}
	wire.WriteError(w, t.rc.Protocol, http.StatusInternalServerError, "internal", "internal error")
}

// BodiesAsHashes is the redaction of a receipt's record: the request, the
// forwarded request and the answer are kept as their sha256, never as text.
var BodiesAsHashes = contract.Redaction{Level: contract.RedactionPartial, Reason: "request and response bodies kept as their sha256"}

// finish appends the receipt to the audit trail and the store (one
// transaction with Config.Turns), then tells the observers, on a context the
// caller's hang-up cannot cancel. It runs before the handler returns, so a
// non-streaming answer reaches the caller only after its receipt and audit
// record are committed. stored is false when they could not be: the
// caller then withholds the answer (unrecorded) or does not end the stream.
func (s *Service) finish(t *turn) (stored bool) {
	t.sums.Wait()
	ctx := context.WithoutCancel(t.r.Context())
	outcome := contract.OutcomeAllow
	reason := ""
	if t.rc.Refusal != nil {
		reason = t.rc.Refusal.Code
		if t.rc.Decision == DecisionRefused {
			outcome = contract.OutcomeDeny
		}
	}
	id := t.caller.Identity
	actorID := id.Subject
	if actorID == "" {
		actorID = "unknown"
	}
	prov := &contract.Provenance{Surface: id.Surface, Actor: contract.Actor{Type: contract.ActorUser, ID: actorID}, RecordedAt: t.rc.At,
		ConversationID: t.conv, Build: contract.CurrentBuild()}
	if prov.Surface == "" {
		prov.Surface = contract.SurfaceAPI
	}
	if t.key != "" && !contract.IsConversationID(t.key) {
		prov.SessionID = contract.SessionIDFor(t.key)
	}
	// The route (seed 002): the model asked for (the protocol when the
	// request named none), the reasoning effort it asked for, and when an
	// upstream answered, the model identity it served and its provider
	// class.
	requested := t.rc.Model
	if requested == "" {
		requested = string(t.rc.Protocol)
	}
	if requested != "" {
		r := contract.Route{Requested: truncateRunes(requested, 120), Effort: t.effort}
		if t.served != nil {
			r.ResolvedTarget, r.Provider = truncateRunes(t.served.ResolvedTarget, 120), t.served.Provider
		}
		t.rc.Route, prov.Route = &r, &r
	}
	annotateSpan(ctx, t, requested) // the request span's model identity, when traced
	t.guardRecords()
	e := audit.Entry{
		Outcome: contract.AuditOutcome{At: t.rc.At, Identity: id, Action: AuditAction,
			Resource: "receipt/" + t.rc.ID, Outcome: outcome, Reason: reason},
		Provenance: prov,
		Payload:    t.rc,
		Redaction:  &BodiesAsHashes,
	}
	if t.rc.Redaction != nil {
		// The record says what the guardrails did as well.
		e.Redaction = &contract.Redaction{Level: contract.RedactionPartial, Reason: BodiesAsHashes.Reason + "; " + t.rc.Redaction.Reason}
		if t.rc.Sensitivity == contract.SensitivityRestricted {
			e.Sensitivity = t.rc.Sensitivity
		}
	}
	observers := s.cfg.Observers
	if s.cfg.Turns != nil {
		// Planners' memory writes join the turn's transaction; the other
		// observers are told after it, as without Turns.
		var memory []MemoryWrite
		observers = nil
		for _, o := range s.cfg.Observers {
			if p, ok := o.(TurnPlanner); ok {
				if w, ok := p.PlanTurn(t.observed()); ok {
					memory = append(memory, w)
				}
				continue
			}
			observers = append(observers, o)
		}
		stored = true
		if err := s.cfg.Turns.RecordTurn(ctx, e, &t.rc, memory); errors.Is(err, ErrMemoryNotRecorded) {
			s.log.Warn("shim: turn memory not recorded", "receipt", t.rc.ID, "err", err)
		} else if err != nil {
			stored, t.unstored = false, err
			s.log.Error("shim: receipt and audit record not stored", "receipt", t.rc.ID, "err", err)
			s.closeDeferred(ctx, t) // the failed transaction did not close them
		}
	} else {
		stored = true
		rec, err := s.cfg.Audit.Append(ctx, e)
		if err != nil {
			stored, t.unstored = false, err
			s.log.Error("shim: audit append failed", "receipt", t.rc.ID, "err", err)
		} else {
			t.rc.AuditID = rec.ID
		}
		if err := s.store.AddReceipt(ctx, id.TenantSlot, t.rc); err != nil {
			stored, t.unstored = false, errors.Join(t.unstored, err)
			s.log.Error("shim: receipt not stored", "receipt", t.rc.ID, "err", err)
		}
		s.closeDeferred(ctx, t)
	}
	for _, o := range observers {
		o.ObserveTurn(ctx, t.observed())
	}
	if s.cfg.OnGuardrail != nil {
		for _, r := range t.rc.Guardrails {
			s.cfg.OnGuardrail(r)
		}
	}
	return stored
}

// unrecorded answers 503 receipt_not_recorded in place of an answer or a
// refusal whose receipt finish could not store, with the headers the
// response had before the answer's (before): a client never gets an answer
// or a refusal that has no receipt. ran says an upstream ran the request
// (its work is settled as spent): as every final 5xx of the shim's own
// once an attempt may have run, it carries x-should-retry: false, since an
// automatic retry would run the request again; a direct answer may be
// retried. When the receipt was not stored because the store cannot be
// reached or written now (Config.Unavailable), it carries Retry-After: 1,
// as the server's 503 store_unavailable does.
func (s *Service) unrecorded(w http.ResponseWriter, t *turn, before http.Header, ran bool) {
	hdr := w.Header()
	clear(hdr)
	maps.Copy(hdr, before)
	hdr.Del(HeaderReceipt)
	if ran {
		hdr.Set(headerShouldRetry, "false")
	}
	if s.cfg.Unavailable != nil && t.unstored != nil && s.cfg.Unavailable(t.unstored) {
		hdr.Set("Retry-After", "1")
	}
	body := wire.ErrorBody(t.rc.Protocol, http.StatusServiceUnavailable, CodeReceiptNotRecorded,
		"shim: the answer's receipt "+t.rc.ID+" could not be recorded, so the answer is withheld")
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = w.Write(body)
}

// closeDeferred settles or releases the reservations a gateway with
// DeferClose left for the receipt's transaction, when no such transaction
// closed them.
func (s *Service) closeDeferred(ctx context.Context, t *turn) {
	if s.cfg.Gateway != nil && s.cfg.Gateway.DefersClose() && t.rc.Spend != nil {
		s.cfg.Gateway.Close(ctx, t.rc.Spend.Attempts)
	}
}
