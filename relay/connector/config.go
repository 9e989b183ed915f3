// Package connector is the relay connector: the platform edge that gateways
// dial. It serves GET /relay (the gateways' WebSocket), POST
// /hooks/discord/{app} and POST /hooks/telegram/{bot} (the platforms'
// webhooks; Slack, Twilio, WhatsApp Cloud and WeCom in platforms.go); resolves each event's tenant from the event itself; keeps
// platform capabilities (Discord interaction tokens) in a vault that never
// reaches a gateway; deduplicates, buffers while no gateway of a tenant is
// connected, routes interrupts and follow-ups to the connection that owns a
// session, and writes one audit record per delivery in or out. A platform
// identity's guardrails (guardrails.go) scan its inbound messages for
// secrets and personal data before the gateway sees them.
//
// The payload of those records (a delivery's ids and content hash) is
// written as canonical JSON by hand (record.go), an audit.CanonicalWriter,
// because every message in or out pays for it: BenchmarkDeliveryPayload
// (2 shared cores, CPU time per op, median of six runs) puts it at
// 1.2 µs, 320 B and 1 alloc against 4.8 µs, 848 B and 3 allocs for
// encoding/json plus contract.CanonicalJSON (4.3×); TestDeliveryCanonical
// and FuzzDeliveryCanonical hold it to the same bytes. Reproduce with
// go test -run '^$' -bench DeliveryPayload -benchmem -count 6 ./relay/connector/
package connector

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/discord"
)

// Config configures a Connector. Store and Audit are required.
type Config struct {
	// Gateways binds each gateway id to one tenant and the secrets its
	// upgrade tokens are signed with.
	Gateways map[string]Gateway
	// Discord lists the Discord applications, by application id (the {app}
	// of /hooks/discord/{app} and the botId of a gateway's hello).
	Discord map[string]DiscordApp
	// Telegram lists the Telegram bots, by name (the {bot} of
	// /hooks/telegram/{bot} and the botId of a gateway's hello).
	Telegram map[string]TelegramBot
	// Slack lists the Slack apps (slack.go), Twilio the Twilio accounts
	// (twilio.go), WhatsApp the WhatsApp Cloud API numbers (whatsapp.go),
	// WeCom the WeCom applications (wecom.go).
	Slack    map[string]SlackApp
	Twilio   map[string]TwilioAccount
	WhatsApp map[string]WhatsAppNumber
	WeCom    map[string]WeComApp

	Store  relay.Store
	Audit  audit.Log
	Router Router       // NewLocalRouter() when nil
	Logger *slog.Logger // slog.Default() when nil
	Now    func() time.Time

	HTTPClient      *http.Client // for platform APIs; http.DefaultClient when nil
	DiscordBaseURL  string       // discord.DefaultBaseURL when empty
	TelegramBaseURL string       // telegram.DefaultBaseURL when empty

	// SessionKeys are the gateway's session-key switches; the gateway's
	// defaults (group sessions per user, thread sessions shared) when nil.
	SessionKeys *relay.SessionKeyOptions
	// BufferLimit bounds each tenant's buffer of undelivered events
	// (default 10,000).
	BufferLimit int
	// PingInterval is the keepalive period (default 30 s; negative: none).
	PingInterval time.Duration
	// LeaseTTL is how long a delivered buffered event waits for its
	// inbound_ack before another connection may receive it (default 2 min).
	LeaseTTL time.Duration
	// GatewayLeaseTTL is how long a Discord Gateway session's lease lasts
	// unrenewed (default 30 s): a crashed owner's bot is taken over by
	// another process after at most this long.
	GatewayLeaseTTL time.Duration
	// MediaTTL is how long files posted to /relay/media stay readable
	// (default and minimum one hour).
	MediaTTL time.Duration
	// PublicURL is the connector's external base URL
	// (https://relay.example.com): re-hosted inbound media is listed as
	// PublicURL + "/relay/media/{id}". When empty the path alone is listed.
	PublicURL string
	// Build is recorded in audit provenance.
	Build string
	// BotMessages delivers messages other bots and webhooks post where a
	// bot listens, marked source.is_bot true; off by default, when only
	// people's messages are delivered. The connector's own messages are
	// never delivered.
	BotMessages bool

	// Scanner finds what the platforms' guardrails look for (each
	// identity's Guardrails; guard/detect.Default in the binary, which
	// wires it only when a policy is active). Required when one is.
	Scanner guard.Scanner
	// OnGuardrail, when set, is told each guardrails record of an inbound
	// message once its audit record is written (serve counts them in
	// /metrics).
	OnGuardrail func(guard.Record)
}

// Gateway is one gateway's binding.
type Gateway struct {
	Tenant  contract.TenantSlot
	Secrets [][]byte // several during a rotation; any one verifies
	// MultiplexProfiles says the gateway serves several profiles from one
	// process (its multiplex_profiles setting), so its session keys start
	// agent:<profile> (HERMES-RELAY.md §3.3); Profile is its active profile
	// for events that name none. The connector keys a tenant's events this
	// way when any gateway of the tenant multiplexes.
	MultiplexProfiles bool
	Profile           string
}

// DiscordApp is one Discord application.
type DiscordApp struct {
	PublicKey string // hex Ed25519 key from the developer portal
	BotToken  string
	// Guilds maps guild ids to tenants, Users maps DM users to tenants;
	// Tenant, when set, takes what neither maps (the webhook path's tenant).
	Guilds map[string]contract.TenantSlot
	Users  map[string]contract.TenantSlot
	Tenant contract.TenantSlot
	// Gateway turns on the message Gateway (discordgw.go): this process
	// holds a WebSocket session for the bot while it owns the bot's lease,
	// and channel, thread and DM messages arrive as events.
	Gateway bool
	// GatewayURL, when set, is dialled instead of asking GET /gateway/bot.
	GatewayURL string
	// Guardrails is the identity's guardrails policy (guardrails.go).
	Guardrails guard.Config
}

// TelegramBot is one Telegram bot.
type TelegramBot struct {
	Token       string
	SecretToken string // the webhook's secret_token
	// Chats maps chat ids to tenants; Tenant, when set, takes the rest.
	Chats  map[string]contract.TenantSlot
	Tenant contract.TenantSlot
	// ParseMode is sent with messages: "MarkdownV2" (default, the
	// descriptor's dialect), "HTML", or "plain" for none. A message the
	// platform cannot parse is re-sent as plain text.
	ParseMode string
	// Guardrails is the bot's guardrails policy (guardrails.go).
	Guardrails guard.Config
}

func (cfg *Config) check() error {
	if cfg.Store == nil {
		return fmt.Errorf("connector: config: Store is required")
	}
	if cfg.Audit == nil {
		return fmt.Errorf("connector: config: Audit is required")
	}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fmt.Errorf("connector: config: public_url %q must be an absolute http(s) URL without query (https://relay.example.com)", cfg.PublicURL)
		}
	}
	for id, g := range cfg.Gateways {
		if !contract.ValidTenantSlot(string(g.Tenant)) {
			return fmt.Errorf("connector: config: gateway %q: tenant %q is not a tenant slot", id, g.Tenant)
		}
		if len(g.Secrets) == 0 {
			return fmt.Errorf("connector: config: gateway %q has no secret", id)
		}
		for _, s := range g.Secrets {
			if len(s) < 16 {
				return fmt.Errorf("connector: config: gateway %q: secrets must be at least 16 bytes", id)
			}
		}
	}
	slots := func(what string, m map[string]contract.TenantSlot, def contract.TenantSlot) error {
		for k, t := range m {
			if !contract.ValidTenantSlot(string(t)) {
				return fmt.Errorf("connector: config: %s %q: tenant %q is not a tenant slot", what, k, t)
			}
		}
		if def != "" && !contract.ValidTenantSlot(string(def)) {
			return fmt.Errorf("connector: config: %s: tenant %q is not a tenant slot", what, def)
		}
		return nil
	}
	for id, a := range cfg.Discord {
		if _, err := discord.ParsePublicKey(a.PublicKey); err != nil {
			return fmt.Errorf("connector: config: discord app %q: %w", id, err)
		}
		if err := slots("discord app "+id, a.Guilds, a.Tenant); err != nil {
			return err
		}
		if a.Gateway && (a.BotToken == "" || gatewayTenant(a) == "") {
			return fmt.Errorf("connector: config: discord app %q: gateway needs bot_token and a tenant (tenant, guilds or users)", id)
		}
		if err := slots("discord app "+id+" user", a.Users, ""); err != nil {
			return err
		}
	}
	for name, b := range cfg.Telegram {
		if b.SecretToken == "" {
			return fmt.Errorf("connector: config: telegram bot %q has no secret token", name)
		}
		if err := slots("telegram bot "+name, b.Chats, b.Tenant); err != nil {
			return err
		}
	}
	if err := cfg.checkPlatforms(slots); err != nil {
		return err
	}
	return cfg.checkGuardrails()
}

func mustKey(hexKey string) ed25519.PublicKey {
	k, _ := discord.ParsePublicKey(hexKey)
	return k
}
