package connector

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay/slack"
	"github.com/caduceus-dev/caduceus/relay/twilio"
	"github.com/caduceus-dev/caduceus/relay/wecom"
	"github.com/caduceus-dev/caduceus/relay/whatsapp"
)

// platformClient answers outbound ops on one platform identity. The
// platforms added after Discord and Telegram each implement it (slack.go,
// twilio.go, whatsapp.go, wecom.go).
type platformClient interface {
	send(ctx context.Context, chatID, content, replyTo string, meta map[string]any) (string, error)
	edit(ctx context.Context, chatID, messageID, content string) error
	typing(ctx context.Context, chatID string, meta map[string]any) error
	chatInfo(ctx context.Context, chatID string) (name, typ string, err error)
}

// errUnsupported is what a platform answers for an op its API lacks.
func errUnsupported(platform, op string) error {
	return fmt.Errorf("relay: %s cannot %s", platform, op)
}

// sendOnly answers edit, typing and chat info with errUnsupported, for the
// clients of platforms whose API can only send (Twilio, WhatsApp Cloud,
// WeCom), which embed it.
type sendOnly struct{ platform string }

func (s sendOnly) edit(context.Context, string, string, string) error {
	return errUnsupported(s.platform, "edit a message")
}

func (s sendOnly) typing(context.Context, string, map[string]any) error {
	return errUnsupported(s.platform, "show typing")
}

func (s sendOnly) chatInfo(context.Context, string) (string, string, error) {
	return "", "", errUnsupported(s.platform, "look a chat up")
}

type slotCheck func(what string, m map[string]contract.TenantSlot, def contract.TenantSlot) error

// checkPlatforms checks the Slack, Twilio, WhatsApp and WeCom entries.
func (cfg *Config) checkPlatforms(slots slotCheck) error {
	for id, a := range cfg.Slack {
		if a.SigningSecret == "" {
			return fmt.Errorf("connector: config: slack app %q has no signing secret", id)
		}
		if err := slots("slack app "+id, a.Teams, a.Tenant); err != nil {
			return err
		}
	}
	for sid, a := range cfg.Twilio {
		if a.AuthToken == "" {
			return fmt.Errorf("connector: config: twilio account %q has no auth token", sid)
		}
		if u, err := url.Parse(a.PublicURL); err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return fmt.Errorf("connector: config: twilio account %q: public_url %q is not the absolute webhook URL Twilio signs", sid, a.PublicURL)
		}
		if err := slots("twilio account "+sid, a.Numbers, a.Tenant); err != nil {
			return err
		}
	}
	for id, n := range cfg.WhatsApp {
		if n.AppSecret == "" || n.VerifyToken == "" {
			return fmt.Errorf("connector: config: whatsapp number %q needs app_secret and verify_token", id)
		}
		if !contract.ValidTenantSlot(string(n.Tenant)) {
			return fmt.Errorf("connector: config: whatsapp number %q: tenant %q is not a tenant slot", id, n.Tenant)
		}
	}
	for corp, a := range cfg.WeCom {
		if _, err := wecom.NewCrypt(a.Token, a.EncodingAESKey, corp); err != nil {
			return fmt.Errorf("connector: config: wecom corp %q: %w", corp, err)
		}
		if !contract.ValidTenantSlot(string(a.Tenant)) {
			return fmt.Errorf("connector: config: wecom corp %q: tenant %q is not a tenant slot", corp, a.Tenant)
		}
	}
	return nil
}

// addPlatformEdges registers an edge per configured Slack app, Twilio
// account, WhatsApp number and WeCom app.
func (c *Connector) addPlatformEdges() {
	for id, a := range c.cfg.Slack {
		c.edges[identKey{platform: slack.Platform, bot: id}] = &edge{platform: slack.Platform, bot: id, desc: slack.Descriptor(),
			client: &slackClient{api: &slack.Client{BaseURL: a.APIBaseURL, Token: a.BotToken, HTTP: c.cfg.HTTPClient}}}
	}
	for sid, a := range c.cfg.Twilio {
		api := &twilio.Client{BaseURL: a.APIBaseURL, AccountSID: sid, AuthToken: a.AuthToken, HTTP: c.cfg.HTTPClient}
		for _, p := range []string{twilio.PlatformSMS, twilio.PlatformWhatsApp} {
			c.edges[identKey{platform: p, bot: sid}] = &edge{platform: p, bot: sid, desc: twilio.Descriptor(p),
				client: &twilioClient{sendOnly: sendOnly{p}, acct: a, api: api}}
		}
	}
	for id, n := range c.cfg.WhatsApp {
		c.edges[identKey{platform: whatsapp.Platform, bot: id}] = &edge{platform: whatsapp.Platform, bot: id, desc: whatsapp.Descriptor(),
			client: &whatsappClient{sendOnly: sendOnly{whatsapp.Platform}, api: &whatsapp.Client{BaseURL: n.APIBaseURL, PhoneNumberID: id, AccessToken: n.AccessToken, HTTP: c.cfg.HTTPClient}}}
	}
	for corp, a := range c.cfg.WeCom {
		cr, _ := wecom.NewCrypt(a.Token, a.EncodingAESKey, corp) // checked by New
		c.edges[identKey{platform: wecom.Platform, bot: corp}] = &edge{platform: wecom.Platform, bot: corp, desc: wecom.Descriptor(),
			client: &wecomClient{sendOnly: sendOnly{wecom.Platform}, crypt: cr, api: &wecom.Client{BaseURL: a.APIBaseURL, CorpID: corp, CorpSecret: a.CorpSecret,
				AgentID: a.AgentID, HTTP: c.cfg.HTTPClient, Now: c.now}}}
	}
}

// platformHooks are the webhooks of the platforms in this file, by route
// pattern.
var platformHooks = []struct {
	pattern string
	serve   func(*Connector, http.ResponseWriter, *http.Request)
}{
	{"POST /hooks/slack/{app}", (*Connector).serveSlack},
	{"POST /hooks/twilio/{account_sid}", (*Connector).serveTwilio},
	{"GET /hooks/whatsapp/{phone_number_id}", (*Connector).serveWhatsAppChallenge},
	{"POST /hooks/whatsapp/{phone_number_id}", (*Connector).serveWhatsApp},
	{"GET /hooks/wecom/{corp_id}", (*Connector).serveWeComVerify},
	{"POST /hooks/wecom/{corp_id}", (*Connector).serveWeCom},
}

// platformRoutes mounts platformHooks.
func (c *Connector) platformRoutes(mux *http.ServeMux) {
	for _, h := range platformHooks {
		mux.HandleFunc(h.pattern, func(w http.ResponseWriter, r *http.Request) { h.serve(c, w, r) })
	}
}

// PlatformRoutes are the webhook patterns of the platforms after Discord
// and Telegram, for servers that route patterns to the connector's Handler.
var PlatformRoutes = func() []string {
	patterns := make([]string, len(platformHooks))
	for i, h := range platformHooks {
		patterns[i] = h.pattern
	}
	return patterns
}()

// acceptDelivery delivers in and answers the platform: 200 (with body, if
// any) whether the event was delivered, buffered or a duplicate; an error
// status when the store failed, so that the platform retries.
func (c *Connector) acceptDelivery(w http.ResponseWriter, r *http.Request, platform string, in Inbound, body []byte) {
	d, err := c.Deliver(r.Context(), in)
	if err != nil {
		c.webhookError(w, platform, err)
		return
	}
	if d == Duplicate {
		c.log.Info("relay: replayed or retried webhook; nothing delivered", "platform", platform, "bot", in.Bot, "message", in.DedupeID)
	}
	if body != nil {
		_, _ = w.Write(body)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// FilePlatforms are the Slack, Twilio, WhatsApp and WeCom maps of a
// FileConfig (inlined into the relay section):
//
//	relay:
//	  slack:
//	    A0123456789:
//	      signing_secret: env:SLACK_SIGNING_SECRET
//	      bot_token: env:SLACK_BOT_TOKEN
//	      tenant: slot-1
//	      teams: {T0123456: slot-1}
//	      api_base_url: https://slack.com/api
//	  twilio:
//	    AC0123456789abcdef0123456789abcdef:
//	      auth_token: env:TWILIO_AUTH_TOKEN
//	      public_url: https://relay.example.com/hooks/twilio/AC0123456789abcdef0123456789abcdef
//	      tenant: slot-1
//	      sms_from: "+15557654321"
//	      whatsapp_from: "+14155238886"
//	  whatsapp:
//	    "106540352242922":
//	      app_secret: env:WHATSAPP_APP_SECRET
//	      verify_token: env:WHATSAPP_VERIFY_TOKEN
//	      access_token: env:WHATSAPP_ACCESS_TOKEN
//	      tenant: slot-1
//	  wecom:
//	    ww0123456789abcdef:
//	      token: env:WECOM_TOKEN
//	      encoding_aes_key: env:WECOM_AES_KEY
//	      corp_secret: env:WECOM_SECRET
//	      agent_id: 1000002
//	      tenant: slot-1
type FilePlatforms struct {
	Slack    map[string]FileSlackApp       `yaml:"slack"`
	Twilio   map[string]FileTwilioAccount  `yaml:"twilio"`
	WhatsApp map[string]FileWhatsAppNumber `yaml:"whatsapp"`
	WeCom    map[string]FileWeComApp       `yaml:"wecom"`
}

// FileWeComApp is one WeCom application in a FileConfig.
type FileWeComApp struct {
	Token          string       `yaml:"token"`
	EncodingAESKey string       `yaml:"encoding_aes_key"`
	CorpSecret     string       `yaml:"corp_secret"`
	AgentID        int64        `yaml:"agent_id"`
	Tenant         string       `yaml:"tenant"`
	APIBaseURL     string       `yaml:"api_base_url"`
	Guardrails     guard.Config `yaml:"guardrails"`
}

// FileWhatsAppNumber is one WhatsApp Cloud API number in a FileConfig.
type FileWhatsAppNumber struct {
	AppSecret   string       `yaml:"app_secret"`
	VerifyToken string       `yaml:"verify_token"`
	AccessToken string       `yaml:"access_token"`
	Tenant      string       `yaml:"tenant"`
	APIBaseURL  string       `yaml:"api_base_url"`
	Guardrails  guard.Config `yaml:"guardrails"`
}

// FileTwilioAccount is one Twilio account in a FileConfig.
type FileTwilioAccount struct {
	AuthToken           string            `yaml:"auth_token"`
	PublicURL           string            `yaml:"public_url"`
	Tenant              string            `yaml:"tenant"`
	Numbers             map[string]string `yaml:"numbers"`
	SMSFrom             string            `yaml:"sms_from"`
	WhatsAppFrom        string            `yaml:"whatsapp_from"`
	MessagingServiceSID string            `yaml:"messaging_service_sid"`
	APIBaseURL          string            `yaml:"api_base_url"`
	Guardrails          guard.Config      `yaml:"guardrails"`
}

// FileSlackApp is one Slack app in a FileConfig.
type FileSlackApp struct {
	SigningSecret string            `yaml:"signing_secret"`
	BotToken      string            `yaml:"bot_token"`
	Tenant        string            `yaml:"tenant"`
	Teams         map[string]string `yaml:"teams"`
	// TopLevelThreads mirrors the gateway's Slack top-level stamping
	// (default true; set false when the gateway's reply_in_thread is off).
	TopLevelThreads *bool        `yaml:"top_level_threads"`
	APIBaseURL      string       `yaml:"api_base_url"`
	Guardrails      guard.Config `yaml:"guardrails"`
}

func (f FilePlatforms) config(cfg *Config, secret func(where, v string) string, slots func(map[string]string) map[string]contract.TenantSlot) {
	if len(f.Slack) > 0 {
		cfg.Slack = map[string]SlackApp{}
	}
	for id, a := range f.Slack {
		cfg.Slack[id] = SlackApp{SigningSecret: secret("relay.slack."+id+".signing_secret", a.SigningSecret),
			BotToken: secret("relay.slack."+id+".bot_token", a.BotToken), Tenant: contract.TenantSlot(a.Tenant),
			Teams: slots(a.Teams), NoTopLevelStamp: a.TopLevelThreads != nil && !*a.TopLevelThreads, APIBaseURL: a.APIBaseURL,
			Guardrails: a.Guardrails}
	}
	if len(f.Twilio) > 0 {
		cfg.Twilio = map[string]TwilioAccount{}
	}
	for sid, a := range f.Twilio {
		cfg.Twilio[sid] = TwilioAccount{AuthToken: secret("relay.twilio."+sid+".auth_token", a.AuthToken), PublicURL: a.PublicURL,
			Tenant: contract.TenantSlot(a.Tenant), Numbers: slots(a.Numbers), SMSFrom: a.SMSFrom, WhatsAppFrom: a.WhatsAppFrom,
			MessagingServiceSID: a.MessagingServiceSID, APIBaseURL: a.APIBaseURL, Guardrails: a.Guardrails}
	}
	if len(f.WhatsApp) > 0 {
		cfg.WhatsApp = map[string]WhatsAppNumber{}
	}
	for id, n := range f.WhatsApp {
		w := "relay.whatsapp." + id
		cfg.WhatsApp[id] = WhatsAppNumber{AppSecret: secret(w+".app_secret", n.AppSecret), VerifyToken: secret(w+".verify_token", n.VerifyToken),
			AccessToken: secret(w+".access_token", n.AccessToken), Tenant: contract.TenantSlot(n.Tenant), APIBaseURL: n.APIBaseURL,
			Guardrails: n.Guardrails}
	}
	if len(f.WeCom) > 0 {
		cfg.WeCom = map[string]WeComApp{}
	}
	for corp, a := range f.WeCom {
		w := "relay.wecom." + corp
		cfg.WeCom[corp] = WeComApp{Token: secret(w+".token", a.Token), EncodingAESKey: secret(w+".encoding_aes_key", a.EncodingAESKey),
			CorpSecret: secret(w+".corp_secret", a.CorpSecret), AgentID: a.AgentID, Tenant: contract.TenantSlot(a.Tenant), APIBaseURL: a.APIBaseURL,
			Guardrails: a.Guardrails}
	}
}

// configured reports whether any platform of f is configured.
func (f FilePlatforms) configured() bool {
	return len(f.Slack) > 0 || len(f.Twilio) > 0 || len(f.WhatsApp) > 0 || len(f.WeCom) > 0
}

// Configured reports whether the relay section names any gateway or
// platform.
func (f FileConfig) Configured() bool {
	return len(f.Gateways) > 0 || len(f.Discord) > 0 || len(f.Telegram) > 0 || f.FilePlatforms.configured()
}
