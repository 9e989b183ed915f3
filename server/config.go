package server

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/auth"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/internal/keyowner"
	"github.com/caduceus-dev/caduceus/trail"
)

// Pinger reports whether the store answers.
type Pinger interface {
	Ping(ctx context.Context) error
}

// AuditReader lists recent audit records.
type AuditReader interface {
	Tail(ctx context.Context, f audit.Filter) ([]audit.Record, error)
}

// Config is what a Server is built from: the core's services and the
// routes and tools of the gates it serves.
type Config struct {
	Auth    *auth.Service
	Audit   audit.Log
	Records AuditReader
	Store   Pinger
	Logger  *slog.Logger
	// Unavailable reports whether an error's cause is a store that cannot
	// be reached or written now (store.IsUnavailable): such an internal
	// error is answered 503 store_unavailable with Retry-After
	// (contract.Unavailable) instead of 500 internal. Nil: never.
	Unavailable func(error) bool
	Version     string
	// Routes and Tools are the enabled gates' (gate.Routes, gate.Tools),
	// registered after the core's, each the one way (Route).
	Routes []Route
	Tools  []Tool

	// Console is the operator console (package console), served under
	// /console with its own session cookie; nil: no console. The API
	// routes never accept that cookie.
	Console http.Handler
	// Trails serve GET /v1/trail/conversations[/{id}]; nil: not served.
	Trails trail.Reader

	// AuditSigner signs the checkpoints GET /v1/audit/checkpoint serves,
	// made from AuditSource (the store's chains); nil: no checkpoints.
	AuditSigner ed25519.PrivateKey
	AuditSource audit.Source
	// MCPAllowedOrigins are the browser origins /mcp accepts
	// ("https://app.example.com"); a request with any other Origin header
	// is refused (MCP's DNS-rebinding guidance). Requests without Origin
	// (every non-browser client) are not affected.
	MCPAllowedOrigins []string
	// MaxBodyBytes bounds management request bodies (default 1 MiB).
	MaxBodyBytes int64
	// MaxLLMBodyBytes bounds provider route request bodies (default
	// DefaultMaxLLMBodyBytes).
	MaxLLMBodyBytes int64
	// BodyReadTimeout bounds how long any request body may take to arrive
	// once its handler starts reading it (default DefaultBodyReadTimeout).
	// A client slower than that gets its connection closed.
	BodyReadTimeout time.Duration
	// EdgeSecret, when set, must arrive as X-Edge-Auth on every request but
	// the liveness and readiness probes: the proxy in front adds it, so
	// nothing reaches the server around it.
	EdgeSecret string
	// Keys keeps the Idempotency-Key of write routes (idempotency.go); nil:
	// Store's, when it keeps them (a *store.DB does).
	Keys RequestKeys
	// IdempotencyWait bounds how long a duplicate waits for the request
	// holding its key (default DefaultIdempotencyWait).
	IdempotencyWait time.Duration
	// IdempotencyNoWait: a duplicate never waits for the request holding
	// its key, in this process or another; it is answered 409
	// idempotency_key_in_progress at once. The edge sets it: in a Worker a
	// request that waits on another request's I/O is canceled as hung
	// (docs/edge.md).
	IdempotencyNoWait bool
	// Previous is the server this one replaces in the same process (a
	// reload of the configuration): its metrics and registry carry over.
	Previous *Server
}

// DefaultMaxLLMBodyBytes is the default bound of a provider route's
// request body: 32 MiB, at least what the providers themselves take
// (Anthropic documents 32 MB for a Messages request).
const DefaultMaxLLMBodyBytes = 32 << 20

// Server serves the HTTP API.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	metrics *metrics
	tools   []Tool
	// keys and inflight: the write routes' idempotency keys.
	keys     RequestKeys
	inflight keyowner.Set
	// table is every route the server serves (routes).
	table []Route
	// envelopes are the LLM routes' error envelopes by path, for the
	// refusals made before a route is matched (the edge check).
	envelopes map[string]Envelope
	// cors matches a request's path to a route with AllowedOrigins, whose
	// origins are origins[pattern].
	cors    *http.ServeMux
	origins map[string][]string
}

// Route is one route of the server: a gate's (Config.Routes) or the
// core's. Every route but a Raw one goes through the one wrapper (serve).
type Route struct {
	// Pattern is the http.ServeMux pattern ("POST /v1/trader/decisions").
	Pattern string
	// Action is the audit action, "noun.verb".
	Action string
	// Scope is the scope the key needs ("" = any valid key).
	Scope contract.Scope
	// Public routes take no key and write no audit record (POST
	// /api/preview): anyone may call them.
	Public bool
	// Envelope is set on the provider routes: every refusal is answered in
	// the provider's error envelope instead of a problem (the edge check's
	// too), and the body is bounded by MaxLLMBodyBytes and left unread for
	// the handler (the shim reads it once and checks it).
	Envelope Envelope
	// Fallback marks the route whose Envelope answers a path under /v1/
	// that no route serves and that is not in a namespace of the
	// management API: a provider endpoint the server does not serve (an
	// SDK's 404 in the provider's shape).
	Fallback bool
	// AllowedOrigins are the browser origins this route answers (CORS): a
	// preflight from one of them is answered without a key, and its real
	// requests get Access-Control-Allow-Origin. Empty: none.
	AllowedOrigins []string
	// MaxBody bounds the request body (0: the server's bound, MaxBodyBytes,
	// or MaxLLMBodyBytes for a route with an Envelope).
	MaxBody int64
	// Resource is the audit resource of a refusal before the handler runs
	// (default: the path).
	Resource string
	// Handler serves the route.
	Handler HandlerFunc
	// Raw, when set, is served as it is, outside the wrapper: a route that
	// authenticates itself (the relay's gateways with HMAC tokens, its
	// platforms with their signatures). Only Pattern is read with it.
	Raw http.Handler
	// Gate names the gate the route belongs to (gate.Routes sets it; ""
	// is the core's): the request span's caduceus.gate.
	Gate string
	// OwnIdempotency is set on a write route whose handler takes the
	// Idempotency-Key itself (executor ticks: the key also derives their
	// broker ref_ids); the wrapper then leaves the header to it. Every
	// other write route of the wrapper takes the key there (keyed).
	OwnIdempotency bool
}

// Envelope writes a refusal to r in an LLM provider's own error envelope,
// the shape its official SDK parses (shim/wire.WriteError), with the
// request id header that SDK reads.
type Envelope func(w http.ResponseWriter, r *http.Request, status int, code, message string)

// HandlerFunc is a route handler. It writes its response on success and
// returns an error otherwise; the wrapper turns the error into a problem
// (unless the handler already wrote) and records the outcome.
type HandlerFunc func(w http.ResponseWriter, r *http.Request, c *Call) error

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
	// ReplayBody, when set, is what the request's idempotency key stores
	// and a replay answers instead of the body written: an answer that
	// holds a secret (a new key's token) is stored without it.
	ReplayBody []byte
}

// Tool is an MCP tool of a gate. The caller's scopes decide whether it is
// listed: a key without Scope does not see the tool and cannot call it.
type Tool struct {
	Name        string
	Description string
	Scope       contract.Scope  // "" = any valid key
	InputSchema json.RawMessage // a JSON Schema object (type "object")
	// Call runs the tool. A *contract.Error that is not internal becomes a
	// tool result with isError and the error's message; an internal error
	// becomes a result saying "internal error" and is logged.
	Call func(ctx context.Context, c contract.Caller, args json.RawMessage) (any, error)
	// Audited tools write their own audit record (the domain's, with its
	// payload) whenever Call returns no error; for the others, and for an
	// audited tool's error, the request's record names the tool.
	Audited bool
}

// RequestKeys is the store of the wrapper's idempotency keys (*store.DB).
type RequestKeys interface {
	ClaimLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key, bodyHash string, lease time.Duration) (contract.KeyClaim, error)
	CompleteLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key string, result []byte) error
	ReleaseLeasedKey(ctx context.Context, tenant contract.TenantSlot, scope, key string) error
}
