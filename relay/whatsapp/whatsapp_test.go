package whatsapp_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/whatsapp"
)

func TestVerify(t *testing.T) {
	body := []byte(`{"object":"whatsapp_business_account","entry":[]}`)
	// Computed independently (Python hmac.new(b"app-secret-1", body, sha256)).
	const want = "sha256=0ca28c0f1996234eb6829e59ad3c11a18161f6eb043943d601e420c312432cdf"
	if got := whatsapp.Sign("app-secret-1", body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	cases := []struct {
		name, secret, sig string
		body              []byte
		ok                bool
	}{
		{"valid", "app-secret-1", want, body, true},
		{"upper-case hex", "app-secret-1", "sha256=" + strings.ToUpper(want[7:]), body, true},
		{"body changed", "app-secret-1", want, []byte(`{"object":"whatsapp_business_account","entry":[] }`), false},
		{"wrong secret", "app-secret-2", want, body, false},
		{"empty secret", "", want, body, false},
		{"sha1 scheme", "app-secret-1", "sha1=" + want[7:], body, false},
		{"no prefix", "app-secret-1", want[7:], body, false},
		{"truncated", "app-secret-1", want[:30], body, false},
		{"missing", "app-secret-1", "", body, false},
	}
	for _, c := range cases {
		err := whatsapp.Verify(c.secret, c.sig, c.body)
		if c.ok != (err == nil) || (!c.ok && !errors.Is(err, whatsapp.ErrForged)) {
			t.Errorf("%s: Verify = %v", c.name, err)
		}
	}
}

func TestChallenge(t *testing.T) {
	q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {"vt-1"}, "hub.challenge": {"1158201444"}}
	if got, ok := whatsapp.Challenge(q, "vt-1"); !ok || got != "1158201444" {
		t.Errorf("challenge: %q %v", got, ok)
	}
	for _, c := range []struct {
		q     url.Values
		token string
	}{
		{q, "vt-2"}, {q, ""},
		{url.Values{"hub.mode": {"unsubscribe"}, "hub.verify_token": {"vt-1"}, "hub.challenge": {"1"}}, "vt-1"},
		{url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {"vt-1"}}, "vt-1"},
	} {
		if _, ok := whatsapp.Challenge(c.q, c.token); ok {
			t.Errorf("Challenge(%v, %q) accepted", c.q, c.token)
		}
	}
}

func payload(messages string) []byte {
	return []byte(`{"object":"whatsapp_business_account","entry":[{"id":"WABA1","changes":[{"field":"messages","value":{"messaging_product":"whatsapp",` +
		`"metadata":{"display_phone_number":"15550000001","phone_number_id":"PN1"},"contacts":[{"profile":{"name":"Jo"},"wa_id":"4915112345678"}],` +
		`"messages":` + messages + `}}]}]}`)
}

func TestNormalize(t *testing.T) {
	cases := []struct {
		name, msg, text string
		typ             relay.MessageType
		replyTo, media  string
	}{
		{"text", `{"from":"4915112345678","id":"wamid.1","timestamp":"1700000000","type":"text","text":{"body":"hallo"}}`, "hallo", relay.MessageText, "", ""},
		{"reply", `{"from":"4915112345678","id":"wamid.2","timestamp":"1700000000","type":"text","text":{"body":"ja"},"context":{"from":"15550000001","id":"wamid.0"}}`, "ja", relay.MessageText, "wamid.0", ""},
		{"image with caption", `{"from":"4915112345678","id":"wamid.3","timestamp":"1700000000","type":"image","image":{"id":"MEDIA1","mime_type":"image/jpeg","caption":"look"}}`, "look", relay.MessagePhoto, "", "MEDIA1"},
		{"voice note", `{"from":"4915112345678","id":"wamid.4","timestamp":"1700000000","type":"audio","audio":{"id":"MEDIA2","mime_type":"audio/ogg; codecs=opus"}}`, "", relay.MessageVoice, "", "MEDIA2"},
		{"document", `{"from":"4915112345678","id":"wamid.5","timestamp":"1700000000","type":"document","document":{"id":"MEDIA3","filename":"a.pdf"}}`, "", relay.MessageDocument, "", "MEDIA3"},
		{"location", `{"from":"4915112345678","id":"wamid.6","timestamp":"1700000000","type":"location","location":{"latitude":52.52,"longitude":13.405}}`, "52.52,13.405", relay.MessageLocation, "", ""},
		{"button reply", `{"from":"4915112345678","id":"wamid.7","timestamp":"1700000000","type":"interactive","interactive":{"type":"button_reply","button_reply":{"id":"yes","title":"Yes"}}}`, "Yes", relay.MessageText, "", ""},
		{"template button", `{"from":"4915112345678","id":"wamid.8","timestamp":"1700000000","type":"button","button":{"text":"Stop","payload":"stop"}}`, "Stop", relay.MessageText, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := whatsapp.ParsePayload(payload("[" + c.msg + "]"))
			if err != nil {
				t.Fatal(err)
			}
			ins, err := whatsapp.Normalize(p)
			if err != nil || len(ins) != 1 {
				t.Fatalf("%v %v", ins, err)
			}
			in := ins[0]
			want := relay.SessionSource{Platform: "whatsapp_cloud", ChatType: "dm", ChatID: "4915112345678", UserID: "4915112345678", UserName: "Jo", MessageID: in.Event.MessageID}
			if in.Event.Source != want || in.Event.Text != c.text || in.Event.MessageType != c.typ || in.Event.ReplyToMessageID != c.replyTo ||
				in.MediaID != c.media || in.PhoneNumberID != "PN1" || in.SentAt.Unix() != 1700000000 || !strings.HasPrefix(in.Event.MessageID, "wamid.") {
				t.Errorf("got %+v (media %q)", in, in.MediaID)
			}
			if key, _ := relay.SessionKey(in.Event.Source, relay.DefaultSessionKeyOptions()); key != "agent:main:whatsapp_cloud:dm:4915112345678" {
				t.Errorf("key %q", key)
			}
		})
	}
	// Two messages in one notification, a reaction and an unsupported one
	// skipped, statuses ignored.
	p, _ := whatsapp.ParsePayload(payload(`[{"from":"1","id":"wamid.a","timestamp":"1","type":"text","text":{"body":"one"}},` +
		`{"from":"1","id":"wamid.r","timestamp":"1","type":"reaction","reaction":{"message_id":"wamid.a","emoji":"👍"}},` +
		`{"from":"1","id":"wamid.u","timestamp":"1","type":"unsupported"},` +
		`{"from":"2","id":"wamid.b","timestamp":"1","type":"text","text":{"body":"two"}}]`))
	ins, err := whatsapp.Normalize(p)
	if err != nil || len(ins) != 2 || ins[0].Event.Text != "one" || ins[1].Event.Source.ChatID != "2" {
		t.Errorf("batch: %+v %v", ins, err)
	}
	status := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"W","changes":[{"field":"messages","value":{"metadata":{"phone_number_id":"PN1"},"statuses":[{"id":"wamid.x","status":"read"}]}}]}]}`)
	if p, err := whatsapp.ParsePayload(status); err != nil {
		t.Fatal(err)
	} else if ins, err := whatsapp.Normalize(p); err != nil || len(ins) != 0 {
		t.Errorf("statuses: %v %v", ins, err)
	}
	if p, _ := whatsapp.ParsePayload(payload(`[{"id":"wamid.z","type":"text","text":{"body":"x"}}]`)); true {
		if _, err := whatsapp.Normalize(p); err == nil {
			t.Error("a message without a sender")
		}
	}
	for _, bad := range []string{``, `[]`, `{"object":"page","entry":[]}`, `{"object":"whatsapp_business_account","entry":{}}`} {
		if _, err := whatsapp.ParsePayload([]byte(bad)); err == nil {
			t.Errorf("ParsePayload(%s) accepted", bad)
		}
	}
}

func TestClient(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(b))
		if strings.Contains(string(b), `"to":"0"`) {
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"(#131030) Recipient phone number not in allowed list","type":"OAuthException","code":131030}}`)
			return
		}
		io.WriteString(w, `{"messaging_product":"whatsapp","contacts":[{"input":"4915112345678","wa_id":"4915112345678"}],"messages":[{"id":"wamid.out1"}]}`)
	}))
	defer srv.Close()
	c := &whatsapp.Client{BaseURL: srv.URL + "/v21.0", PhoneNumberID: "PN1", AccessToken: "EAAG-token"}
	id, err := c.SendText(t.Context(), "4915112345678", "antwort", "wamid.1")
	if err != nil || id != "wamid.out1" {
		t.Fatalf("send: %q %v", id, err)
	}
	want := `/v21.0/PN1/messages Bearer EAAG-token {"context":{"message_id":"wamid.1"},"messaging_product":"whatsapp","recipient_type":"individual","text":{"body":"antwort","preview_url":false},"to":"4915112345678","type":"text"}`
	if got[0] != want {
		t.Errorf("request\n got %s\nwant %s", got[0], want)
	}
	_, err = c.SendText(t.Context(), "0", "x", "")
	var apiErr *whatsapp.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 131030 || strings.Contains(err.Error(), "EAAG") {
		t.Errorf("error answer: %v", err)
	}
}

func TestDescriptor(t *testing.T) {
	b, _ := json.Marshal(whatsapp.Descriptor())
	for _, k := range []string{`"platform":"whatsapp_cloud"`, `"max_message_length":4096`, `"len_unit":"chars"`, `"markdown_dialect":"whatsapp"`, `"supported_ops":["send"]`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("%s lacks %s", b, k)
		}
	}
}

func FuzzPayload(f *testing.F) {
	f.Add(payload(`[{"from":"4915112345678","id":"wamid.1","timestamp":"1700000000","type":"text","text":{"body":"hallo"}}]`))
	f.Add(payload(`[{"from":"1","id":"w","type":"interactive","interactive":{"list_reply":{"id":"a","title":"A"}}}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := whatsapp.ParsePayload(body)
		if err != nil {
			return
		}
		ins, err := whatsapp.Normalize(p)
		if err != nil {
			return
		}
		for _, in := range ins {
			if in.Event.Source.ChatID == "" || in.Event.MessageID == "" {
				t.Fatalf("unkeyable %+v", in.Event.Source)
			}
			if _, err := relay.SessionKey(in.Event.Source, relay.DefaultSessionKeyOptions()); err != nil {
				t.Fatal(err)
			}
		}
	})
}
