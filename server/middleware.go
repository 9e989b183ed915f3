package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/internal/telemetry"
)

// statusWriter records the status and whether anything was written, and
// passes Flush through so streaming responses stay unbuffered.
type statusWriter struct {
	http.ResponseWriter
	status  int
	written bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.written {
		w.status, w.written = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.written {
		w.status, w.written = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		w.written = true
		if w.status == 0 {
			w.status = http.StatusOK
		}
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// StatusOf is the status a handler's w has answered with so far (0: none
// yet), for a handler that passes the writing to another handler.
func StatusOf(w http.ResponseWriter) int {
	if sw, ok := w.(*statusWriter); ok {
		return sw.status
	}
	return 0
}

var (
	errNavigation = &contract.Error{Kind: contract.KindDeny, Code: "browser_refused", Message: "browser navigations are refused: call the API with a key"}
	errCookieOnly = &contract.Error{Kind: contract.KindUnauthenticated, Code: "cookie_refused", Message: "cookies are not credentials here: send Authorization: Bearer or x-api-key"}
	errNoKey      = &contract.Error{Kind: contract.KindUnauthenticated, Code: "missing_key", Message: "an API key is required (Authorization: Bearer or x-api-key)"}
)

// TokenFrom returns the API key presented by r: Authorization: Bearer first,
// then x-api-key.
func TokenFrom(r *http.Request) string {
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
	}
	return strings.TrimSpace(r.Header.Get("x-api-key"))
}

// authenticate resolves the caller of r. When the key id is known but the
// key is refused, the caller is returned too (for the audit record).
func (s *Server) authenticate(r *http.Request) (contract.Caller, error) {
	navigate := strings.EqualFold(strings.TrimSpace(r.Header.Get("Sec-Fetch-Mode")), "navigate")
	tok := TokenFrom(r)
	if tok == "" {
		switch {
		case navigate:
			return contract.Caller{}, errNavigation
		case r.Header.Get("Cookie") != "":
			return contract.Caller{}, errCookieOnly
		}
		return contract.Caller{}, errNoKey
	}
	caller, err := s.cfg.Auth.Verify(r.Context(), tok)
	if err == nil && navigate {
		// A browser navigation carrying a key is still refused, and recorded
		// under the key's tenant.
		return caller, errNavigation
	}
	return caller, err
}

// handler is the http.Handler the mux serves for rt: rt.Raw as it is, else
// rt.Handler inside the wrapper.
func (s *Server) handler(rt Route) http.Handler {
	if rt.Raw != nil {
		if rt.Gate != "" {
			return rawSpan(rt)
		}
		return rt.Raw
	}
	return s.serve(rt, rt.Handler)
}

// rawSpan serves a gate's Raw route (the relay's webhooks and gateway
// WebSockets) in a request span of its own when serve traces: the gate and
// the route (the route authenticates itself; its status is its own).
func rawSpan(rt Route) http.Handler {
	path := rt.Pattern
	if _, p, ok := strings.Cut(path, " "); ok {
		path = p
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r, span := telemetry.StartRequest(r, rt.Pattern)
		if span == nil {
			rt.Raw.ServeHTTP(w, r)
			return
		}
		defer span.End()
		span.SetAttributes(telemetry.KeyGate.String(rt.Gate), telemetry.KeyMethod.String(r.Method), telemetry.KeyHTTPRoute.String(path))
		rt.Raw.ServeHTTP(w, r)
	})
}

// serve turns a HandlerFunc into the http.Handler of rt, the one wrapper
// every route of the server but the Raw ones goes through: authenticate,
// check the scope, check the input, run, answer errors (as problems or in
// the LLM protocol's envelope), write one audit record, count the request.
func (s *Server) serve(rt Route, h HandlerFunc) http.Handler {
	maxBody, check, answer := s.cfg.MaxBodyBytes, checkInput, WriteProblem
	if rt.Envelope != nil {
		maxBody, check, answer = s.cfg.MaxLLMBodyBytes, checkLLMHeaders, envelopeWriter(rt.Envelope)
	}
	if rt.MaxBody > 0 {
		maxBody = rt.MaxBody
	}
	idempotent := keyed(rt)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		r, span := telemetry.StartRequest(r, rt.Pattern) // nil: tracing is off
		sw := &statusWriter{ResponseWriter: w}
		c := &Call{Resource: r.URL.Path}
		if rt.Resource != "" {
			c.Resource = rt.Resource
		}
		var caller contract.Caller
		var err error
		if !rt.Public {
			caller, err = s.authenticate(r)
			c.Caller = caller
		}
		if err == nil && rt.Scope != "" {
			err = caller.RequireScope("this route", rt.Scope)
		}
		if err == nil {
			r.Body = http.MaxBytesReader(sw, r.Body, maxBody)
			err = check(r)
		}
		if err == nil && !rt.Public {
			caller.Trace, err = traceOf(r)
			c.Caller = caller
			if span != nil && caller.Trace.Conversation != "" {
				// Set now: a gate that records the request under a
				// conversation of its own (the shim's conv_ id) names it later.
				span.SetAttributes(telemetry.KeyConversation.String(caller.Trace.Conversation))
			}
		}
		var held *heldKey
		var replayed *storedAnswer
		if err == nil && idempotent {
			held, replayed, err = s.claimKey(r, caller)
		}
		switch {
		case err != nil:
		case replayed != nil:
			replay(sw, replayed)
			c.Resource, c.Reason = replayed.Resource, "idempotent_replay"
			c.Outcome = OutcomeOfStatus(replayed.Status)
			c.Payload = replayRecord{IdempotencyKey: r.Header.Get(HeaderIdempotencyKey), Replay: true, Status: replayed.Status}
		default:
			if !rt.Public {
				r = r.WithContext(contract.WithCaller(r.Context(), caller))
			}
			if held != nil {
				held.buf = &heldWriter{w: w}
				sw.ResponseWriter = held.buf
				defer s.abandon(held)
			}
			err = h(sw, r, c)
		}
		noteCaller(r.Context(), caller) // its request log line (requestlog.go)
		outcome := s.conclude(sw, r, c, err, answer)
		if held != nil {
			s.finish(r.Context(), held, c, w)
		}
		if caller.Identity.TenantSlot != "" && !c.Audited {
			s.record(r.Context(), caller, rt.Action, c, outcome)
		}
		if err != nil && !rt.Public && caller.Identity.TenantSlot == "" {
			s.log.Info("refused unauthenticated request", "path", r.URL.Path, "reason", s.classify(err).Code, "remote", r.RemoteAddr)
		}
		pattern := r.Pattern
		if pattern == "" {
			pattern = "unmatched"
		}
		s.metrics.observe(pattern, string(outcome), time.Since(start))
		if span != nil {
			endRequestSpan(r, span, rt, caller, outcome, sw.status)
		}
	})
}

// conclude is a call's outcome: allowed (or the outcome the handler set
// in c) when err is nil; else the error's, answered through answer unless
// the handler already wrote, logged when internal, and named as c's
// reason unless the handler gave one.
func (s *Server) conclude(sw *statusWriter, r *http.Request, c *Call, err error, answer func(http.ResponseWriter, *http.Request, error)) contract.Outcome {
	if err == nil {
		if c.Outcome != "" {
			return c.Outcome
		}
		return contract.OutcomeAllow
	}
	if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
		err = contract.Invalidf("body_too_large", "the request body is larger than %d bytes", mbe.Limit)
	}
	e := s.classify(err)
	switch {
	case e.IsUnavailable():
		s.log.Warn("store unavailable", "route", r.Pattern, "path", r.URL.Path, "err", e.Err)
	case e.Kind == contract.KindInternal:
		s.log.Error("request failed", "route", r.Pattern, "path", r.URL.Path, "err", e.Err)
	}
	if !sw.written {
		answer(sw, r, e)
	}
	if c.Reason == "" {
		c.Reason = e.Code
	}
	return e.Kind.Outcome()
}

// endRequestSpan ends a request's span with what an operator follows it by:
// the gate, the tenant, the route, the outcome, the status and the request
// id (the conversation is set when known; the shim adds the model identity).
func endRequestSpan(r *http.Request, span telemetry.Span, rt Route, caller contract.Caller, outcome contract.Outcome, status int) {
	if status == 0 {
		status = http.StatusOK
	}
	g := rt.Gate
	if g == "" {
		g = "core"
	}
	path := rt.Pattern
	if _, p, ok := strings.Cut(path, " "); ok {
		path = p
	}
	attrs := []telemetry.KeyValue{
		telemetry.KeyGate.String(g), telemetry.KeyMethod.String(r.Method), telemetry.KeyHTTPRoute.String(path),
		telemetry.KeyOutcome.String(string(outcome)), telemetry.KeyStatus.Int(status),
	}
	if caller.Identity.TenantSlot != "" {
		attrs = append(attrs, telemetry.KeyTenant.String(string(caller.Identity.TenantSlot)))
	}
	if id := RequestIDFrom(r.Context()); id != "" {
		attrs = append(attrs, telemetry.KeyRequestID.String(id))
	}
	span.SetAttributes(attrs...)
	if status >= 500 {
		telemetry.Fail(span, http.StatusText(status))
	}
	span.End()
}

// envelopeWriter answers a refusal in LLM protocol p's error envelope (the
// shape its official SDK parses), with the status a problem would have and,
// but for an internal error, X-Should-Retry: false (the SDKs' retry would be
// refused the same way). The code leads the message: not every protocol's
// envelope has a field for it. Internal errors say only "internal error",
// but for store_unavailable: 503 with its message and Retry-After, which
// the SDKs' retry honours.
func envelopeWriter(env Envelope) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		e := contract.AsError(err)
		msg := e.Message
		switch {
		case e.IsUnavailable():
			w.Header().Set("Retry-After", RetryAfterUnavailable)
		case e.Kind == contract.KindInternal:
			msg = "internal error"
		default:
			w.Header().Set("X-Should-Retry", "false")
		}
		if e.Code != "" {
			msg = e.Code + ": " + msg
		}
		env(w, r, ProblemOf(e, "").Status, e.Code, msg)
	}
}

// classify is err as the contract error a caller is answered with: an
// internal error whose cause unavailable recognises as a store that cannot
// be reached or written (Config.Unavailable: the database is down,
// restarting, or its disk is full) is contract.Unavailable's 503
// store_unavailable, never a 500 nor, for a key that could not be looked
// up, a 401.
func classify(err error, unavailable func(error) bool) *contract.Error {
	e := contract.AsError(err)
	if e != nil && e.Kind == contract.KindInternal && !e.IsUnavailable() && unavailable != nil && unavailable(err) {
		return contract.Unavailable(err)
	}
	return e
}

// classify is classify with the server's Config.Unavailable.
func (s *Server) classify(err error) *contract.Error { return classify(err, s.cfg.Unavailable) }

// traceOf is the trace a request carries: the X-Caduceus-Conversation
// header (checked: a bad one is a 400 naming it) and the route pattern.
func traceOf(r *http.Request) (contract.Trace, error) {
	t := contract.Trace{Route: r.Pattern}
	if vs := r.Header.Values(contract.HeaderConversation); len(vs) > 0 {
		if len(vs) > 1 {
			return t, contract.Invalidf("bad_conversation", "%s is given %d times; give it once", contract.HeaderConversation, len(vs))
		}
		if err := contract.CheckConversation(contract.HeaderConversation, vs[0]); err != nil {
			return t, err
		}
		t.Conversation = vs[0]
	}
	return t, nil
}

// record writes the request's audit record, detached from the request's
// cancellation. A failure to record is logged loudly; the response has
// already been decided.
func (s *Server) record(ctx context.Context, caller contract.Caller, action string, c *Call, outcome contract.Outcome) {
	e := audit.Entry{
		Outcome: contract.AuditOutcome{
			At:       contract.Timestamp(time.Now()),
			Identity: caller.Identity,
			Action:   action,
			Resource: contract.StorableText(c.Resource, 200),
			Outcome:  outcome,
			Reason:   contract.StorableText(c.Reason, 200),
		},
		Payload: c.Payload,
	}
	if caller.Trace.Conversation != "" || caller.Trace.RunID != "" {
		e.Provenance = caller.Provenance(contract.ActorUser, e.Outcome.At)
	}
	if _, err := s.cfg.Audit.Append(context.WithoutCancel(ctx), e); err != nil {
		s.log.Error("audit append failed", "action", action, "err", err)
	}
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// checkInput applies the input rule (contract.CheckJSON) to a request
// before its handler sees it, so every route refuses the same bad input the
// same way and nothing is written:
//
//   - the path, the query and every header value must be valid UTF-8
//     without NUL (400 bad_utf8 / nul_character);
//   - a GET, HEAD or DELETE takes no body (400 unexpected_body);
//   - a body labelled anything but JSON is refused (415
//     unsupported_media_type; no Content-Type at all is read as JSON: no
//     browser sends a body without one, so CSRF-able bodies are refused) and
//     a body must pass
//     contract.CheckJSON: one value, valid UTF-8, no NUL, no duplicate key,
//     at most contract.MaxJSONDepth deep (400 naming the problem).
//
// The body is read once (bounded by the wrapper's MaxBytesReader) and put
// back for the handler.
func checkInput(r *http.Request) error {
	if err := checkText("path", r.URL.Path); err != nil {
		return err
	}
	if err := checkText("query", r.URL.RawQuery); err != nil {
		return err
	}
	if q, err := url.QueryUnescape(r.URL.RawQuery); err == nil {
		if err := checkText("query", q); err != nil {
			return err
		}
	}
	for name, vs := range r.Header {
		for _, v := range vs {
			if err := checkText("header "+name, v); err != nil {
				return err
			}
		}
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	body, err := ReadBody(r)
	if err != nil {
		return err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if len(body) == 0 {
		return nil
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete:
		return contract.Invalidf("unexpected_body", "%s %s takes no request body", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !contract.IsJSONMediaType(ct) {
		return contract.Invalidf(contract.CodeUnsupportedMedia, "the body must be JSON (Content-Type: application/json), not %q", Clip(strings.ToValidUTF8(ct, "?"), 100))
	}
	return contract.CheckJSON(body)
}

// checkText refuses request text that is not valid UTF-8 or holds a NUL:
// neither can be stored as text (Postgres refuses both) nor shown.
func checkText(where, s string) error {
	if !utf8.ValidString(s) {
		return contract.Invalidf(contract.CodeBadUTF8, "the request %s is not valid UTF-8", where)
	}
	if strings.IndexByte(s, 0) >= 0 {
		return contract.Invalidf(contract.CodeNULCharacter, "the request %s holds a NUL character", where)
	}
	return nil
}

// checkLLMHeaders applies the input rule of checkInput to what an LLM route's
// headers say (path, query, headers, content type); the body is checked by
// the shim in its one read (contract.CheckJSON), and every refusal is written
// in the route's protocol.
func checkLLMHeaders(r *http.Request) error {
	body := r.Body
	r.Body = http.NoBody
	err := checkInput(r)
	r.Body = body
	if err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !contract.IsJSONMediaType(ct) {
		return contract.Invalidf(contract.CodeUnsupportedMedia, "the body must be JSON (Content-Type: application/json)")
	}
	return nil
}
