// Package shimgate is the shim gate's module (package gate): the three LLM
// routes, provision and context management, receipts, dry-run and preview,
// memory, sync, spend and models, and the shim's MCP tool. The LLM routes
// answer every refusal in the caller's own protocol's error envelope, never
// as a problem.
package shimgate

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/memory"
	"github.com/caduceus-dev/caduceus/shim/provsync"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Config is what the shim gate serves: the shim Service, and the parts
// that add routes when they are there.
type Config struct {
	Service *shim.Service
	// Memory serves entity memory, rule outcomes and insights (nil: not
	// served).
	Memory *memory.Memory
	// Sync serves POST /v1/sync (nil: not served).
	Sync *provsync.Syncer
	// Spend serves GET /v1/spend; nil without gateway routes.
	Spend SpendReader
	// Gateway serves GET /v1/models and forwards count_tokens; nil without
	// gateway routes (count_tokens is then estimated).
	Gateway *gateway.Gateway
	// Jobs are the gate's background work (the gateway's stale sweep).
	Jobs []gate.Job
	// AllowedOrigins are the browser origins the provider routes answer
	// (shim.cors.allowed_origins; CORS): none by default.
	AllowedOrigins []string
	// Receipts, when set, gives the console its receipts page (Pages).
	Receipts ReceiptLister
	// MaxRequestBytes bounds the body of a provider route's request
	// (shim.max_request_bytes; 0: the server's bound for provider routes).
	MaxRequestBytes int64
}

// Gate is the shim gate.
type Gate struct{ cfg Config }

// New returns the shim gate of cfg.
func New(cfg Config) *Gate { return &Gate{cfg: cfg} }

var _ gate.Gate = (*Gate)(nil)

// Name implements gate.Gate.
func (g *Gate) Name() string { return "shim" }

// Jobs implements gate.Gate.
func (g *Gate) Jobs() []gate.Job { return g.cfg.Jobs }

// Routes implements gate.Gate. The LLM routes answer in their own protocol
// and record their receipts themselves; management goes through the
// wrapper.
func (g *Gate) Routes() []server.Route {
	prov, ctxs := g.provisions(), g.context()
	rs := []server.Route{
		g.llmRoute("POST /v1/chat/completions", wire.ChatCompletions),
		g.llmRoute("POST /v1/responses", wire.Responses),
		g.llmRoute("POST /v1/messages", wire.Messages),
		g.llmRoute("POST /v1/embeddings", wire.Embeddings),
		{Pattern: "POST /v1/messages/count_tokens", Action: "shim.count_tokens", Scope: contract.ScopeRoute,
			Envelope: envelope(wire.Messages), Resource: "count_tokens", Handler: g.countTokens},
		{Pattern: "GET /v1/provisions", Action: "shim.list_provisions", Scope: contract.ScopeRoute, Handler: prov.listHandler("provisions")},
		{Pattern: "POST /v1/provisions", Action: "shim.create_provision", Scope: contract.ScopeConfigure, Handler: prov.createHandler()},
		{Pattern: "GET /v1/provisions/{id}", Action: "shim.get_provision", Scope: contract.ScopeRoute, Handler: prov.getHandler()},
		{Pattern: "PUT /v1/provisions/{id}", Action: "shim.update_provision", Scope: contract.ScopeConfigure, Handler: prov.updateHandler()},
		{Pattern: "DELETE /v1/provisions/{id}", Action: "shim.delete_provision", Scope: contract.ScopeConfigure, Handler: prov.deleteHandler()},
		{Pattern: "GET /v1/context", Action: "shim.list_context", Scope: contract.ScopeRoute, Handler: ctxs.listHandler("context")},
		{Pattern: "POST /v1/context", Action: "shim.create_context", Scope: contract.ScopeConfigure, Handler: ctxs.createHandler()},
		{Pattern: "GET /v1/context/{ref}", Action: "shim.get_context", Scope: contract.ScopeRoute, Handler: ctxs.getHandler()},
		{Pattern: "PUT /v1/context/{ref}", Action: "shim.update_context", Scope: contract.ScopeConfigure, Handler: ctxs.updateHandler()},
		{Pattern: "DELETE /v1/context/{ref}", Action: "shim.delete_context", Scope: contract.ScopeConfigure, Handler: ctxs.deleteHandler()},
		{Pattern: "GET /v1/receipts", Action: "shim.list_receipts", Scope: contract.ScopeRoute, Handler: g.receipts},
		{Pattern: "POST /v1/dry-run", Action: "shim.dry_run", Scope: contract.ScopeRoute, Handler: g.dryRun},
		{Pattern: "POST /api/preview", Action: "shim.preview", Public: true, Handler: g.preview},
	}
	if g.cfg.Memory != nil {
		rs = append(rs,
			server.Route{Pattern: "GET /v1/memory", Action: "shim.memory", Scope: contract.ScopeRoute, Handler: g.memory},
			server.Route{Pattern: "GET /v1/outcomes", Action: "shim.outcomes", Scope: contract.ScopeRoute, Handler: g.outcomes},
			server.Route{Pattern: "GET /v1/insights", Action: "shim.insights", Scope: contract.ScopeRoute, Handler: g.insights})
	}
	if g.cfg.Gateway != nil {
		rs = append(rs, g.responseRoutes()...)
	}
	if g.cfg.Spend != nil {
		rs = append(rs, server.Route{Pattern: "GET /v1/spend", Action: "shim.spend", Scope: contract.ScopeRoute, Handler: g.spend})
	}
	// GET /v1/models answers in the shape of the SDK asking; its envelope
	// also answers a provider endpoint this server does not serve
	// (/v1/files, /v1/conversations, ...): a 404 the SDK reads as its own.
	rs = append(rs, server.Route{Pattern: "GET /v1/models", Action: "shim.models", Scope: contract.ScopeRoute,
		Envelope: providerEnvelope, Fallback: true, Handler: g.models},
		server.Route{Pattern: "GET /v1/models/{id...}", Action: "shim.model", Scope: contract.ScopeRoute,
			Envelope: providerEnvelope, Handler: g.model})
	for i := range rs {
		if rs[i].Envelope != nil {
			rs[i].AllowedOrigins, rs[i].MaxBody = g.cfg.AllowedOrigins, g.cfg.MaxRequestBytes
		}
	}
	if g.cfg.Sync != nil {
		rs = append(rs, server.Route{Pattern: "POST /v1/sync", Action: "shim.sync", Scope: contract.ScopeConfigure, Handler: g.sync})
	}
	return rs
}

// llmRoute serves one LLM protocol through the wrapper: the key is
// authenticated from the headers before a byte of the body is read (an
// unauthenticated client is answered and its connection closed without
// waiting for its body), and every refusal is in the protocol's envelope.
// The shim then reads the body once, under the server's body deadline and
// the LLM body bound, checks the route scope, refuses a contributor-tier
// model before anything else is done with it, and writes the request's
// receipt into the audit trail itself.
// envelope writes a refusal in protocol p's error envelope, with a request
// id for the SDK's requestID when no receipt named the request.
func envelope(p wire.Protocol) server.Envelope {
	return func(w http.ResponseWriter, r *http.Request, status int, code, message string) {
		h := w.Header()
		if name := wire.RequestIDHeader(p); h.Get(name) == "" {
			h.Set(name, contract.NewID("req"))
		}
		wire.WriteError(w, p, status, code, message)
	}
}

// providerEnvelope writes a refusal in the envelope of the provider r
// speaks to: Anthropic's when it carries anthropic-version (every Anthropic
// SDK sends it), else OpenAI's.
func providerEnvelope(w http.ResponseWriter, r *http.Request, status int, code, message string) {
	p := wire.ChatCompletions
	if r.Header.Get("Anthropic-Version") != "" {
		p = wire.Messages
	}
	envelope(p)(w, r, status, code, message)
}

func (g *Gate) llmRoute(pattern string, p wire.Protocol) server.Route {
	proxy := g.cfg.Service.Handler(p)
	return server.Route{Pattern: pattern, Action: "shim.proxy", Scope: contract.ScopeRoute, Envelope: envelope(p), Resource: string(p), Handler: func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
		c.Audited = true // the receipt
		proxy.ServeHTTP(w, r)
		c.Outcome = server.OutcomeOfStatus(server.StatusOf(w))
		return nil
	}}
}

func harnessOf(r *http.Request) string { return shim.HarnessOf(r.Header) }

// ifVersion reads If-Match as a provision or context version.
func ifVersion(r *http.Request) (int64, error) {
	rev, err := server.IfMatch(r)
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

func (v versioned[T]) listHandler(field string) server.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
		c.Resource = field
		list, err := v.list(r.Context(), c.Caller)
		return server.AnswerOK(w, map[string]any{field: list}, err)
	}
}

func (v versioned[T]) getHandler() server.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
		id := r.PathValue(v.param)
		c.Resource = v.noun + "/" + server.Clip(id, 100)
		x, err := v.get(r.Context(), c.Caller, id)
		if err != nil {
			return err
		}
		return writeVersioned(w, http.StatusOK, v.version(x), x)
	}
}

func (v versioned[T]) createHandler() server.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
		body, err := server.ReadBody(r)
		if err != nil {
			return err
		}
		x, err := v.create(r.Context(), c.Caller, harnessOf(r), body)
		if err != nil {
			return err
		}
		c.Resource = v.noun + "/" + server.Clip(v.key(x), 100)
		return writeVersioned(w, http.StatusCreated, v.version(x), x)
	}
}

// target reads what an update or delete names: the path's id (the call's
// resource) and the If-Match version.
func (v versioned[T]) target(r *http.Request, c *server.Call) (id string, version int64, err error) {
	id = r.PathValue(v.param)
	c.Resource = v.noun + "/" + server.Clip(id, 100)
	version, err = ifVersion(r)
	return id, version, err
}

func (v versioned[T]) updateHandler() server.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
		id, ver, err := v.target(r, c)
		if err != nil {
			return err
		}
		body, err := server.ReadBody(r)
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

func (v versioned[T]) deleteHandler() server.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request, c *server.Call) error {
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

func (g *Gate) provisions() versioned[shim.Provision] {
	svc := g.cfg.Service
	return versioned[shim.Provision]{
		noun: "provision", param: "id",
		key:     func(p shim.Provision) string { return p.ID },
		version: func(p shim.Provision) int64 { return p.Version },
		list:    svc.ListProvisions, get: svc.GetProvision, create: svc.CreateProvision,
		update: svc.UpdateProvision, delete: svc.DeleteProvision,
	}
}

func (g *Gate) context() versioned[shim.ContextEntry] {
	svc := g.cfg.Service
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
	return server.WriteJSON(w, status, v)
}

func (g *Gate) receipts(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	limit, err := server.QueryLimit(r, 50, 1000)
	if err != nil {
		return err
	}
	c.Resource = "receipts"
	list, err := g.cfg.Service.ListReceipts(r.Context(), c.Caller, limit, r.URL.Query().Get("before"))
	return server.AnswerOK(w, map[string]any{"receipts": list}, err)
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
	body, err := server.ReadBody(r)
	return p, body, err
}

func (g *Gate) dryRun(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	p, body, err := requestOf(r)
	if err != nil {
		return err
	}
	c.Resource = "dry-run/" + string(p)
	res, err := g.cfg.Service.DryRun(r.Context(), c.Caller, p, body)
	return server.AnswerOK(w, res, err)
}

// shimPreview is public (no key, no audit record): it evaluates against
// builtin rules only, persists nothing and calls no provider. Its body is
// bounded and checked like any other.
func (g *Gate) preview(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	p, body, err := requestOf(r)
	if err != nil {
		return err
	}
	res, err := g.cfg.Service.Preview(r.Context(), p, body)
	return server.AnswerOK(w, res, err)
}

var shimPreviewSchema = json.RawMessage(`{"type":"object","additionalProperties":false,"required":["request"],
"properties":{"protocol":{"type":"string","enum":["chat","responses","messages"],"description":"the wire protocol of request (default chat)"},
"request":{"type":"object","description":"an LLM request body in that protocol"}}}`)

// Tools implements gate.Gate.
func (g *Gate) Tools() []server.Tool {
	return []server.Tool{{
		Name:        "shim_preview",
		Description: "Preview what the shim would do with an LLM request under the builtin rules: fired and skipped provisions, the decision and the request as it would be forwarded. Persists nothing and calls no provider.",
		Scope:       contract.ScopeRoute,
		InputSchema: shimPreviewSchema,
		Call: func(ctx context.Context, c contract.Caller, args json.RawMessage) (any, error) {
			var in struct {
				Protocol string          `json:"protocol"`
				Request  json.RawMessage `json:"request"`
			}
			if err := server.DecodeStrict(args, &in); err != nil {
				return nil, err
			}
			p, err := wire.ParseProtocol(strings.TrimSpace(orDefault(in.Protocol, "chat")))
			if err != nil {
				return nil, contract.FieldError("protocol", "bad_protocol", "protocol %q: want chat, responses or messages", in.Protocol)
			}
			return g.cfg.Service.Preview(ctx, p, in.Request)
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

func (g *Gate) memory(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	limit, err := server.QueryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	c.Resource = "memory"
	list, err := g.cfg.Memory.Entities(r.Context(), c.Caller, projectOf(r), limit)
	return server.AnswerOK(w, map[string]any{"entities": list}, err)
}

func (g *Gate) outcomes(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	limit, err := server.QueryLimit(r, 100, 1000)
	if err != nil {
		return err
	}
	c.Resource = "outcomes"
	list, err := g.cfg.Memory.Outcomes(r.Context(), c.Caller, limit)
	return server.AnswerOK(w, map[string]any{"outcomes": list}, err)
}

func (g *Gate) insights(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	c.Resource = "insights"
	ins, err := g.cfg.Memory.Insights(r.Context(), c.Caller, projectOf(r))
	return server.AnswerOK(w, ins, err)
}

// shimSyncHandler runs a governed sync from {"source": URL}; the server only
// fetches from the configured allowlist (shim.sync_allow) and never reads
// directories.
func (g *Gate) sync(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	body, err := server.ReadBody(r)
	if err != nil {
		return err
	}
	var in struct {
		Source string `json:"source"`
	}
	if err := server.DecodeStrict(body, &in); err != nil {
		return err
	}
	if in.Source == "" {
		return contract.FieldError("source", "missing_field", "source is required: the URL of a provision bundle or handshake+https://host")
	}
	c.Resource = "sync/" + server.Clip(in.Source, 150)
	rep, err := g.cfg.Sync.Sync(r.Context(), c.Caller, harnessOf(r), in.Source)
	if err != nil {
		return err
	}
	c.Audited = rep.AuditID != "" // the sync recorded its report
	return server.WriteJSON(w, http.StatusOK, rep)
}
