//go:build !js

package server

import (
	"time"

	"github.com/caduceus-dev/caduceus/guard"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metrics are the server's Prometheus metrics, served at GET /metrics. The
// edge's build (js/wasm) has none (metrics_js.go): an isolate's counts are
// not the Worker's, and the exporter would weigh a third of its bundle.
type metrics struct {
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics() *metrics {
	reg := prometheus.NewRegistry()
	m := &metrics{
		reg: reg,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "caduceus_http_requests_total",
			Help: "HTTP requests by route pattern and audit outcome.",
		}, []string{"route", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "caduceus_http_request_duration_seconds",
			Help:    "HTTP request latency by route pattern and audit outcome.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route", "outcome"}),
	}
	reg.MustRegister(m.requests, m.latency, routeHealthy, upstreamAttempts, upstreamLatency, guardrailFindings, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe counts one request by route pattern and audit outcome.
func (m *metrics) observe(pattern, outcome string, took time.Duration) {
	m.requests.WithLabelValues(pattern, outcome).Inc()
	m.latency.WithLabelValues(pattern, outcome).Observe(took.Seconds())
}

// metricsRoutes is GET /metrics: public, no key, no audit record.
func (s *Server) metricsRoutes() []Route {
	return []Route{{Pattern: "GET /metrics", Raw: promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})}}
}

// Registry is the server's Prometheus registry, for gates that add metrics.
func (s *Server) Registry() *prometheus.Registry { return s.metrics.reg }

// routeHealthy is each shim gateway route's health as the gateway last saw
// it, set through RouteHealth. It is the process's (every server of the
// process shows it): the gateway reports it through a callback, and a
// process runs one gateway.
var routeHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "caduceus_shim_route_healthy",
	Help: "1 while the shim gateway route's upstream accepts its credential, 0 once it refused it (401, 403) or, for a member of a balanced step, while it is unhealthy; absent before the route's first answer.",
}, []string{"route"})

// RouteHealth records a shim gateway route's health in /metrics
// (caduceus_shim_route_healthy); it is the gateway's OnRouteHealth.
func RouteHealth(route string, healthy bool) {
	v := 0.0
	if healthy {
		v = 1
	}
	routeHealthy.WithLabelValues(route).Set(v)
}

// upstreamAttempts and upstreamLatency are each shim gateway route's
// upstream calls (set through UpstreamAttempt), the process's as
// routeHealthy is: an operator reads a route's health from its share of
// answered attempts and its latency.
var (
	upstreamAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "caduceus_shim_upstream_attempts_total",
		Help: "Upstream calls of the shim gateway by route and outcome (answered, broken, definite, uncertain, auth_failed, rate_limited, canceled).",
	}, []string{"route", "outcome"})
	upstreamLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "caduceus_shim_upstream_attempt_duration_seconds",
		Help:    "Duration of the shim gateway's upstream calls by route, from sending to the end of the answer (a stream's included).",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	}, []string{"route"})
)

// UpstreamAttempt records one upstream call of a shim gateway route in
// /metrics (caduceus_shim_upstream_attempts_total,
// caduceus_shim_upstream_attempt_duration_seconds); it is the gateway's
// OnAttempt.
func UpstreamAttempt(route, outcome string, took time.Duration) {
	upstreamAttempts.WithLabelValues(route, outcome).Inc()
	upstreamLatency.WithLabelValues(route).Observe(took.Seconds())
}

// guardrailFindings counts what the guardrails (the shim's, the relay's)
// found, by direction, kind and action (never a value): set through
// GuardrailFinding.
var guardrailFindings = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "caduceus_guardrail_findings_total",
	Help: "Values of secrets and personal data the guardrails found, by direction (request, answer, inbound), kind (secret, private_key, email, phone, card, iban, ssn, ip) and action (redact, block, flag).",
}, []string{"direction", "kind", "action"})

// GuardrailFinding records a guardrails record in /metrics
// (caduceus_guardrail_findings_total); it is the shim's and the relay's
// OnGuardrail.
func GuardrailFinding(r guard.Record) {
	guardrailFindings.WithLabelValues(string(r.Direction), string(r.Kind), string(r.Action)).Add(float64(r.Count))
}
