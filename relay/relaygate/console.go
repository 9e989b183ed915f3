package relaygate

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/relaysql"
)

//go:embed console_relay.html
var relayTemplate string

// Gateways lists the open gateway connections of a tenant (every tenant
// when empty); the connector has it.
type Gateways interface {
	OpenConnections(tenant contract.TenantSlot) []connector.Connection
}

// Buffer lists the events waiting for a gateway (relaysql.Store has it).
type Buffer interface {
	Buffered(ctx context.Context, tenant contract.TenantSlot, limit int) ([]relaysql.BufferedEvent, error)
}

// relayView is the relay page: open gateway connections and the buffer.
type relayView struct {
	Served   bool
	Gateways []connector.Connection
	Buffered []bufferedView
}

type bufferedView struct {
	relaysql.BufferedEvent
	Summary string
}

// RelayPage is the console's relay page: the gateways connected to gws
// (nil: the relay is not served by this process) and the buffered events.
func RelayPage(buf Buffer, gws Gateways) gate.Page {
	return gate.Page{Name: "relay", Title: "Relay", Template: relayTemplate,
		Load: func(ctx context.Context, v gate.View) (any, error) {
			rv := relayView{Served: gws != nil}
			if gws != nil {
				rv.Gateways = gws.OpenConnections(v.Tenant)
			}
			bs, err := buf.Buffered(ctx, v.Tenant, gate.ListLimit)
			if err != nil {
				return nil, err
			}
			for _, b := range bs {
				rv.Buffered = append(rv.Buffered, bufferedView{b, eventSummary(b.Event)})
			}
			return rv, nil
		}}
}

// eventSummary is one line of a buffered MessageEvent: its type and the
// start of its text.
func eventSummary(event []byte) string {
	var ev struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(event, &ev) != nil {
		return fmt.Sprintf("%d bytes", len(event))
	}
	s := ev.Type + " " + ev.Text
	if len(s) > 120 {
		n := 120
		for n > 0 && s[n]&0xC0 == 0x80 {
			n--
		}
		s = s[:n] + "…"
	}
	return s
}

// Pages implements gate.Paged: the relay page over the connector's store.
func (g *Gate) Pages() []gate.Page {
	if b, ok := g.c.Store().(Buffer); ok {
		return []gate.Page{RelayPage(b, g.c)}
	}
	return nil
}
