package connector_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/whatsapp"
)

const (
	waNumber = "106540352242922"
	waOther  = "106540352242923"
	waSecret = "meta-app-secret-1"
)

func withWhatsApp(api *rawAPI) func(*connector.Config) {
	return func(c *connector.Config) {
		c.WhatsApp = map[string]connector.WhatsAppNumber{
			waNumber: {AppSecret: waSecret, VerifyToken: "verify-me", AccessToken: "EAAG-access", Tenant: slot1, APIBaseURL: api.srv.URL + "/v21.0"},
			waOther:  {AppSecret: waSecret, VerifyToken: "verify-me", AccessToken: "EAAG-other", Tenant: slot2, APIBaseURL: api.srv.URL + "/v21.0"},
		}
	}
}

func (e *env) postWhatsApp(body, secret string) int {
	e.t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/hooks/whatsapp/"+waNumber, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(whatsapp.SignatureHeader, whatsapp.Sign(secret, []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waMessage(number, from, id string, ts time.Time, text string) string {
	return fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"WABA1","changes":[{"field":"messages","value":{"messaging_product":"whatsapp",`+
		`"metadata":{"display_phone_number":"15550000001","phone_number_id":%q},"contacts":[{"profile":{"name":"Jo"},"wa_id":%q}],`+
		`"messages":[{"from":%q,"id":%q,"timestamp":"%d","type":"text","text":{"body":%q}}]}}]}]}`, number, from, from, id, ts.Unix(), text)
}

func TestWhatsAppCloudWebhook(t *testing.T) {
	api := newRawAPI(t, func(r *http.Request, body string, n int) (int, string) {
		return 200, fmt.Sprintf(`{"messaging_product":"whatsapp","messages":[{"id":"wamid.out%d"}]}`, n)
	})
	e := newEnv(t, withWhatsApp(api))
	now := e.clock.Now()

	get := func(q string) (int, string) {
		resp, err := http.Get(e.srv.URL + "/hooks/whatsapp/" + waNumber + "?" + q)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=1158201444"); code != 200 || body != "1158201444" {
		t.Errorf("handshake: %d %q", code, body)
	}
	if code, _ := get("hub.mode=subscribe&hub.verify_token=guess&hub.challenge=1158201444"); code != 403 {
		t.Errorf("handshake with a wrong token: %d", code)
	}

	msg := waMessage(waNumber, "4915112345678", "wamid.A1", now, "hallo")
	if code := e.postWhatsApp(msg, waSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	if code := e.postWhatsApp(waMessage(waNumber, "4915112345678", "wamid.F1", now, "forged"), "guessed"); code != 401 {
		t.Errorf("forged: %d", code)
	}
	if code := e.postWhatsApp(waMessage(waNumber, "4915112345678", "wamid.S1", now.Add(-25*time.Hour), "stale"), waSecret); code != 200 {
		t.Errorf("stale: %d", code)
	}
	if code := e.postWhatsApp(msg, waSecret); code != 200 {
		t.Errorf("replay: %d", code)
	}
	g := e.gateway("gw-a", secretA, whatsapp.Platform, waNumber)
	if d, ok := g.Descriptor(); !ok || d.MaxMessageLength != 4096 || d.MarkdownDialect != "whatsapp" {
		t.Errorf("descriptor %+v", d)
	}
	in := g.next(t)
	if in.Event.Text != "hallo" || in.SessionKey != "agent:main:whatsapp_cloud:dm:4915112345678" || in.Event.Source.UserName != "Jo" {
		t.Errorf("event %+v key %q", in.Event, in.SessionKey)
	}
	g.none(t, "forged, stale and replayed notifications")

	// The app posts another number's message to this URL: it goes to that
	// number's tenant, not this one.
	if code := e.postWhatsApp(waMessage(waOther, "4915100000000", "wamid.O1", now, "other number"), waSecret); code != 200 {
		t.Fatal(code)
	}
	g.none(t, "another number's message")
	g2 := e.gateway("gw-b", secretB, whatsapp.Platform, waOther)
	if in := g2.next(t); in.Event.Text != "other number" {
		t.Errorf("other number: %+v", in.Event)
	}

	ctx := t.Context()
	if r := g.Send(ctx, "4915112345678", "antwort", "wamid.A1", nil); !r.Success || r.MessageID != "wamid.out1" {
		t.Errorf("send: %+v", r)
	}
	if r := g.Edit(ctx, "4915112345678", "wamid.out1", "x", nil); r.Success {
		t.Errorf("edit succeeded: %+v", r)
	}
	if r := g.Send(ctx, "4915100000000", "not mine", "", nil); r.Success {
		t.Errorf("send to another tenant's chat: %+v", r)
	}
	want := `POST /v21.0/` + waNumber + `/messages Bearer EAAG-access {"context":{"message_id":"wamid.A1"},"messaging_product":"whatsapp","recipient_type":"individual","text":{"body":"antwort","preview_url":false},"to":"4915112345678","type":"text"}`
	if calls := api.Calls(); len(calls) != 1 || calls[0] != want {
		t.Errorf("Graph API saw:\n%s\nwant %s", api.seen(), want)
	}
}
