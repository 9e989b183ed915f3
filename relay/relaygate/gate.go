// Package relaygate is the relay gate's module (package gate): the
// connector's routes on the server. Gateways and platforms authenticate
// themselves (HMAC bearer tokens, Ed25519 signatures, secret tokens), not
// with keys, so every route is served raw, outside the key wrapper.
package relaygate

import (
	"net/http"

	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/server"
)

// Gate is the relay gate.
type Gate struct {
	c       *connector.Connector
	h       http.Handler
	release func() // what Close releases besides the connector (the NATS connection)
}

// New returns the relay gate of c.
func New(c *connector.Connector) *Gate { return &Gate{c: c, h: c.Handler()} }

var _ gate.Gate = (*Gate)(nil)

// Name implements gate.Gate.
func (g *Gate) Name() string { return "relay" }

// Routes implements gate.Gate: the gateway socket, media, and the
// platforms' webhooks (seed 004).
func (g *Gate) Routes() []server.Route {
	patterns := append([]string{
		"GET /relay", "POST /relay/media", "GET /relay/media/{id}",
		"POST /hooks/discord/{app}", "POST /hooks/telegram/{bot}",
	}, connector.PlatformRoutes...)
	rs := make([]server.Route, len(patterns))
	for i, p := range patterns {
		rs[i] = server.Route{Pattern: p, Raw: g.h}
	}
	return rs
}

// Tools implements gate.Gate: the relay has none.
func (g *Gate) Tools() []server.Tool { return nil }

// Jobs implements gate.Gate: the connector runs its own.
func (g *Gate) Jobs() []gate.Job { return nil }

// Connector is the gate's connector (the console shows its connections;
// serve closes its sockets on shutdown).
func (g *Gate) Connector() *connector.Connector { return g.c }

// CloseSockets implements registry.SocketCloser: the gateways' WebSockets
// close, and the gateways reconnect (to the next generation, after a
// reload).
func (g *Gate) CloseSockets() { g.c.Close() }

// Close implements registry.Closer: the connector and its NATS connection.
func (g *Gate) Close() {
	g.c.Close()
	if g.release != nil {
		g.release()
	}
}
