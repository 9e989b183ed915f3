package connector

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay/twilio"
)

// TwilioAccount is one Twilio account, by account sid (the {account_sid}
// of /hooks/twilio/{account_sid} and the botId of a gateway's hello for
// platform sms or whatsapp).
type TwilioAccount struct {
	AuthToken string // signs webhooks and authenticates the Messages API
	// PublicURL is the webhook URL exactly as entered in the Twilio console
	// (https://relay.example.com/hooks/twilio/AC…); Twilio signs it, so it
	// is configured, never taken from the request's Host.
	PublicURL string
	// Numbers maps the account's numbers (the To of a message, E.164,
	// without the whatsapp: prefix) to tenants; Tenant takes the rest.
	Numbers map[string]contract.TenantSlot
	Tenant  contract.TenantSlot
	// Replies come from SMSFrom / WhatsAppFrom (E.164), or through the
	// messaging service when MessagingServiceSID is set.
	SMSFrom, WhatsAppFrom string
	MessagingServiceSID   string
	APIBaseURL            string // twilio.DefaultBaseURL when empty
	// Guardrails applies to both the account's SMS and WhatsApp messages.
	Guardrails guard.Config
}

// serveTwilio is POST /hooks/twilio/{account_sid}: incoming SMS and
// WhatsApp messages.
func (c *Connector) serveTwilio(w http.ResponseWriter, r *http.Request) {
	sid, a, body, ok := webhookEntry(w, r, c.cfg.Twilio, "account_sid", twilio.MaxBodyBytes)
	if !ok {
		return
	}
	form, err := twilio.Verify(a.AuthToken, a.PublicURL, r.Header.Get(twilio.SignatureHeader), body)
	if err != nil {
		c.log.Warn("relay: twilio request refused", "account", sid, "remote", r.RemoteAddr, "err", err)
		http.Error(w, "invalid request signature", http.StatusForbidden)
		return
	}
	if got := form.Get("AccountSid"); got != "" && got != sid {
		c.log.Warn("relay: twilio message for another account", "account", sid, "message_account", got)
		http.Error(w, "message for another account", http.StatusBadRequest)
		return
	}
	twiml := []byte(twilio.EmptyTwiML)
	w.Header().Set("Content-Type", "text/xml")
	in, err := twilio.Normalize(form)
	if errors.Is(err, twilio.ErrIgnored) {
		_, _ = w.Write(twiml)
		return
	}
	if err != nil {
		c.log.Warn("relay: twilio message refused", "account", sid, "err", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tenant := tenantOr(a.Numbers, strings.TrimPrefix(in.To, twilio.WhatsAppPrefix), a.Tenant)
	if tenant == "" {
		c.log.Warn("relay: twilio message with no tenant", "account", sid)
		_, _ = w.Write(twiml)
		return
	}
	c.rehost(r.Context(), tenant, &in.Event, twilioAttachments(sid, a, in))
	c.acceptDelivery(w, r, in.Event.Source.Platform, Inbound{Tenant: tenant, Bot: sid, Event: in.Event, DedupeID: in.Event.MessageID}, twiml)
}

// twilioClient answers outbound ops for one platform (sms or whatsapp) of
// an account through the Messages API.
type twilioClient struct {
	sendOnly // its platform: sms or whatsapp
	acct     TwilioAccount
	api      *twilio.Client
}

func (t *twilioClient) send(ctx context.Context, chatID, content, _ string, _ map[string]any) (string, error) {
	m := twilio.Message{To: chatID, From: t.acct.SMSFrom, MessagingServiceSID: t.acct.MessagingServiceSID, Body: content}
	if t.platform == twilio.PlatformWhatsApp {
		to := chatID
		if !strings.HasPrefix(to, twilio.WhatsAppPrefix) {
			to = twilio.WhatsAppPrefix + "+" + strings.TrimPrefix(to, "+")
		}
		m.To, m.From = to, ""
		if t.acct.WhatsAppFrom != "" {
			m.From = twilio.WhatsAppPrefix + strings.TrimPrefix(t.acct.WhatsAppFrom, twilio.WhatsAppPrefix)
		}
	}
	return t.api.Send(ctx, m)
}
