package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// The shim gate: the three LLM routes, provision and context management,
// receipts, dry-run and preview. The LLM routes answer every refusal in the
// caller's own protocol's error envelope, never as a problem.

// llmRoute serves one LLM protocol through the wrapper: the key is
// authenticated from the headers before a byte of the body is read (an
// unauthenticated client is answered and its connection closed without
// waiting for its body), and every refusal is in the protocol's envelope.
// The shim then reads the body once, under the server's body deadline and
// the LLM body bound, checks the route scope, refuses a contributor-tier
// model before anything else is done with it, and writes the request's
// receipt into the audit trail itself.
func (s *Server) llmRoute(p wire.Protocol) http.Handler {
	proxy := s.cfg.Shim.Handler(p)
	return s.serve(route{action: "shim.proxy", protocol: p}, func(w http.ResponseWriter, r *http.Request, c *Call) error {
		c.Audited = true // the receipt
		proxy.ServeHTTP(w, r)
		if sw, ok := w.(*statusWriter); ok {
			c.Outcome = outcomeOfStatus(sw.status)
		}
		return nil
	})
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

func harnessOf(r *http.Request) string { return shim.HarnessOf(r.Header) }

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
		return answerOK(w, map[string]any{field: list}, err)
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

// target reads what an update or delete names: the path's id (the call's
// resource) and the If-Match version.
func (v versioned[T]) target(r *http.Request, c *Call) (id string, version int64, err error) {
	id = r.PathValue(v.param)
	c.Resource = v.noun + "/" + clip(id, 100)
	version, err = ifVersion(r)
	return id, version, err
}

func (v versioned[T]) updateHandler() HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *Call) error {
		id, ver, err := v.target(r, c)
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
		id, ver, err := v.target(r, c)
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
	return answerOK(w, map[string]any{"receipts": list}, err)
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

// requestOf reads the LLM request a dry run or preview evaluates: the body
// and its ?protocol=.
func requestOf(r *http.Request) (wire.Protocol, []byte, error) {
	p, err := protocolOf(r)
	if err != nil {
		return "", nil, err
	}
	body, err := readBody(r)
	return p, body, err
}

func (s *Server) shimDryRun(w http.ResponseWriter, r *http.Request, c *Call) error {
	p, body, err := requestOf(r)
	if err != nil {
		return err
	}
	c.Resource = "dry-run/" + string(p)
	res, err := s.cfg.Shim.DryRun(r.Context(), c.Caller, p, body)
	return answerOK(w, res, err)
}

// shimPreview is public (no key, no audit record): it evaluates against
// builtin rules only, persists nothing and calls no provider. Its body is
// bounded and checked like any other.
func (s *Server) shimPreview(w http.ResponseWriter, r *http.Request, c *Call) error {
	p, body, err := requestOf(r)
	if err != nil {
		return err
	}
	res, err := s.cfg.Shim.Preview(r.Context(), p, body)
	return answerOK(w, res, err)
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
	return answerOK(w, map[string]any{"entities": list}, err)
}

func (s *Server) shimOutcomes(w http.ResponseWriter, r *http.Request, c *Call) error {
	limit, err := queryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	c.Resource = "outcomes"
	list, err := s.cfg.ShimMemory.Outcomes(r.Context(), c.Caller, limit)
	return answerOK(w, map[string]any{"outcomes": list}, err)
}

func (s *Server) shimInsights(w http.ResponseWriter, r *http.Request, c *Call) error {
	c.Resource = "insights"
	ins, err := s.cfg.ShimMemory.Insights(r.Context(), c.Caller, projectOf(r))
	return answerOK(w, ins, err)
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
