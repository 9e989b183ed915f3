//go:build js

package telemetry

import (
	"context"
	"net/http"
)

// At the edge (js/wasm, the Cloudflare Worker) nothing is traced: the
// request path calls the same helpers, which start nothing, and the
// Worker links no OpenTelemetry package.

// Span is a span that is never started: every helper returns a nil one.
type Span interface {
	SetAttributes(...KeyValue)
	End()
}

// KeyValue is an attribute, never recorded.
type KeyValue struct{}

// SpanKind is a span's kind.
type SpanKind int

// The span kinds the request path starts.
const (
	SpanKindInternal SpanKind = iota + 1
	SpanKindClient
)

// Key is an attribute key.
type Key string

func (Key) String(string) KeyValue { return KeyValue{} }
func (Key) Int(int) KeyValue       { return KeyValue{} }

// Name is the instrumentation scope of Caduceus's spans.
const Name = "github.com/caduceus-dev/caduceus"

// Attribute keys of Caduceus's spans (telemetry.go names what each holds).
const (
	KeyGate          = Key("caduceus.gate")
	KeyTenant        = Key("caduceus.tenant")
	KeyOutcome       = Key("caduceus.outcome")
	KeyConversation  = Key("caduceus.conversation")
	KeyRequestID     = Key("caduceus.request_id")
	KeyModel         = Key("caduceus.model")
	KeyModelIdentity = Key("caduceus.model_identity")
	KeyRoute         = Key("caduceus.shim.route")
	KeyReceipt       = Key("caduceus.receipt")
	KeyMethod        = Key("http.request.method")
	KeyHTTPRoute     = Key("http.route")
	KeyStatus        = Key("http.response.status_code")
	KeyDBSystem      = Key("db.system.name")
)

// On reports false: no tracer is ever installed.
func On() bool { return false }

// StartRequest returns r and no span.
func StartRequest(r *http.Request, _ string) (*http.Request, Span) { return r, nil }

// Child returns ctx and no span.
func Child(ctx context.Context, _ string, _ SpanKind) (context.Context, Span) { return ctx, nil }

// Annotate records nothing.
func Annotate(context.Context, ...KeyValue) {}

// Inject writes nothing.
func Inject(context.Context, http.Header) {}

// End and Fail are never reached with a span (there is none).
func End(Span, error)   {}
func Fail(Span, string) {}
