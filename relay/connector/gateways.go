package connector

import (
	"slices"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
)

// Connection describes one open gateway connection, for operators.
type Connection struct {
	Conn      string // the connection id (rconn_...)
	GatewayID string
	Tenant    contract.TenantSlot
	Since     time.Time // when it connected
	Idle      bool      // it sent going_idle: nothing is delivered to it live
	Serves    []string  // "platform/bot" identities it announced
}

// OpenConnections lists the gateway connections open on this connector, those of
// tenant only unless tenant is empty, oldest first.
func (c *Connector) OpenConnections(tenant contract.TenantSlot) []Connection {
	c.mu.RLock()
	conns := make([]*conn, 0, len(c.conns))
	for k := range c.conns {
		if tenant == "" || k.tenant == tenant {
			conns = append(conns, k)
		}
	}
	c.mu.RUnlock()
	out := make([]Connection, 0, len(conns))
	for _, k := range conns {
		g := Connection{Conn: k.id, GatewayID: k.gatewayID, Tenant: k.tenant, Since: k.since}
		k.mu.Lock()
		g.Idle = k.idle
		for _, id := range k.idents {
			g.Serves = append(g.Serves, id.platform+"/"+id.bot)
		}
		k.mu.Unlock()
		slices.Sort(g.Serves)
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Connection) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Conn, b.Conn)
	})
	return out
}
