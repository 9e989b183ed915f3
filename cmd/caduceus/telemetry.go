package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/caduceus-dev/caduceus/internal/telemetry"
)

// The OpenTelemetry variables serve reads itself (the exporter reads the
// others it knows: OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION,
// _CERTIFICATE, ...; the SDK reads OTEL_TRACES_SAMPLER, OTEL_SERVICE_NAME
// and OTEL_RESOURCE_ATTRIBUTES).
const (
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTelDisabled       = "OTEL_SDK_DISABLED"
)

// tracesPath is the OTLP/HTTP path of traces under a base endpoint.
const tracesPath = "/v1/traces"

// otlpTarget is the URL serve exports its spans to, and whether it traces
// at all: --otlp-endpoint, else OTEL_EXPORTER_OTLP_TRACES_ENDPOINT (the
// traces URL as it is), else OTEL_EXPORTER_OTLP_ENDPOINT; none of them (or
// OTEL_SDK_DISABLED=true): no tracing. The flag and the generic variable
// are base URLs (http://collector:4318), under which traces go to
// /v1/traces, as the OTLP specification says of the variable.
func (a *app) otlpTarget() (string, bool, error) {
	if a.otlpEndpoint == "" && strings.EqualFold(strings.TrimSpace(a.getenv(envOTelDisabled)), "true") {
		return "", false, nil
	}
	base, name := a.otlpEndpoint, "--otlp-endpoint"
	if base == "" {
		if u := strings.TrimSpace(a.getenv(envOTLPTracesEndpoint)); u != "" {
			if _, err := otlpURL(u, envOTLPTracesEndpoint); err != nil {
				return "", false, err
			}
			return u, true, nil
		}
		base, name = strings.TrimSpace(a.getenv(envOTLPEndpoint)), envOTLPEndpoint
	}
	if base == "" {
		return "", false, nil
	}
	u, err := otlpURL(base, name)
	if err != nil {
		return "", false, err
	}
	u.Path = strings.TrimRight(u.Path, "/") + tracesPath
	return u.String(), true, nil
}

// otlpURL checks an OTLP/HTTP endpoint given by name.
func otlpURL(s, name string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &exitError{2, fmt.Errorf("%s: %q is not an http:// or https:// URL of an OTLP/HTTP collector (e.g. http://127.0.0.1:4318)", name, s)}
	}
	return u, nil
}

// startTracing installs the OTLP/HTTP trace exporter when serve traces
// (otlpTarget). The function it returns ends tracing and flushes the spans
// not yet exported (at most 5 s): serve calls it once everything else has
// stopped.
func (a *app) startTracing(ctx context.Context) (func(), error) {
	target, on, err := a.otlpTarget()
	if err != nil || !on {
		return func() {}, err
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(target))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	ver, _ := buildInfo()
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "caduceus"), attribute.String("service.version", ver)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		a.log.Warn("tracing: resource attributes from the environment not read", "err", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { a.log.Warn("tracing: spans not exported", "err", err) }))
	telemetry.Enable(tp)
	shown, _ := url.Parse(target)
	a.log.Info("tracing", "otlp_traces_url", shown.Redacted())
	return func() {
		telemetry.Disable()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			a.log.Warn("tracing: spans not flushed at shutdown", "err", err)
		}
	}, nil
}
