package connector_test

import (
	"context"
	"net/http"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/relaytest"
)

// This is how a server hosts the connector: build it from configuration,
// mount its handler (GET /relay, POST /hooks/discord/{app}, POST
// /hooks/telegram/{bot}), and close its WebSockets on shutdown.
func Example() {
	var store relay.Store = relaytest.NewMemory() // the SQL store in production: (*store.DB).Relay()
	var log audit.Log = audit.NewMemory()         // the SQL audit log in production
	c, err := connector.New(connector.Config{
		Gateways: map[string]connector.Gateway{
			"gw-acme": {Tenant: "slot-1", Secrets: [][]byte{[]byte("a-32-byte-or-longer-shared-secret")}},
		},
		Discord: map[string]connector.DiscordApp{
			"123456789012345678": {
				PublicKey: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
				BotToken:  "bot-token",
				Guilds:    map[string]contract.TenantSlot{"111": "slot-1"},
			},
		},
		Telegram: map[string]connector.TelegramBot{
			"acmebot": {Token: "123:ABC", SecretToken: "webhook-secret", Tenant: "slot-1"},
		},
		Store: store,
		Audit: log,
	})
	if err != nil {
		panic(err) // an invalid *contract.Error naming the bad setting
	}
	mux := http.NewServeMux()
	mux.Handle("/relay", c.Handler())
	mux.Handle("/hooks/", c.Handler())
	srv := &http.Server{Addr: "127.0.0.1:0", Handler: mux}
	srv.RegisterOnShutdown(func() { _ = c.Close() })

	// ... srv.ListenAndServe() ...
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	_ = c.Close()
}
