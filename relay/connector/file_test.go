package connector_test

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/relaytest"
)

const fileConfig = `
relay:
  gateways:
    gw-acme: {tenant: slot-1, secrets: ["env:GW_SECRET", "an-old-secret-still-accepted"]}
  discord:
    "123456789012345678":
      public_key: d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a
      bot_token: env:DISCORD_TOKEN
      guilds: {"111": slot-1}
      users: {"555": slot-2}
      gateway: true
      gateway_url: ws://127.0.0.1:1/gateway
  gateway_lease_ttl: 20s
  telegram:
    acmebot: {token: "123:ABC", secret_token: env:TG_SECRET, tenant: slot-1, chats: {"-100": slot-2}, parse_mode: plain}
  ping_interval: 45s
  public_url: https://relay.example.com
  buffer_limit: 500
  group_sessions_per_user: false
`

func TestFileConfig(t *testing.T) {
	var doc struct {
		Relay connector.FileConfig `yaml:"relay"`
	}
	if err := yaml.Unmarshal([]byte(fileConfig), &doc); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"GW_SECRET": "0123456789abcdef0123456789abcdef", "DISCORD_TOKEN": "dtok", "TG_SECRET": "tgsec"}
	cfg, err := doc.Relay.Config(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	g := cfg.Gateways["gw-acme"]
	if g.Tenant != "slot-1" || len(g.Secrets) != 2 || string(g.Secrets[0]) != env["GW_SECRET"] {
		t.Errorf("gateway %+v", g)
	}
	d := cfg.Discord["123456789012345678"]
	if d.BotToken != "dtok" || d.Guilds["111"] != "slot-1" || d.Users["555"] != "slot-2" || !d.Gateway ||
		d.GatewayURL != "ws://127.0.0.1:1/gateway" || cfg.GatewayLeaseTTL != 20*time.Second {
		t.Errorf("discord %+v", d)
	}
	tg := cfg.Telegram["acmebot"]
	if tg.SecretToken != "tgsec" || tg.Tenant != "slot-1" || tg.Chats["-100"] != "slot-2" || tg.ParseMode != "plain" {
		t.Errorf("telegram %+v", tg)
	}
	if cfg.PingInterval != 45*time.Second || cfg.PublicURL != "https://relay.example.com" || cfg.BufferLimit != 500 || cfg.SessionKeys == nil || cfg.SessionKeys.GroupSessionsPerUser || cfg.SessionKeys.ThreadSessionsPerUser {
		t.Errorf("settings %+v %+v", cfg, cfg.SessionKeys)
	}
	cfg.Store, cfg.Audit = relaytest.NewMemory(), audit.NewMemory()
	c, err := connector.New(cfg)
	if err != nil {
		t.Fatalf("New from file config: %v", err)
	}
	_ = c.Close()

	// A secret whose variable is empty names the setting.
	delete(env, "TG_SECRET")
	_, err = doc.Relay.Config(func(k string) string { return env[k] })
	if contract.KindOf(err) != contract.KindInvalid || !strings.Contains(err.Error(), "relay.telegram.acmebot.secret_token") || !strings.Contains(err.Error(), "TG_SECRET") {
		t.Errorf("missing env: %v", err)
	}
}
