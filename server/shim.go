package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// The shim gate: the three LLM routes, provision and context management,
// receipts, dry-run and preview. The LLM routes answer every refusal in the
// caller's own protocol's error envelope, never as a problem.

// llmRoute serves one LLM protocol: a contributor-tier model is refused
// before anything else (before the key is even looked at), then the key is
// authenticated, then the shim runs and writes the request's receipt into
// the audit trail itself.
func (s *Server) llmRoute(p wire.Protocol) http.Handler {
	proxy := s.cfg.Shim.Handler(p)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w}
		body, err := io.ReadAll(http.MaxBytesReader(sw, r.Body, s.cfg.MaxLLMBodyBytes))
		if err != nil {
			wire.WriteError(sw, p, http.StatusRequestEntityTooLarge, "request_too_large", "the request body is too large")
			s.count(r, start, contract.OutcomeDeny)
			return
		}
		if shim.IsContributorModel(wire.PeekModel(body)) {
			wire.WriteError(sw, p, http.StatusForbidden, shim.CodeContributorRefused, "contributor-tier models are refused")
			s.count(r, start, contract.OutcomeDeny)
			return
		}
		caller, err := s.authenticate(r)
		if err != nil {
			e := contract.AsError(err)
			wire.WriteError(sw, p, e.Kind.HTTPStatus(), e.Code, e.Message)
			if caller.Identity.TenantSlot != "" {
				s.record(r.Context(), caller, "shim.proxy", &Call{Resource: string(p), Reason: e.Code}, e.Kind.Outcome())
			}
			s.count(r, start, e.Kind.Outcome())
			return
		}
		if err := checkLLMInput(r, body); err != nil {
			e := contract.AsError(err)
			status := ProblemOf(e, "").Status
			// The code leads the message: not every protocol's envelope
			// has a field for it.
			wire.WriteError(sw, p, status, e.Code, e.Code+": "+e.Message)
			s.record(r.Context(), caller, "shim.proxy", &Call{Resource: string(p), Reason: e.Code}, e.Kind.Outcome())
			s.count(r, start, e.Kind.Outcome())
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r = r.WithContext(contract.WithCaller(r.Context(), caller))
		proxy.ServeHTTP(sw, r)
		s.count(r, start, outcomeOfStatus(sw.status))
	})
}

// count adds a request to the route metrics.
func (s *Server) count(r *http.Request, start time.Time, outcome contract.Outcome) {
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	s.metrics.requests.WithLabelValues(route, string(outcome)).Inc()
	s.metrics.latency.WithLabelValues(route, string(outcome)).Observe(time.Since(start).Seconds())
}

func outcomeOfStatus(status int) contract.Outcome {
	switch {
	case status == 0 || status < 400:
		return contract.OutcomeAllow
	case status == http.StatusNotFound:
		return contract.OutcomeNotFound
	case status == http.StatusConflict:
		return contract.OutcomeConflict
	default:
		return contract.OutcomeDeny
	}
}

func harnessOf(r *http.Request) string { return r.Header.Get(shim.HeaderHarness) }

// ifVersion reads If-Match as a provision or context version.
func ifVersion(r *http.Request) (int64, error) {
	rev, err := ifMatch(r)
	return int64(rev), err
}

// versioned is a CAS-versioned shim resource (provisions, context entries)
// as the HTTP layer manages it: list, get, create, update and delete, each a
// call of the shim Service; writes carry the harness attestation header and
// updates and deletes an If-Match version.
type versioned[T any] struct {
	noun    string // "provision", "context"
	param   string // the path wildcard: "id", "ref"
	key     func(T) string
	version func(T) int64
	list    func(context.Context, contract.Caller) ([]T, error)
	get     func(context.Context, contract.Caller, string) (T, error)
	create  func(context.Context, contract.Caller, string, []byte) (T, error)
	update  func(context.Context, contract.Caller, string, string, int64, []byte) (T, error)
	delete  func(context.Context, contract.Caller, string, string, int64) error
}

func (v versioned[T]) listHandler(field string) HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *Call) error {
		c.Resource = field
		list, err := v.list(r.Context(), c.Caller)
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, map[string]any{field: list})
	}
}

func (v versioned[T]) getHandler() HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *Call) error {
		id := r.PathValue(v.param)
		c.Resource = v.noun + "/" + clip(id, 100)
		x, err := v.get(r.Context(), c.Caller, id)
		if err != nil {
			return err
		}
		return writeVersioned(w, http.StatusOK, v.version(x), x)
	}
}

func (v versioned[T]) createHandler() HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *Call) error {
		body, err := readBody(r)
		if err != nil {
			return err
		}
		x, err := v.create(r.Context(), c.Caller, harnessOf(r), body)
		if err != nil {
			return err
		}
		c.Resource = v.noun + "/" + clip(v.key(x), 100)
		return writeVersioned(w, http.StatusCreated, v.version(x), x)
	}
}

func (v versioned[T]) updateHandler() HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *Call) error {
		id := r.PathValue(v.param)
		c.Resource = v.noun + "/" + clip(id, 100)
		ver, err := ifVersion(r)
		if err != nil {
			return err
		}
		body, err := readBody(r)
		if err != nil {
			return err
		}
		x, err := v.update(r.Context(), c.Caller, harnessOf(r), id, ver, body)
		if err != nil {
			return err
		}
		return writeVersioned(w, http.StatusOK, v.version(x), x)
	}
}

func (v versioned[T]) deleteHandler() HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *Call) error {
		id := r.PathValue(v.param)
		c.Resource = v.noun + "/" + clip(id, 100)
		ver, err := ifVersion(r)
		if err != nil {
			return err
		}
		if err := v.delete(r.Context(), c.Caller, harnessOf(r), id, ver); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func (s *Server) shimProvisions() versioned[shim.Provision] {
	svc := s.cfg.Shim
	return versioned[shim.Provision]{
		noun: "provision", param: "id",
		key:     func(p shim.Provision) string { return p.ID },
		version: func(p shim.Provision) int64 { return p.Version },
		list:    svc.ListProvisions, get: svc.GetProvision, create: svc.CreateProvision,
		update: svc.UpdateProvision, delete: svc.DeleteProvision,
	}
}

func (s *Server) shimContext() versioned[shim.ContextEntry] {
	svc := s.cfg.Shim
	return versioned[shim.ContextEntry]{
		noun: "context", param: "ref",
		key:     func(e shim.ContextEntry) string { return e.Ref },
		version: func(e shim.ContextEntry) int64 { return e.Version },
		list:    svc.ListContext, get: svc.GetContext, create: svc.CreateContext,
		update: svc.UpdateContext, delete: svc.DeleteContext,
	}
}

func writeVersioned(w http.ResponseWriter, status int, version int64, v any) error {
	w.Header().Set("ETag", strconv.FormatInt(version, 10))
	return WriteJSON(w, status, v)
}

func (s *Server) shimReceipts(w http.ResponseWriter, r *http.Request, c *Call) error {
	limit, err := queryLimit(r, 50, 1000)
	if err != nil {
		return err
	}
	c.Resource = "receipts"
	list, err := s.cfg.Shim.ListReceipts(r.Context(), c.Caller, limit, r.URL.Query().Get("before"))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"receipts": list})
}

// protocolOf reads ?protocol= (chat, responses or messages; default chat).
func protocolOf(r *http.Request) (wire.Protocol, error) {
	v := r.URL.Query().Get("protocol")
	if v == "" {
		v = "chat"
	}
	p, err := wire.ParseProtocol(v)
	if err != nil {
		return "", contract.FieldError("protocol", "bad_protocol", "protocol %q: want chat, responses or messages", v)
	}
	return p, nil
}

func (s *Server) shimDryRun(w http.ResponseWriter, r *http.Request, c *Call) error {
	p, err := protocolOf(r)
	if err != nil {
		return err
	}
	body, err := readBody(r)
	if err != nil {
		return err
	}
	c.Resource = "dry-run/" + string(p)
	res, err := s.cfg.Shim.DryRun(r.Context(), c.Caller, p, body)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, res)
}

// shimPreview is public: it evaluates against builtin rules only, persists
// nothing and calls no provider. Its body is bounded like any other.
func (s *Server) shimPreview(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	err := func() error {
		p, err := protocolOf(r)
		if err != nil {
			return err
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				return contract.Invalidf("body_too_large", "the request body is larger than %d bytes", mbe.Limit)
			}
			return contract.Invalidf("bad_body", "cannot read the request body")
		}
		if err := checkLLMInput(r, body); err != nil {
			return err
		}
		res, err := s.cfg.Shim.Preview(r.Context(), p, body)
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, res)
	}()
	if err != nil {
		WriteProblem(w, r, err)
		s.count(r, start, contract.KindOf(err).Outcome())
		return
	}
	s.count(r, start, contract.OutcomeAllow)
}

var shimPreviewSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["request"],
"properties":{"protocol":{"type":"string","enum":["chat","responses","messages"],"description":"the wire protocol of request (default chat)"},
"request":{"type":"object","description":"an LLM request body in that protocol"}}}`)

func (s *Server) shimTools() []Tool {
	return []Tool{{
		Name:        "shim_preview",
		Description: "Preview what the shim would do with an LLM request under the builtin rules: fired and skipped provisions, the decision and the request as it would be forwarded. Persists nothing and calls no provider.",
		Scope:       contract.ScopeRoute,
		InputSchema: shimPreviewSchema,
		Call: func(ctx context.Context, c contract.Caller, args json.RawMessage) (any, error) {
			var in struct {
				Protocol string          `json:"protocol"`
				Request  json.RawMessage `json:"request"`
			}
			if err := decodeStrict(args, &in); err != nil {
				return nil, err
			}
			p, err := wire.ParseProtocol(strings.TrimSpace(orDefault(in.Protocol, "chat")))
			if err != nil {
				return nil, contract.FieldError("protocol", "bad_protocol", "protocol %q: want chat, responses or messages", in.Protocol)
			}
			return s.cfg.Shim.Preview(ctx, p, in.Request)
		},
	}}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// projectOf is the project tag of a memory read: ?project=, else the
// X-Caduceus-Project header; empty means every project.
func projectOf(r *http.Request) string {
	if p := r.URL.Query().Get("project"); p != "" {
		return p
	}
	return r.Header.Get("X-Caduceus-Project")
}

func (s *Server) shimMemory(w http.ResponseWriter, r *http.Request, c *Call) error {
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	c.Resource = "memory"
	list, err := s.cfg.ShimMemory.Entities(r.Context(), c.Caller, projectOf(r), limit)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"entities": list})
}

func (s *Server) shimOutcomes(w http.ResponseWriter, r *http.Request, c *Call) error {
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	c.Resource = "outcomes"
	list, err := s.cfg.ShimMemory.Outcomes(r.Context(), c.Caller, limit)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, map[string]any{"outcomes": list})
}

func (s *Server) shimInsights(w http.ResponseWriter, r *http.Request, c *Call) error {
	c.Resource = "insights"
	ins, err := s.cfg.ShimMemory.Insights(r.Context(), c.Caller, projectOf(r))
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, ins)
}

// shimSyncHandler runs a governed sync from {"source": URL}; the server only
// fetches from the configured allowlist (shim.sync_allow) and never reads
// directories.
func (s *Server) shimSyncHandler(w http.ResponseWriter, r *http.Request, c *Call) error {
	body, err := readBody(r)
	if err != nil {
		return err
	}
	var in struct {
		Source string `json:"source"`
	}
	if err := decodeStrict(body, &in); err != nil {
		return err
	}
	if in.Source == "" {
		return contract.FieldError("source", "missing_field", "source is required: the URL of a provision bundle or handshake+https://host")
	}
	c.Resource = "sync/" + clip(in.Source, 150)
	rep, err := s.cfg.ShimSync.Sync(r.Context(), c.Caller, harnessOf(r), in.Source)
	if err != nil {
		return err
	}
	c.Audited = rep.AuditID != "" // the sync recorded its report
	return WriteJSON(w, http.StatusOK, rep)
}

// checkLLMInput applies the input rule of checkInput to an LLM route, whose
// body was read already and whose refusals are written in its protocol.
func checkLLMInput(r *http.Request, body []byte) error {
	r.Body = http.NoBody
	if err := checkInput(r); err != nil {
		return err
	}
	if ct := r.Header.Get("Content-Type"); ct != "" && !contract.IsJSONMediaType(ct) {
		return contract.Invalidf(contract.CodeUnsupportedMedia, "the body must be JSON (Content-Type: application/json)")
	}
	return contract.CheckJSON(body)
}
