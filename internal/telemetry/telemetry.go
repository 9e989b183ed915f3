//go:build !js

// Package telemetry is the process's tracing switch: the OpenTelemetry
// tracer serve installs when an OTLP endpoint is configured (cmd/caduceus
// builds the SDK and its exporter), and the few helpers the request path
// calls. With no tracer installed every helper costs one atomic load and a
// nil check, and starts nothing.
//
// What a span may carry: the gate, the tenant slot, route patterns and
// route names, model identities, outcomes, statuses and ids (request,
// conversation, receipt). Never a prompt, a body, a header value or a key.
package telemetry

import (
	"context"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Span, KeyValue and SpanKind are OpenTelemetry's, named here so that the
// request path's packages import no OpenTelemetry package themselves.
type (
	Span     = trace.Span
	KeyValue = attribute.KeyValue
	SpanKind = trace.SpanKind
)

// The span kinds the request path starts.
const (
	SpanKindInternal = trace.SpanKindInternal
	SpanKindClient   = trace.SpanKindClient
)

// Name is the instrumentation scope of Caduceus's spans.
const Name = "github.com/caduceus-dev/caduceus"

// Attribute keys of Caduceus's spans.
const (
	KeyGate          = attribute.Key("caduceus.gate")
	KeyTenant        = attribute.Key("caduceus.tenant")
	KeyOutcome       = attribute.Key("caduceus.outcome")
	KeyConversation  = attribute.Key("caduceus.conversation")
	KeyRequestID     = attribute.Key("caduceus.request_id")
	KeyModel         = attribute.Key("caduceus.model")          // the model a client asked for
	KeyModelIdentity = attribute.Key("caduceus.model_identity") // provider/model that served (or was tried)
	KeyRoute         = attribute.Key("caduceus.shim.route")     // a gateway route's name
	KeyReceipt       = attribute.Key("caduceus.receipt")
	KeyMethod        = attribute.Key("http.request.method")
	KeyHTTPRoute     = attribute.Key("http.route")
	KeyStatus        = attribute.Key("http.response.status_code")
	KeyDBSystem      = attribute.Key("db.system.name")
)

type holder struct{ t trace.Tracer }

var current atomic.Pointer[holder]

// propagator is W3C Trace Context (traceparent, tracestate).
var propagator = propagation.TraceContext{}

// Enable installs tp's tracer for the process; Disable removes it.
func Enable(tp trace.TracerProvider) { current.Store(&holder{tp.Tracer(Name)}) }

// Disable turns tracing off.
func Disable() { current.Store(nil) }

// On reports whether a tracer is installed.
func On() bool { return current.Load() != nil }

// StartRequest starts the server span of r, named name (the route pattern),
// continuing the trace of r's traceparent when it has a valid one. It
// returns r with the span in its context, and the span; r and nil when
// tracing is off.
func StartRequest(r *http.Request, name string) (*http.Request, Span) {
	h := current.Load()
	if h == nil {
		return r, nil
	}
	ctx := propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := h.t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	return r.WithContext(ctx), span
}

// Child starts span name as a child of ctx's span when tracing is on and
// ctx's span records; else it returns ctx and nil (work outside a traced
// request, background jobs, starts no trace of its own).
func Child(ctx context.Context, name string, kind SpanKind) (context.Context, Span) {
	h := current.Load()
	if h == nil || !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil
	}
	return h.t.Start(ctx, name, trace.WithSpanKind(kind))
}

// Annotate sets attrs on ctx's span when tracing is on and it records.
// Callers that build attributes check On first.
func Annotate(ctx context.Context, attrs ...KeyValue) {
	if current.Load() == nil {
		return
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrs...)
	}
}

// Inject writes ctx's span context into h as traceparent (and tracestate)
// when tracing is on and ctx carries a valid span context.
func Inject(ctx context.Context, h http.Header) {
	if current.Load() == nil {
		return
	}
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagator.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// End ends span, marking it failed with err when err is not nil.
func End(span Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// Fail marks span failed with a short description (never client data).
func Fail(span Span, description string) { span.SetStatus(codes.Error, description) }
