package shim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"maps"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Headers the shim reads and writes.
const (
	HeaderConversation = "X-Caduceus-Conversation"
	HeaderProject      = "X-Caduceus-Project"
	HeaderHarness      = "X-Caduceus-Harness"
	// HeaderHermaHarness is seed 003's name for HeaderHarness, accepted as
	// an alias (HarnessOf).
	HeaderHermaHarness = "X-Herma-Harness"
	HeaderReceipt      = "X-Caduceus-Receipt"
	HeaderOverhead     = "X-Caduceus-Overhead-Us"
	// headerShouldRetry tells the official SDKs whether to retry.
	headerShouldRetry = "X-Should-Retry"
)

// HarnessOf is the harness a request attests: X-Caduceus-Harness, or seed
// 003's X-Herma-Harness when the first is absent.
func HarnessOf(h http.Header) string {
	if v := h.Get(HeaderHarness); v != "" {
		return v
	}
	return h.Get(HeaderHermaHarness)
}

// Refusal codes of the proxy.
const (
	CodeContributorRefused = "contributor_model_refused"
	CodeInvalidRequest     = "invalid_request"
	CodeOffline            = "offline"
	codeNoUpstream         = "upstream_not_configured"
	CodeUpstreamFailed     = "upstream_unreachable"
	codeTooLarge           = "request_too_large"
	codeBodyTimeout        = "request_timeout"
	codeUnauthenticated    = "unauthenticated"
	// CodeReceiptNotRecorded answers (503) in place of an answer whose
	// receipt and audit record could not be stored: nothing was delivered.
	CodeReceiptNotRecorded = "receipt_not_recorded"
)

// AuditAction is the audit action of a proxied request.
const AuditAction = "shim.proxy"

// Handler returns the http.Handler of protocol p's LLM route. Mount it at
// POST /v1/chat/completions, /v1/responses or /v1/messages (the query, e.g.
// ?beta=true, is passed upstream) behind the middleware that authenticates
// the key and puts a contract.Caller in the request context. Every request
// gets a receipt (header X-Caduceus-Receipt) and refusals answer in p's own
// error envelope.
func (s *Service) Handler(p wire.Protocol) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, p) })
}

// turn carries one request through the proxy.
type turn struct {
	start  time.Time
	caller contract.Caller
	req    *wire.Request
	conv   string // the conv_ id
	key    string // the session key it was named by, if any
	rc     Receipt
	r      *http.Request
	// unstored is why finish could not store the receipt (nil: it did).
	unstored error
	// served is the model identity that answered and its provider class
	// (the receipt's route), once an upstream answered.
	served *contract.Route
	// effort is the reasoning effort the request asks for (the route's
	// effort, seed 002), "" when none of the HUX enum.
	effort contract.Effort

	// guard is the turn's guardrails (nil: no policy applies).
	guard *guarding

	// hashing runs beside the rule work: the request's and the forwarded
	// body's sha256 are only read by finish, which waits for them
	sums sync.WaitGroup
}

// hash sets *dst to the sha256 of b, off the request's path.
func (t *turn) hash(dst *string, b []byte) {
	t.sums.Add(1)
	go func() {
		defer t.sums.Done()
		*dst = contract.SHA256(b)
	}()
}

// readBody is io.ReadAll of the body (which the server bounds: a body
// past its bound fails with *http.MaxBytesError), sized up front when the
// request says how long it is.
func readBody(r *http.Request) ([]byte, error) {
	rd := r.Body
	size := int64(512)
	if n := r.ContentLength; n > 0 {
		size = min(n+1, 1<<20) // room to see EOF without growing; a claimed length is not trusted past 1 MiB
	}
	b := make([]byte, 0, size)
	for {
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
	}
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request, p wire.Protocol) {
	t := &turn{start: time.Now(), r: r}
	caller, ok := contract.CallerFrom(r.Context())
	if !ok {
		wire.WriteError(w, p, http.StatusUnauthorized, codeUnauthenticated, "shim: no authenticated caller")
		return
	}
	t.caller = caller
	t.rc = Receipt{
		ID: contract.NewID(contract.PrefixReceipt), At: contract.Timestamp(s.now()),
		Tenant: caller.Identity.TenantSlot, Subject: caller.Identity.Subject, KeyID: caller.KeyID,
		Harness: caller.Harness, Protocol: p, Fired: []Fired{}, Skipped: []Skipped{}, Shimmed: []Shimmed{},
		ContractVersion: ReceiptContractVersion,
	}
	// The edge secret, the key, its route scope and the body's bound are
	// the server's (server.Route): the handler reads the body, bounded by
	// it, once.
	body, err := readBody(r)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.As(err, &mbe):
			s.refuse(w, t, http.StatusRequestEntityTooLarge, codeTooLarge, "shim: request body too large")
		case errors.Is(err, os.ErrDeadlineExceeded):
			s.refuse(w, t, http.StatusRequestTimeout, codeBodyTimeout, "shim: the request body did not arrive in time")
		default:
			s.refuse(w, t, http.StatusBadRequest, CodeInvalidRequest, "shim: cannot read request body")
		}
		return
	}
	t.hash(&t.rc.RequestSHA256, body)
	// The input rule every route shares (UTF-8, depth, duplicate keys,
	// trailing data), on the one read of the body.
	if err := contract.CheckJSON(body); err != nil {
		e := contract.AsError(err)
		// The code leads the message: not every protocol's envelope has a
		// field for it.
		s.refuse(w, t, e.Kind.HTTPStatus(), e.Code, e.Code+": "+e.Message)
		return
	}
	// The one parse of the body: every later step (rules, shimming, the
	// gateway) reads the request it gives.
	req, err := wire.ParseChecked(p, body) // CheckJSON accepted body above
	if err != nil {
		if IsContributorModel(wire.PeekModel(body)) {
			// The contributor refusal wins whatever else is wrong.
			s.refuse(w, t, http.StatusForbidden, CodeContributorRefused, "shim: contributor-tier models are refused")
			return
		}
		s.refuse(w, t, http.StatusBadRequest, CodeInvalidRequest, err.Error())
		return
	}
	t.rc.Model, t.effort = req.Model, contract.Effort(req.Effort)
	if IsContributorModel(t.rc.Model) {
		s.refuse(w, t, http.StatusForbidden, CodeContributorRefused, "shim: contributor-tier models are refused")
		return
	}
	if p == wire.Messages && !req.HasMaxTokens {
		// As the Messages API itself: an SDK client learns it here, not
		// from whichever upstream a plan picks.
		s.refuse(w, t, http.StatusBadRequest, CodeInvalidRequest, "max_tokens: Field required")
		return
	}
	t.req = req
	t.rc.Stream = req.Stream
	header := r.Header.Values(HeaderConversation)
	if len(header) > 1 {
		s.refuse(w, t, http.StatusBadRequest, CodeInvalidRequest, "shim: "+HeaderConversation+" is given more than once")
		return
	}
	if len(header) == 1 {
		if err := contract.CheckConversation(HeaderConversation, header[0]); err != nil {
			s.refuse(w, t, http.StatusBadRequest, CodeInvalidRequest, "shim: "+contract.AsError(err).Message)
			return
		}
	}
	t.key = conversationKey(r.Header.Get(HeaderConversation), req)
	t.conv = conversationIDOf(t.key, caller, req)
	t.rc.ConversationID = t.conv
	// The guardrails act before anything else reads the text (rules, an
	// embedder, the gateway): a blocked kind refuses here, before any
	// reservation or upstream call; a redacted request goes on in place
	// of the client's.
	if req, ok = s.guardRequest(w, t, p); !ok {
		return
	}
	t.req = req

	if p == wire.Embeddings {
		// No rule applies to an embedding: it is forwarded with its receipt.
		w.Header().Set(HeaderConversation, t.conv)
		if s.cfg.Offline {
			s.refuse(w, t, http.StatusServiceUnavailable, CodeOffline, "shim: offline mode: no upstream calls")
			return
		}
		s.forward(w, t, p, req.Body())
		return
	}
	ctx := r.Context()
	rs, err := s.ruleset(ctx, s.Scope(caller).Slot(), false)
	if err != nil {
		s.fail(w, t, w.Header().Clone(), false, err)
		return
	}
	mode := modeLive
	if s.cfg.Offline {
		mode = modeOffline
	}
	ev := s.evaluate(ctx, rs, caller, req, mode)
	pl, err := s.act(ctx, s.Scope(caller).Slot(), req, t.conv, &ev, true)
	if err != nil {
		s.fail(w, t, w.Header().Clone(), false, err)
		return
	}
	t.record(ev, pl)
	w.Header().Set(HeaderConversation, t.conv)

	if pl.direct != nil {
		s.answer(w, t, p, pl.direct)
		return
	}
	if s.cfg.Offline {
		s.refuse(w, t, http.StatusServiceUnavailable, CodeOffline, "shim: offline mode: no upstream calls")
		return
	}
	forwarded := req.Body()
	if pl.shim != "" {
		if forwarded, err = forwarded.Inject(p, pl.shim); err != nil {
			s.refuse(w, t, http.StatusBadRequest, CodeInvalidRequest, err.Error())
			return
		}
	}
	s.forward(w, t, p, forwarded)
}

// record copies an evaluation and its plan into the receipt.
func (t *turn) record(ev evaluation, pl plan) {
	t.rc.Evaluated = ev.Evaluated
	t.rc.Fired = append(t.rc.Fired, ev.Fired...)
	t.rc.Skipped = append(append(t.rc.Skipped, ev.Skipped...), pl.Skipped...)
	t.rc.Shimmed = append(t.rc.Shimmed, pl.Shimmed...)
	t.rc.MissingRefs = pl.Missing
}

func (t *turn) overhead() int64 { return time.Since(t.start).Microseconds() }

// headers sets the headers of an answer the shim makes itself (a direct
// answer, a refusal): the receipt, the overhead, and the receipt id as the
// request id the protocol's SDK reads.
func (t *turn) headers(w http.ResponseWriter) {
	w.Header().Set(HeaderReceipt, t.rc.ID)
	w.Header().Set(wire.RequestIDHeader(t.rc.Protocol), t.rc.ID)
	t.rc.OverheadMicros = t.overhead()
	w.Header().Set(HeaderOverhead, strconv.FormatInt(t.rc.OverheadMicros, 10))
}

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

// answer writes a respond_directly provision's answer in protocol p.
func (s *Service) answer(w http.ResponseWriter, t *turn, p wire.Protocol, c *compiled) {
	t.rc.Decision = DecisionDirect
	d := wire.Direct{ID: strings.TrimPrefix(t.rc.ID, contract.PrefixReceipt+"_"), Model: t.req.Model,
		Text: c.p.Response.Text, StopReason: c.p.Response.StopReason, Created: s.now().Unix(),
		IncludeUsage: p == wire.ChatCompletions && t.req.Stream && t.req.IncludeUsage}
	h := sha256.New()
	t.headers(w)
	if t.req.Stream {
		hdr := w.Header()
		hdr.Set("Content-Type", "text/event-stream")
		hdr.Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		fl, _ := w.(http.Flusher)
		evs := wire.DirectEvents(p, d)
		if len(evs) == 0 {
			t.rc.ResponseSHA256 = sum(h)
			s.finish(t)
			return
		}
		for _, ev := range evs {
			h.Write(ev)
		}
		t.rc.ResponseSHA256 = sum(h)
		send := func(ev []byte) bool {
			if _, err := w.Write(ev); err != nil {
				return false
			}
			if fl != nil {
				fl.Flush()
			}
			return true
		}
		ok := true
		for _, ev := range evs[:len(evs)-1] {
			if ok = send(ev); !ok {
				break
			}
		}
		// The last event ends the stream for the client: it goes out only
		// once the receipt and its audit record are stored, so a client
		// never holds a finished stream whose receipt is missing.
		if !s.finish(t) {
			abort(w, p, http.StatusServiceUnavailable, CodeReceiptNotRecorded, "the receipt of this turn could not be stored")
		} else if ok {
			send(evs[len(evs)-1])
		}
		return
	}
	before := w.Header().Clone()
	body := wire.DirectJSON(p, d)
	h.Write(body)
	t.rc.ResponseSHA256 = sum(h)
	if !s.finish(t) {
		s.unrecorded(w, t, before, false)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func sum(h hash.Hash) string { return "sha256:" + hex.EncodeToString(h.Sum(nil)) }

// forward sends body upstream through the one forwarder, the gateway:
// along the caller's plan (shim.routes), or the Open plan of the
// ungoverned pass-through (shim.upstreams). Without either, nothing can be
// forwarded.
func (s *Service) forward(w http.ResponseWriter, t *turn, p wire.Protocol, body wire.Body) {
	if s.cfg.Gateway == nil {
		t.rc.Upstream = p.Provider()
		s.refuse(w, t, http.StatusServiceUnavailable, codeNoUpstream, "shim: no "+p.Provider()+" upstream is configured")
		return
	}
	s.forwardPlan(w, t, p, body)
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

// observed is the turn as an Observer sees it.
func (t *turn) observed() Turn {
	return Turn{Caller: t.caller, Conversation: t.conv, Project: t.r.Header.Get(HeaderProject), Request: t.req, Receipt: t.rc}
}

// conversationKey is the name a request gives its conversation, in order
// of precedence: the X-Caduceus-Conversation header; on the OpenAI
// protocols metadata.conversation, metadata.session_key, then user; on the
// Anthropic protocol metadata.user_id. Empty when it names none (or a
// fallback is not a usable name).
func conversationKey(header string, req *wire.Request) string {
	if header != "" {
		return header
	}
	if req == nil || len(req.Raw) == 0 {
		return ""
	}
	for _, name := range wire.ConversationNames(req.Protocol, req.Raw) {
		if contract.CheckConversation("", name) == nil {
			return name
		}
	}
	return ""
}

// conversationID is the conv_ id of the conversation a request belongs to:
// contract.ConversationFor of its conversationKey in the caller's tenant,
// else "conv_" and a digest of the tenant, subject, protocol, system text
// and first user message — stable across the turns of one conversation.
func conversationID(header string, caller contract.Caller, req *wire.Request) string {
	return conversationIDOf(conversationKey(header, req), caller, req)
}

// conversationIDOf is conversationID of the request's conversationKey.
func conversationIDOf(key string, caller contract.Caller, req *wire.Request) string {
	if key != "" {
		return contract.ConversationFor(caller.Identity.TenantSlot, key)
	}
	h := sha256.New()
	var buf [1024]byte // parts go through it: []byte(part) would copy a long prompt
	for _, part := range []string{string(caller.Identity.TenantSlot), caller.Identity.Subject, string(req.Protocol), req.System, firstUserText(req)} {
		for len(part) > 0 {
			n := copy(buf[:], part)
			h.Write(buf[:n])
			part = part[n:]
		}
		h.Write([]byte{0})
	}
	return "conv_" + hex.EncodeToString(h.Sum(nil))[:32]
}

func firstUserText(req *wire.Request) string {
	for _, m := range req.Messages {
		if m.Role == "user" && !m.ToolResult {
			return m.Text
		}
	}
	return ""
}
