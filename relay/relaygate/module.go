package relaygate

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/relaysql"
	"github.com/caduceus-dev/caduceus/server"
)

// The relay's section is connector.FileConfig: its gateways and platforms
// (docs/relay-platforms.md). Without any, the gate is not served.
func init() {
	registry.Register(registry.Module{
		Name: "relay", Order: 40,
		Section: "relay", New: func() any { return &connector.FileConfig{} },
		Unserved:   "relay gate not served: no gateways or platforms in the relay section of the config",
		Configured: func(_ registry.Host, s any) bool { return s.(*connector.FileConfig).Configured() },
		Check: func(h registry.Host, s any) error {
			if _, err := s.(*connector.FileConfig).Config(h.Getenv); err != nil {
				return &registry.InvalidError{Err: fmt.Errorf("%s", registry.UserMessage(err))}
			}
			return nil
		},
		Build: func(_ context.Context, h registry.Host, s any) (gate.Gate, error) {
			return build(h, s.(*connector.FileConfig))
		},
	})
}

// build builds the connector from the relay section. With a NATS URL,
// session ownership is routed across connector processes through NATS;
// otherwise in this process.
func build(h registry.Host, fc *connector.FileConfig) (*Gate, error) {
	rc, err := fc.Config(h.Getenv)
	if err != nil {
		return nil, &registry.InvalidError{Err: fmt.Errorf("%s", registry.UserMessage(err))}
	}
	rc.Store, rc.Audit, rc.Logger = relaysql.New(h.DB), h.DB.Audit(), h.Log
	if rc.GuardrailsActive() {
		// The detectors are built here, once, and only when a platform's
		// policy looks for anything (the shim's are the same ones).
		det, err := detect.Default()
		if err != nil {
			return nil, err
		}
		rc.Scanner, rc.OnGuardrail = det, server.GuardrailFinding
	}
	var nc *nats.Conn
	if h.NATS != "" {
		if nc, err = nats.Connect(h.NATS, nats.Name("caduceus-relay"),
			// Through an outage of any length: reconnect for good, and fail
			// a publish at once rather than keep it for the reconnection
			// (a forwarded event that failed is buffered in the store; sent
			// again later it would arrive twice).
			nats.MaxReconnects(-1), nats.ReconnectWait(time.Second), nats.ReconnectBufSize(-1)); err != nil {
			return nil, fmt.Errorf("relay: nats %s: %w", h.NATS, err)
		}
		if rc.Router, err = connector.NewNATSRouter(nc, connector.NATSOptions{}); err != nil {
			nc.Close()
			return nil, err
		}
	}
	c, err := connector.New(rc)
	if err != nil {
		if nc != nil {
			nc.Close()
		}
		return nil, &registry.InvalidError{Err: fmt.Errorf("%s", registry.UserMessage(err))}
	}
	g := New(c)
	if nc != nil {
		g.release = nc.Close
	}
	return g, nil
}
