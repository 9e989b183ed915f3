package connector_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/twilio"
)

const (
	twilioSID   = "AC00000000000000000000000000000001"
	twilioToken = "twilio-auth-token-1"
	twilioURL   = "https://relay.example.com/hooks/twilio/" + twilioSID
)

func withTwilio(api *rawAPI) func(*connector.Config) {
	return func(c *connector.Config) {
		c.Twilio = map[string]connector.TwilioAccount{twilioSID: {AuthToken: twilioToken, PublicURL: twilioURL,
			Numbers: map[string]contract.TenantSlot{"+15550000001": slot1, "+15550000002": slot2},
			SMSFrom: "+15550000001", WhatsAppFrom: "+15550000001", APIBaseURL: api.srv.URL}}
	}
}

// postTwilio posts form, signed with token over the configured public URL.
func (e *env) postTwilio(form url.Values, token string) (int, string) {
	e.t.Helper()
	body := form.Encode()
	req, _ := http.NewRequest("POST", e.srv.URL+"/hooks/twilio/"+twilioSID, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set(twilio.SignatureHeader, twilio.Sign(token, twilioURL, form))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func twilioMessage(sid, from, to, body string) url.Values {
	return url.Values{"MessageSid": {sid}, "SmsSid": {sid}, "AccountSid": {twilioSID}, "From": {from}, "To": {to},
		"Body": {body}, "NumMedia": {"0"}, "SmsStatus": {"received"}}
}

func TestTwilioWebhook(t *testing.T) {
	api := newRawAPI(t, func(r *http.Request, body string, n int) (int, string) {
		return 201, `{"sid":"SM90` + string(rune('0'+n)) + `","status":"queued"}`
	})
	e := newEnv(t, withTwilio(api))

	// Buffered while no gateway is connected; answered with empty TwiML.
	sms := twilioMessage("SM001", "+15551230001", "+15550000001", "hello by sms")
	if code, body := e.postTwilio(sms, twilioToken); code != 200 || body != twilio.EmptyTwiML {
		t.Fatalf("sms webhook: %d %s", code, body)
	}
	// Forged (wrong token), tampered (signed for other values), replayed
	// (the same signed request again): nothing delivered.
	if code, _ := e.postTwilio(twilioMessage("SM002", "+15551230001", "+15550000001", "forged"), "guessed-token"); code != 403 {
		t.Errorf("forged: %d", code)
	}
	tampered := twilioMessage("SM003", "+15551230001", "+15550000001", "original")
	req, _ := http.NewRequest("POST", e.srv.URL+"/hooks/twilio/"+twilioSID, strings.NewReader(strings.Replace(tampered.Encode(), "original", "changed", 1)))
	req.Header.Set(twilio.SignatureHeader, twilio.Sign(twilioToken, twilioURL, tampered))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("tampered: %v %v", resp, err)
	}
	if code, _ := e.postTwilio(sms, twilioToken); code != 200 {
		t.Errorf("replay: %d", code)
	}

	gs := e.gateway("gw-a", secretA, "sms", twilioSID)
	if d, ok := gs.Descriptor(); !ok || d.Platform != "sms" || d.MaxMessageLength != 1600 || d.MarkdownDialect != "plain" {
		t.Errorf("sms descriptor %+v", d)
	}
	in := gs.next(t)
	if in.Event.Text != "hello by sms" || in.SessionKey != "agent:main:sms:dm:+15551230001" || in.BufferID == "" {
		t.Errorf("sms event %+v key %q", in.Event, in.SessionKey)
	}
	gs.none(t, "forged, tampered and replayed requests")

	gw := e.gateway("gw-a2", secretA2, "whatsapp", twilioSID)
	wa := twilioMessage("SM004", "whatsapp:+4915112345678", "whatsapp:+15550000001", "hallo")
	wa.Set("ProfileName", "Jo")
	if code, _ := e.postTwilio(wa, twilioToken); code != 200 {
		t.Fatal(code)
	}
	in = gw.next(t)
	if in.SessionKey != "agent:main:whatsapp:dm:4915112345678" || in.Event.Source.ChatID != "4915112345678" || in.Event.Source.UserName != "Jo" {
		t.Errorf("whatsapp event %+v key %q", in.Event.Source, in.SessionKey)
	}
	// A message to another tenant's number does not reach this tenant; an
	// unkeyable WhatsApp id is refused at the edge.
	if code, _ := e.postTwilio(twilioMessage("SM005", "+15551230009", "+15550000002", "other tenant"), twilioToken); code != 200 {
		t.Fatal(code)
	}
	gs.none(t, "another tenant's number")
	if code, _ := e.postTwilio(twilioMessage("SM006", "whatsapp:+1 555 123", "whatsapp:+15550000001", "x"), twilioToken); code != 400 {
		t.Errorf("unkeyable whatsapp id: %d", code)
	}
	// A status callback is answered and ignored.
	if code, _ := e.postTwilio(url.Values{"MessageSid": {"SM900"}, "AccountSid": {twilioSID}, "From": {"+15550000001"}, "To": {"+15551230001"}, "MessageStatus": {"delivered"}}, twilioToken); code != 200 {
		t.Errorf("status callback: %d", code)
	}
	gs.none(t, "status callback")

	ctx := t.Context()
	if r := gs.Send(ctx, "+15551230001", "reply by sms", "", nil); !r.Success || r.MessageID == "" {
		t.Errorf("sms send: %+v", r)
	}
	if r := gw.Send(ctx, "4915112345678", "antwort", "", nil); !r.Success {
		t.Errorf("whatsapp send: %+v", r)
	}
	if r := gs.Edit(ctx, "+15551230001", "SM901", "x", nil); r.Success || !strings.Contains(r.Error, "cannot edit") {
		t.Errorf("sms edit: %+v", r)
	}
	if r := gs.Send(ctx, "+15551230009", "not mine", "", nil); r.Success {
		t.Errorf("send to another tenant's chat: %+v", r)
	}
	calls := api.Calls()
	want := []string{
		"POST /2010-04-01/Accounts/" + twilioSID + "/Messages.json Basic ",
		"Body=reply+by+sms&From=%2B15550000001&To=%2B15551230001",
		"Body=antwort&From=whatsapp%3A%2B15550000001&To=whatsapp%3A%2B4915112345678",
	}
	if len(calls) != 2 || !strings.HasPrefix(calls[0], want[0]) || !strings.HasSuffix(calls[0], want[1]) || !strings.HasSuffix(calls[1], want[2]) {
		t.Errorf("Messages API saw:\n%s", api.seen())
	}
	if strings.Contains(e.auditBodies(slot1), twilioToken) || strings.Contains(e.logs.String(), twilioToken) {
		t.Error("the auth token leaked")
	}
}

func TestTwilioConfig(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		acct connector.TwilioAccount
		want string
	}{
		{connector.TwilioAccount{PublicURL: twilioURL, Tenant: slot1}, "no auth token"},
		{connector.TwilioAccount{AuthToken: "x", Tenant: slot1}, "public_url"},
		{connector.TwilioAccount{AuthToken: "x", PublicURL: "/hooks/twilio/AC1", Tenant: slot1}, "public_url"},
		{connector.TwilioAccount{AuthToken: "x", PublicURL: twilioURL, Tenant: "Not A Slot"}, "tenant"},
	} {
		_, err := connector.New(connector.Config{Store: e.store, Audit: e.audit, Twilio: map[string]connector.TwilioAccount{"AC1": c.acct}})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.acct, err, c.want)
		}
	}
}
