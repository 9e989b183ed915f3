package connector_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/relaytest"
)

// tgFileBytes is what the fake Telegram file server holds for a file id.
func tgFileBytes(fileID string) string { return "\xff\xd8\xff jpeg bytes of " + fileID }

// getMedia GETs a re-hosted media URL from the test server with the
// upgrade token of gateway id.
func (e *env) getMedia(t *testing.T, mediaURL, id string, secret []byte) (int, []byte, http.Header) {
	t.Helper()
	path, ok := strings.CutPrefix(mediaURL, "https://relay.example.com")
	if !ok || !strings.HasPrefix(path, "/relay/media/rmed") {
		t.Fatalf("media URL %q is not under the public URL", mediaURL)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+hermesToken(id, secret, time.Now().Add(300*time.Second).Unix()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header
}

func withPublicURL(c *connector.Config) { c.PublicURL = "https://relay.example.com/" }

// A Telegram photo or document (a file_id, readable only with the bot
// token) reaches the gateway as <public_url>/relay/media/{id}, readable
// with the tenant's upgrade token and not with another tenant's; a file
// that cannot be fetched is dropped and the message still arrives.
func TestTelegramMediaRehosted(t *testing.T) {
	e := newEnv(t, withPublicURL)
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	photo := fmt.Sprintf(`{"update_id":1,"message":{"message_id":41,"from":{"id":9,"first_name":"Al"},
		"chat":{"id":%s,"type":"supergroup","title":"Team"},"date":1700000000,"caption":"the chart",
		"photo":[{"file_id":"small1","width":90,"height":90,"file_size":100},{"file_id":"big1","width":900,"height":900,"file_size":9000}]}}`, forumChat)
	if code := e.postTelegram(photo, tgSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in := g.next(t)
	if in.Event.Text != "the chart" || in.Event.MessageType != relay.MessagePhoto || len(in.Event.MediaURLs) != 1 || len(in.Event.Media) != 1 {
		t.Fatalf("event %+v", in.Event)
	}
	m := in.Event.Media[0]
	if m.URL != in.Event.MediaURLs[0] || m.Kind != "image" || m.Mime != "image/jpeg" || m.Size != int64(len(tgFileBytes("big1"))) {
		t.Errorf("media entry %+v", m)
	}
	code, body, hdr := e.getMedia(t, m.URL, "gw-a", secretA)
	if code != 200 || string(body) != tgFileBytes("big1") || hdr.Get("Content-Type") != "image/jpeg" {
		t.Errorf("gateway GET: %d %q %v", code, body, hdr)
	}
	if code, _, _ := e.getMedia(t, m.URL, "gw-b", secretB); code != 404 {
		t.Errorf("another tenant's token: %d, want 404", code)
	}
	var getFile []string
	for _, c := range e.telegram.Calls() {
		if strings.HasSuffix(c.Path, "/getFile") {
			getFile = append(getFile, fmt.Sprint(c.Body["file_id"]))
		}
	}
	if strings.Join(getFile, ",") != "big1" {
		t.Errorf("getFile calls %v, want the largest size only", getFile)
	}

	// A document keeps its name and type; a file Telegram refuses is
	// dropped, the message delivered without it.
	doc := fmt.Sprintf(`{"update_id":2,"message":{"message_id":42,"from":{"id":9,"first_name":"Al"},
		"chat":{"id":%s,"type":"supergroup","title":"Team"},"date":1700000000,
		"document":{"file_id":"doc7","file_name":"report.pdf","mime_type":"application/pdf","file_size":30}}}`, forumChat)
	if code := e.postTelegram(doc, tgSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in = g.next(t)
	if len(in.Event.Media) != 1 || in.Event.Media[0].Filename != "report.pdf" || in.Event.Media[0].Mime != "application/pdf" || in.Event.Media[0].Kind != "document" {
		t.Fatalf("document event %+v", in.Event)
	}
	if code, body, hdr := e.getMedia(t, in.Event.MediaURLs[0], "gw-a", secretA); code != 200 || string(body) != tgFileBytes("doc7") ||
		!strings.Contains(hdr.Get("Content-Disposition"), "report.pdf") {
		t.Errorf("document GET: %d %q %v", code, body, hdr)
	}
	gone := strings.Replace(strings.Replace(doc, "doc7", "gone1", 1), `"message_id":42`, `"message_id":43`, 1)
	if code := e.postTelegram(gone, tgSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in = g.next(t)
	if in.Event.MessageID != "43" || in.Event.MessageType != relay.MessageDocument || len(in.Event.MediaURLs) != 0 || in.Event.Media != nil {
		t.Errorf("failed download: event %+v", in.Event)
	}
	if !strings.Contains(e.logs.String(), "attachment dropped") || !strings.Contains(e.logs.String(), "file_id gone1") {
		t.Errorf("no log line for the dropped attachment:\n%s", e.logs.String())
	}
	if strings.Contains(e.logs.String(), "TGTOKEN") {
		t.Error("the bot token leaked into the logs")
	}
}

// Twilio media (MediaUrlN, readable with the account's basic auth) is
// re-hosted under the message's tenant; a media URL off the account's
// API host never receives the credentials.
func TestTwilioMediaRehosted(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 64)...)
	var api *rawAPI
	api = newRawAPI(t, func(r *http.Request, body string, n int) (int, string) {
		if strings.Contains(r.URL.Path, "/Media/") {
			if u, p, ok := r.BasicAuth(); !ok || u != twilioSID || p != twilioToken {
				return 401, `{"code":20003,"message":"Authenticate"}`
			}
			if strings.HasSuffix(r.URL.Path, "/ME404") {
				return 404, `{"code":20404}`
			}
			return 200, string(png)
		}
		return 201, `{"sid":"SM901","status":"queued"}`
	})
	e := newEnv(t, withTwilio(api), withPublicURL)
	g := e.gateway("gw-a", secretA, "sms", twilioSID)
	mediaBase := api.srv.URL + "/2010-04-01/Accounts/" + twilioSID + "/Messages/SM010/Media/"
	m := twilioMessage("SM010", "+15551230001", "+15550000001", "see pic")
	m.Set("NumMedia", "3")
	m.Set("MediaUrl0", mediaBase+"ME1")
	m.Set("MediaContentType0", "image/png")
	m.Set("MediaUrl1", mediaBase+"ME404")
	m.Set("MediaContentType1", "image/png")
	m.Set("MediaUrl2", "https://attacker.example/Media/ME2")
	m.Set("MediaContentType2", "image/png")
	if code, _ := e.postTwilio(m, twilioToken); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in := g.next(t)
	if in.Event.Text != "see pic" || in.Event.MessageType != relay.MessagePhoto || len(in.Event.MediaURLs) != 1 || len(in.Event.Media) != 1 {
		t.Fatalf("event %+v", in.Event)
	}
	if md := in.Event.Media[0]; md.Kind != "image" || md.Mime != "image/png" || md.Size != int64(len(png)) {
		t.Errorf("media entry %+v", md)
	}
	if code, body, _ := e.getMedia(t, in.Event.MediaURLs[0], "gw-a", secretA); code != 200 || !bytes.Equal(body, png) {
		t.Errorf("gateway GET: %d %q", code, body)
	}
	if code, _, _ := e.getMedia(t, in.Event.MediaURLs[0], "gw-b", secretB); code != 404 {
		t.Errorf("another tenant's token: %d, want 404", code)
	}
	logs := e.logs.String()
	if strings.Count(logs, "attachment dropped") != 2 || !strings.Contains(logs, "HTTP 404") || !strings.Contains(logs, "not on the account's API host") {
		t.Errorf("dropped attachments not logged:\n%s", logs)
	}
	if strings.Contains(logs, twilioToken) {
		t.Error("the auth token leaked into the logs")
	}
}

// Without a public URL the media is listed by its path alone.
func TestMediaRehostedPathOnly(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	photo := fmt.Sprintf(`{"update_id":1,"message":{"message_id":41,"from":{"id":9,"first_name":"Al"},
		"chat":{"id":%s,"type":"supergroup","title":"Team"},"date":1700000000,
		"photo":[{"file_id":"p1","width":90,"height":90}]}}`, forumChat)
	if code := e.postTelegram(photo, tgSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in := g.next(t)
	if len(in.Event.MediaURLs) != 1 || !strings.HasPrefix(in.Event.MediaURLs[0], "/relay/media/rmed") {
		t.Errorf("media urls %v", in.Event.MediaURLs)
	}
}

// WhatsApp Cloud media (a media id): GET /{media-id} with the access
// token for its URL, then that URL with the same bearer; re-hosted under
// the number's tenant. A media id the Graph API refuses is dropped.
func TestWhatsAppMediaRehosted(t *testing.T) {
	pdf := []byte("%PDF-1.7 invoice")
	var api *rawAPI
	api = newRawAPI(t, func(r *http.Request, body string, n int) (int, string) {
		if r.Header.Get("Authorization") != "Bearer EAAG-access" {
			return 401, `{"error":{"message":"bad token","code":190}}`
		}
		switch r.URL.Path {
		case "/v21.0/MEDIA1":
			return 200, `{"messaging_product":"whatsapp","url":"` + api.srv.URL + `/lookaside/MEDIA1?hash=x","mime_type":"application/pdf","sha256":"x","file_size":16,"id":"MEDIA1"}`
		case "/lookaside/MEDIA1":
			return 200, string(pdf)
		}
		return 404, `{"error":{"message":"no such media","code":100}}`
	})
	e := newEnv(t, withWhatsApp(api), withPublicURL)
	g := e.gateway("gw-a", secretA, "whatsapp_cloud", waNumber)
	doc := func(id, media string) string {
		return fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"WABA1","changes":[{"field":"messages","value":{"messaging_product":"whatsapp",`+
			`"metadata":{"display_phone_number":"15550000001","phone_number_id":%q},"contacts":[{"profile":{"name":"Jo"},"wa_id":"4915112345678"}],`+
			`"messages":[{"from":"4915112345678","id":%q,"timestamp":"%d","type":"document","document":{"id":%q,"mime_type":"application/pdf","filename":"invoice.pdf","caption":"my invoice"}}]}}]}]}`,
			waNumber, id, e.clock.Now().Unix(), media)
	}
	if code := e.postWhatsApp(doc("wamid.M1", "MEDIA1"), waSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in := g.next(t)
	if in.Event.Text != "my invoice" || len(in.Event.Media) != 1 {
		t.Fatalf("event %+v", in.Event)
	}
	if m := in.Event.Media[0]; m.Kind != "document" || m.Mime != "application/pdf" || m.Filename != "invoice.pdf" || m.Size != int64(len(pdf)) {
		t.Errorf("media entry %+v", m)
	}
	if code, body, _ := e.getMedia(t, in.Event.MediaURLs[0], "gw-a", secretA); code != 200 || !bytes.Equal(body, pdf) {
		t.Errorf("gateway GET: %d %q", code, body)
	}
	if code, _, _ := e.getMedia(t, in.Event.MediaURLs[0], "gw-b", secretB); code != 404 {
		t.Errorf("another tenant's token: %d", code)
	}
	if code := e.postWhatsApp(doc("wamid.M2", "MEDIA404"), waSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in = g.next(t)
	if in.Event.MessageID != "wamid.M2" || len(in.Event.MediaURLs) != 0 || !strings.Contains(e.logs.String(), "media id MEDIA404") {
		t.Errorf("failed media: %+v", in.Event)
	}
	if strings.Contains(e.logs.String(), "EAAG-access") {
		t.Error("the access token leaked into the logs")
	}
}

// Slack files (url_private, readable with the bot token as bearer) are
// re-hosted; a file URL off Slack's hosts never receives the token.
func TestSlackMediaRehosted(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{9}, 50)...)
	api := newRawAPI(t, func(r *http.Request, body string, n int) (int, string) {
		if strings.HasPrefix(r.URL.Path, "/files-pri/") {
			if r.Header.Get("Authorization") != "Bearer xoxb-slack-token" {
				return 403, "forbidden"
			}
			return 200, string(png)
		}
		return 200, `{"ok":true,"ts":"1700000001.000100"}`
	})
	e := newEnv(t, withSlack(api), withPublicURL)
	g := e.gateway("gw-a", secretA, "slack", slackApp)
	msg := fmt.Sprintf(`{"token":"x","team_id":"T1","api_app_id":%q,"type":"event_callback","event_id":"EvF1","event_time":1700000000,`+
		`"event":{"type":"message","subtype":"file_share","channel":"C1","channel_type":"channel","user":"U1","text":"a pic","ts":"1700000000.000900",`+
		`"files":[{"id":"F1","name":"pic.png","mimetype":"image/png","size":58,"url_private":%q},`+
		`{"id":"F2","name":"evil.png","mimetype":"image/png","url_private":"https://evil.example/files-pri/F2"}]}}`,
		slackApp, api.srv.URL+"/files-pri/T1-F1/pic.png")
	if code, _ := e.postSlack(msg, e.clock.Now(), slackSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in := g.next(t)
	if in.Event.Text != "a pic" || len(in.Event.Media) != 1 || in.Event.Media[0].Filename != "pic.png" || in.Event.Media[0].Kind != "image" {
		t.Fatalf("event %+v", in.Event)
	}
	if code, body, _ := e.getMedia(t, in.Event.MediaURLs[0], "gw-a", secretA); code != 200 || !bytes.Equal(body, png) {
		t.Errorf("gateway GET: %d %q", code, body)
	}
	if code, _, _ := e.getMedia(t, in.Event.MediaURLs[0], "gw-b", secretB); code != 404 {
		t.Errorf("another tenant's token: %d", code)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "file F2") || !strings.Contains(logs, "not on a Slack host") || strings.Contains(logs, "xoxb-slack-token") {
		t.Errorf("logs:\n%s", logs)
	}
}

func TestPublicURLChecked(t *testing.T) {
	for _, bad := range []string{"relay.example.com", "ftp://relay.example.com", "https://", "https://relay.example.com/?x=1"} {
		cfg := connector.Config{PublicURL: bad, Store: relaytest.NewMemory(), Audit: audit.NewMemory()}
		if _, err := connector.New(cfg); err == nil || !strings.Contains(err.Error(), "public_url") {
			t.Errorf("public_url %q: %v", bad, err)
		}
	}
}

// An attachment over 25 MiB is not stored: dropped, message delivered.
func TestRehostTooLarge(t *testing.T) {
	big := strings.Repeat("x", 25<<20+1)
	api := newRawAPI(t, func(r *http.Request, body string, n int) (int, string) { return 200, big })
	e := newEnv(t, withTwilio(api), withPublicURL)
	g := e.gateway("gw-a", secretA, "sms", twilioSID)
	m := twilioMessage("SM020", "+15551230001", "+15550000001", "huge")
	m.Set("NumMedia", "1")
	m.Set("MediaUrl0", api.srv.URL+"/2010-04-01/Accounts/"+twilioSID+"/Messages/SM020/Media/MEbig")
	m.Set("MediaContentType0", "video/mp4")
	if code, _ := e.postTwilio(m, twilioToken); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	in := g.next(t)
	if in.Event.Text != "huge" || in.Event.MessageType != relay.MessageVideo || len(in.Event.MediaURLs) != 0 {
		t.Errorf("event %+v", in.Event)
	}
	if !strings.Contains(e.logs.String(), "more than 26214400") {
		t.Errorf("no log line for the oversized attachment")
	}
}
