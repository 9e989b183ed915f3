package connector

import (
	"fmt"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay"
)

// FileConfig is the relay section of a YAML configuration file. Every
// secret (gateway secrets, bot tokens, webhook secret tokens) may be given
// as "env:NAME" to read it from the environment instead of the file.
//
//	relay:
//	  gateways:
//	    gw-acme: {tenant: slot-1, secrets: ["env:RELAY_GW_ACME_SECRET"]}
//	  discord:
//	    "123456789012345678":
//	      public_key: d75a98...
//	      bot_token: env:DISCORD_BOT_TOKEN
//	      guilds: {"111": slot-1}
//	      gateway: true   # receive channel, thread and DM messages
//	  telegram:
//	    acmebot:
//	      token: env:TELEGRAM_TOKEN
//	      secret_token: env:TELEGRAM_WEBHOOK_SECRET
//	      tenant: slot-1
//	      guardrails: {default: flag, secret: redact, card: block}   # docs/guardrails.md
//	  ping_interval: 30s
//	  public_url: https://relay.example.com   # re-hosted media is listed as <public_url>/relay/media/{id}
//	  bot_messages: false   # true: deliver other bots' messages too (source.is_bot true)
type FileConfig struct {
	Gateways              map[string]FileGateway     `yaml:"gateways"`
	Discord               map[string]FileDiscordApp  `yaml:"discord"`
	Telegram              map[string]FileTelegramBot `yaml:"telegram"`
	FilePlatforms         `yaml:",inline"`
	DiscordBaseURL        string        `yaml:"discord_base_url"`
	TelegramBaseURL       string        `yaml:"telegram_base_url"`
	PublicURL             string        `yaml:"public_url"`
	BufferLimit           int           `yaml:"buffer_limit"`
	PingInterval          time.Duration `yaml:"ping_interval"`
	LeaseTTL              time.Duration `yaml:"lease_ttl"`
	GatewayLeaseTTL       time.Duration `yaml:"gateway_lease_ttl"`
	GroupSessionsPerUser  *bool         `yaml:"group_sessions_per_user"`
	ThreadSessionsPerUser *bool         `yaml:"thread_sessions_per_user"`
	// SlackTopLevelThreads mirrors the gateway's Slack knobs
	// reply_in_thread and dm_top_level_threads_as_sessions (default on).
	SlackTopLevelThreads *bool `yaml:"slack_top_level_threads"`
	// BotMessages delivers other bots' messages (is_bot true); default off.
	BotMessages bool `yaml:"bot_messages"`
}

// FileGateway is one gateway in a FileConfig.
type FileGateway struct {
	Tenant            string   `yaml:"tenant"`
	Secrets           []string `yaml:"secrets"`
	MultiplexProfiles bool     `yaml:"multiplex_profiles"`
	Profile           string   `yaml:"profile"`
}

// FileDiscordApp is one Discord application in a FileConfig.
type FileDiscordApp struct {
	PublicKey string            `yaml:"public_key"`
	BotToken  string            `yaml:"bot_token"`
	Tenant    string            `yaml:"tenant"`
	Guilds    map[string]string `yaml:"guilds"`
	Users     map[string]string `yaml:"users"`
	// Gateway turns on the message Gateway session; GatewayURL overrides
	// GET /gateway/bot (for tests and proxies).
	Gateway    bool   `yaml:"gateway"`
	GatewayURL string `yaml:"gateway_url"`
	// Guardrails is the app's guardrails policy (docs/guardrails.md).
	Guardrails guard.Config `yaml:"guardrails"`
}

// FileTelegramBot is one Telegram bot in a FileConfig.
type FileTelegramBot struct {
	Token       string            `yaml:"token"`
	SecretToken string            `yaml:"secret_token"`
	Tenant      string            `yaml:"tenant"`
	Chats       map[string]string `yaml:"chats"`
	ParseMode   string            `yaml:"parse_mode"`
	// Guardrails is the bot's guardrails policy (docs/guardrails.md).
	Guardrails guard.Config `yaml:"guardrails"`
}

// Config turns f into a Config, reading "env:NAME" secrets through getenv.
// Store, Audit, Logger and Router are left for the caller. It returns an
// invalid *contract.Error naming the setting when a referenced variable is
// empty; New checks the rest.
func (f FileConfig) Config(getenv func(string) string) (Config, error) {
	var bad error
	secret := func(where, v string) string {
		name, ok := strings.CutPrefix(v, "env:")
		if !ok {
			return v
		}
		s := getenv(name)
		if s == "" && bad == nil {
			bad = contract.FieldError(where, "relay_config", "relay: %s: environment variable %s is empty", where, name)
		}
		return s
	}
	slots := func(m map[string]string) map[string]contract.TenantSlot {
		if m == nil {
			return nil
		}
		out := make(map[string]contract.TenantSlot, len(m))
		for k, v := range m {
			out[k] = contract.TenantSlot(v)
		}
		return out
	}
	cfg := Config{
		Gateways: map[string]Gateway{}, Discord: map[string]DiscordApp{}, Telegram: map[string]TelegramBot{},
		DiscordBaseURL: f.DiscordBaseURL, TelegramBaseURL: f.TelegramBaseURL, PublicURL: f.PublicURL,
		BufferLimit: f.BufferLimit, PingInterval: f.PingInterval, LeaseTTL: f.LeaseTTL,
		GatewayLeaseTTL: f.GatewayLeaseTTL, BotMessages: f.BotMessages,
	}
	for id, g := range f.Gateways {
		var secrets [][]byte
		for i, s := range g.Secrets {
			secrets = append(secrets, []byte(secret(fmt.Sprintf("relay.gateways.%s.secrets[%d]", id, i), s)))
		}
		cfg.Gateways[id] = Gateway{Tenant: contract.TenantSlot(g.Tenant), Secrets: secrets,
			MultiplexProfiles: g.MultiplexProfiles, Profile: g.Profile}
	}
	for id, a := range f.Discord {
		cfg.Discord[id] = DiscordApp{PublicKey: a.PublicKey, BotToken: secret("relay.discord."+id+".bot_token", a.BotToken),
			Tenant: contract.TenantSlot(a.Tenant), Guilds: slots(a.Guilds), Users: slots(a.Users),
			Gateway: a.Gateway, GatewayURL: a.GatewayURL, Guardrails: a.Guardrails}
	}
	for name, b := range f.Telegram {
		cfg.Telegram[name] = TelegramBot{Token: secret("relay.telegram."+name+".token", b.Token),
			SecretToken: secret("relay.telegram."+name+".secret_token", b.SecretToken),
			Tenant:      contract.TenantSlot(b.Tenant), Chats: slots(b.Chats), ParseMode: b.ParseMode,
			Guardrails: b.Guardrails}
	}
	f.FilePlatforms.config(&cfg, secret, slots)
	if f.GroupSessionsPerUser != nil || f.ThreadSessionsPerUser != nil || f.SlackTopLevelThreads != nil {
		o := relay.DefaultSessionKeyOptions()
		if f.GroupSessionsPerUser != nil {
			o.GroupSessionsPerUser = *f.GroupSessionsPerUser
		}
		if f.ThreadSessionsPerUser != nil {
			o.ThreadSessionsPerUser = *f.ThreadSessionsPerUser
		}
		if f.SlackTopLevelThreads != nil {
			o.SlackTopLevelThreads = *f.SlackTopLevelThreads
		}
		cfg.SessionKeys = &o
	}
	if bad != nil {
		return Config{}, bad
	}
	if where, err := cfg.validateGuardrails(); err != nil {
		return Config{}, contract.FieldError(where, "relay_config", "relay: %v", err)
	}
	return cfg, nil
}
