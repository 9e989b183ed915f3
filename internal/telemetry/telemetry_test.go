package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestOffStartsNothing: with no tracer installed the helpers hand back
// what they were given, start no span, write no header, and allocate
// nothing on the request path.
func TestOffStartsNothing(t *testing.T) {
	Disable()
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	if r2, span := StartRequest(r, "POST /v1/chat/completions"); r2 != r || span != nil {
		t.Errorf("StartRequest while off: %p %v", r2, span)
	}
	ctx := context.Background()
	if c, span := Child(ctx, "store.commit", trace.SpanKindInternal); c != ctx || span != nil {
		t.Errorf("Child while off: %v", span)
	}
	h := http.Header{}
	Inject(ctx, h)
	if len(h) != 0 {
		t.Errorf("Inject while off wrote %v", h)
	}
	allocs := testing.AllocsPerRun(100, func() {
		StartRequest(r, "POST /v1/chat/completions")
		Child(ctx, "store.commit", trace.SpanKindInternal)
		Inject(ctx, h)
		if On() { // how callers that build attributes call Annotate
			Annotate(ctx, KeyModel.String("gpt-4.1"))
		}
	})
	if allocs != 0 {
		t.Errorf("the helpers allocate %v times a request while off", allocs)
	}
}

// TestOnContinuesTheClientsTrace: with a tracer installed, a request span
// continues the client's traceparent; a child starts only under a
// recording span (never a trace of its own); Inject writes the child's
// traceparent.
func TestOnContinuesTheClientsTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	Enable(tp)
	defer Disable()

	if _, span := Child(context.Background(), "store.commit", trace.SpanKindInternal); span != nil {
		t.Error("a child span started outside any request")
	}
	r := httptest.NewRequest("POST", "/v1/chat/completions", nil)
	r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	r, span := StartRequest(r, "POST /v1/chat/completions")
	if span == nil {
		t.Fatal("no request span")
	}
	ctx, child := Child(r.Context(), "shim.attempt", trace.SpanKindClient)
	if child == nil {
		t.Fatal("no child span under the request")
	}
	h := http.Header{}
	Inject(ctx, h)
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + child.SpanContext().SpanID().String() + "-01"
	if got := h.Get("Traceparent"); got != want {
		t.Errorf("traceparent %q, want %q", got, want)
	}
	child.End()
	span.End()
	ended := rec.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want 2", len(ended))
	}
	req := ended[1]
	if req.Parent().SpanID().String() != "00f067aa0ba902b7" || req.SpanKind() != trace.SpanKindServer || !req.Parent().IsRemote() {
		t.Errorf("request span: parent %v kind %v", req.Parent(), req.SpanKind())
	}
	if ended[0].Parent().SpanID() != req.SpanContext().SpanID() {
		t.Errorf("the child's parent is %v, not the request span", ended[0].Parent().SpanID())
	}

	// An unsampled client trace records nothing, and passes on unsampled.
	r = httptest.NewRequest("POST", "/v1/chat/completions", nil)
	r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")
	r, span = StartRequest(r, "POST /v1/chat/completions")
	if span.IsRecording() {
		t.Error("an unsampled trace is recorded")
	}
	if _, c := Child(r.Context(), "store.commit", trace.SpanKindInternal); c != nil {
		t.Error("a child of an unsampled request span started")
	}
	h = http.Header{}
	Inject(r.Context(), h)
	if got := h.Get("Traceparent"); len(got) != 55 || got[53:] != "00" {
		t.Errorf("unsampled traceparent passed on as %q", got)
	}
	span.End()
}
