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
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Call is what the wrapper hands a handler: the authenticated caller and the
// parts of the audit record the handler fills in.
type Call struct {
	Caller contract.Caller
	// Resource names what the request touched ("key/ab12..."); default: the path.
	Resource string
	// Reason is recorded with the outcome (max 200 characters).
	Reason string
	// Payload is an optional domain payload for the audit record.
	Payload any
	// Audited is set by handlers whose domain wrote the audit record itself
	// (in the same transaction as its change); the wrapper then writes none.
	Audited bool
	// Outcome overrides the recorded outcome of a request that succeeded at
	// the HTTP level but was refused in the domain (a rejected decision).
	Outcome contract.Outcome
}

// HandlerFunc is a route handler. It writes its response on success and
// returns an error otherwise; the wrapper turns the error into a problem
// (unless the handler already wrote) and records the outcome.
type HandlerFunc func(w http.ResponseWriter, r *http.Request, c *Call) error

// Mount is a route the command adds to the server (the executor gate's
// answer when it is not configured): a ServeMux pattern, the audit action
// and the scope it needs; it goes through the wrapper like every keyed
// route.
type Mount struct {
	Pattern string
	Action  string         // "noun.verb"
	Scope   contract.Scope // "" = any valid key
	Handler HandlerFunc
}

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

// route is how the wrapper serves one route.
type route struct {
	action string         // the audit action, "noun.verb"
	scope  contract.Scope // "" = any valid key
	// public routes take no key and write no audit record (POST
	// /api/preview): anyone may call them.
	public bool
	// protocol is set on the LLM routes: every refusal is answered in that
	// protocol's error envelope instead of a problem, the body is bounded by
	// MaxLLMBodyBytes and left unread for the handler (the shim reads it
	// once and checks it), and the audit resource is the protocol.
	protocol wire.Protocol
	// resource is the audit resource of a refusal before the handler runs
	// (default: the protocol, else the path).
	resource string
}

// wrap is the wrapper of an authenticated management route: refusals are
// problems.
func (s *Server) wrap(action string, scope contract.Scope, h HandlerFunc) http.Handler {
	return s.serve(route{action: action, scope: scope}, h)
}

// serve turns a HandlerFunc into the http.Handler of rt, the one wrapper
// every route of the server but the relay's goes through: authenticate,
// check the scope, check the input, run, answer errors (as problems or in
// the LLM protocol's envelope), write one audit record, count the request.
func (s *Server) serve(rt route, h HandlerFunc) http.Handler {
	maxBody, check, answer := s.cfg.MaxBodyBytes, checkInput, WriteProblem
	if rt.protocol != "" {
		maxBody, check, answer = s.cfg.MaxLLMBodyBytes, checkLLMHeaders, envelopeWriter(rt.protocol)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		c := &Call{Resource: r.URL.Path}
		switch {
		case rt.resource != "":
			c.Resource = rt.resource
		case rt.protocol != "":
			c.Resource = string(rt.protocol)
		}
		var caller contract.Caller
		var err error
		if !rt.public {
			caller, err = s.authenticate(r)
			c.Caller = caller
		}
		if err == nil && rt.scope != "" {
			err = caller.RequireScope("this route", rt.scope)
		}
		if err == nil {
			r.Body = http.MaxBytesReader(sw, r.Body, maxBody)
			err = check(r)
		}
		if err == nil && !rt.public {
			caller.Trace, err = traceOf(r)
			c.Caller = caller
		}
		if err == nil {
			if !rt.public {
				r = r.WithContext(contract.WithCaller(r.Context(), caller))
			}
			err = h(sw, r, c)
		}
		outcome := contract.OutcomeAllow
		if err != nil {
			if mbe, ok := errors.AsType[*http.MaxBytesError](err); ok {
				err = contract.Invalidf("body_too_large", "the request body is larger than %d bytes", mbe.Limit)
			}
			e := contract.AsError(err)
			if e.Kind == contract.KindInternal {
				s.log.Error("request failed", "route", r.Pattern, "path", r.URL.Path, "err", e.Err)
			}
			if !sw.written {
				answer(sw, r, e)
			}
			outcome = e.Kind.Outcome()
			if c.Reason == "" {
				c.Reason = e.Code
			}
		} else if c.Outcome != "" {
			outcome = c.Outcome
		}
		if caller.Identity.TenantSlot != "" && !c.Audited {
			s.record(r.Context(), caller, rt.action, c, outcome)
		}
		if err != nil && !rt.public && caller.Identity.TenantSlot == "" {
			s.log.Info("refused unauthenticated request", "path", r.URL.Path, "reason", contract.AsError(err).Code, "remote", r.RemoteAddr)
		}
		pattern := r.Pattern
		if pattern == "" {
			pattern = "unmatched"
		}
		s.metrics.requests.WithLabelValues(pattern, string(outcome)).Inc()
		s.metrics.latency.WithLabelValues(pattern, string(outcome)).Observe(time.Since(start).Seconds())
	})
}

// envelopeWriter answers a refusal in LLM protocol p's error envelope (the
// shape its official SDK parses), with the status a problem would have and,
// but for an internal error, X-Should-Retry: false (the SDKs' retry would be
// refused the same way). The code leads the message: not every protocol's
// envelope has a field for it. Internal errors say only "internal error".
func envelopeWriter(p wire.Protocol) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		e := contract.AsError(err)
		msg := e.Message
		if e.Kind == contract.KindInternal {
			msg = "internal error"
		} else {
			w.Header().Set("X-Should-Retry", "false")
		}
		if e.Code != "" {
			msg = e.Code + ": " + msg
		}
		wire.WriteError(w, p, ProblemOf(e, "").Status, e.Code, msg)
	}
}

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
			Resource: clip(strings.ToValidUTF8(c.Resource, "\uFFFD"), 200),
			Outcome:  outcome,
			Reason:   clip(strings.ToValidUTF8(c.Reason, "\uFFFD"), 200),
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

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// readBody reads a request body (bounded by the wrapper's MaxBytesReader).
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, err
		}
		return nil, contract.Invalidf("bad_body", "cannot read the request body: %v", err)
	}
	return b, nil
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
	body, err := readBody(r)
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
		return contract.Invalidf(contract.CodeUnsupportedMedia, "the body must be JSON (Content-Type: application/json), not %q", clip(strings.ToValidUTF8(ct, "?"), 100))
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
