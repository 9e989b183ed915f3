//go:build js

package server

import (
	"time"

	"github.com/caduceus-dev/caduceus/guard"
)

// metrics at the edge (js/wasm, the Cloudflare Worker): none. A Worker's
// isolates are many and short-lived, so one isolate's counts say nothing
// of the Worker (Cloudflare's own analytics do), and the Prometheus
// exporter would weigh a third of the bundle; GET /metrics is not served
// there (docs/edge.md).
type metrics struct{}

func newMetrics() *metrics { return &metrics{} }

func (*metrics) observe(string, string, time.Duration) {}

func (*Server) metricsRoutes() []Route { return nil }

// RouteHealth and UpstreamAttempt are the gateway's health and attempt
// callbacks; at the edge they record nothing.
func RouteHealth(string, bool)                      {}
func UpstreamAttempt(string, string, time.Duration) {}
func GuardrailFinding(guard.Record)                 {}
