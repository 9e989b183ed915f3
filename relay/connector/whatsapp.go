package connector

import (
	"context"
	"net/http"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay/whatsapp"
)

// WhatsAppNumber is one WhatsApp Cloud API business phone number, by phone
// number id (the {phone_number_id} of /hooks/whatsapp/{phone_number_id}
// and the botId of a gateway's hello for platform whatsapp_cloud).
type WhatsAppNumber struct {
	AppSecret   string // the Meta app's secret: signs webhook bodies
	VerifyToken string // chosen by the operator; answers the subscription handshake
	AccessToken string // a system-user token with whatsapp_business_messaging
	Tenant      contract.TenantSlot
	APIBaseURL  string // whatsapp.DefaultBaseURL (Graph API with version) when empty
	Guardrails  guard.Config
}

// serveWhatsAppChallenge is GET /hooks/whatsapp/{phone_number_id}: the
// subscription handshake.
func (c *Connector) serveWhatsAppChallenge(w http.ResponseWriter, r *http.Request) {
	n, ok := c.cfg.WhatsApp[r.PathValue("phone_number_id")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	challenge, ok := whatsapp.Challenge(r.URL.Query(), n.VerifyToken)
	if !ok {
		c.log.Warn("relay: whatsapp verification refused", "number", r.PathValue("phone_number_id"), "remote", r.RemoteAddr)
		http.Error(w, "verification refused", http.StatusForbidden)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write([]byte(challenge))
}

// serveWhatsApp is POST /hooks/whatsapp/{phone_number_id}. A Meta app
// posts every number's messages to each callback URL it has, so each
// message goes to the number named in its metadata (when configured with
// the same app secret); a message older than the dedupe window is dropped,
// since its replay could no longer be recognized.
func (c *Connector) serveWhatsApp(w http.ResponseWriter, r *http.Request) {
	id, n, body, ok := webhookEntry(w, r, c.cfg.WhatsApp, "phone_number_id", whatsapp.MaxBodyBytes)
	if !ok {
		return
	}
	if err := whatsapp.Verify(n.AppSecret, r.Header.Get(whatsapp.SignatureHeader), body); err != nil {
		c.log.Warn("relay: whatsapp request refused", "number", id, "remote", r.RemoteAddr, "err", err)
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
		return
	}
	p, err := whatsapp.ParsePayload(body)
	if err != nil {
		http.Error(w, "bad notification", http.StatusBadRequest)
		return
	}
	ins, err := whatsapp.Normalize(p)
	if err != nil {
		http.Error(w, "bad notification", http.StatusBadRequest)
		return
	}
	now := c.now()
	for _, in := range ins {
		number, target := id, n
		if in.PhoneNumberID != "" && in.PhoneNumberID != id {
			other, ok := c.cfg.WhatsApp[in.PhoneNumberID]
			if !ok || other.AppSecret != n.AppSecret {
				c.log.Warn("relay: whatsapp message for a number not configured here", "number", in.PhoneNumberID)
				continue
			}
			number, target = in.PhoneNumberID, other
		}
		if !in.SentAt.IsZero() && now.Sub(in.SentAt) > DedupeWindow {
			c.log.Warn("relay: whatsapp message older than the dedupe window dropped", "number", number, "message", in.Event.MessageID)
			continue
		}
		if in.MediaID != "" {
			api := &whatsapp.Client{BaseURL: target.APIBaseURL, PhoneNumberID: number, AccessToken: target.AccessToken, HTTP: c.cfg.HTTPClient}
			c.rehost(r.Context(), target.Tenant, &in.Event, whatsappAttachments(api, in))
		}
		if _, err := c.Deliver(r.Context(), Inbound{Tenant: target.Tenant, Bot: number, Event: in.Event, DedupeID: in.Event.MessageID}); err != nil {
			c.webhookError(w, whatsapp.Platform, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// whatsappClient answers outbound ops through the Graph API.
type whatsappClient struct {
	sendOnly
	api *whatsapp.Client
}

func (s *whatsappClient) send(ctx context.Context, chatID, content, replyTo string, _ map[string]any) (string, error) {
	return s.api.SendText(ctx, chatID, content, replyTo)
}

func (s *whatsappClient) typing(context.Context, string, map[string]any) error {
	return errUnsupported(whatsapp.Platform, "show typing without a message to mark read")
}
