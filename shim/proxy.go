package shim

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Handler returns the http.Handler of protocol p's LLM route. Mount it at
// POST /v1/chat/completions, /v1/responses or /v1/messages (the query, e.g.
// ?beta=true, is passed upstream) behind the middleware that authenticates
// the key and puts a contract.Caller in the request context. Every request
// gets a receipt (header X-Caduceus-Receipt) and refusals answer in p's own
// error envelope.
func (s *Service) Handler(p wire.Protocol) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, p) })
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
