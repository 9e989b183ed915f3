package twilio_test

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
	"github.com/caduceus-dev/caduceus/relay/twilio"
)

// Twilio's published validation vectors, from the official helper
// libraries' RequestValidator tests (twilio-php tests/Twilio/Unit/Security/
// RequestValidatorTest.php, twilio-python tests/unit/test_request_validator.py):
// auth token 12345, this URL and these parameters give these signatures; the
// second has a name given three times (values sorted, duplicates once).
const (
	vectorToken = "12345"
	vectorURL   = "https://mycompany.com/myapp.php?foo=1&bar=2"
	vectorSig   = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	repeatedSig = "IK+Dwps556ElfBT0I3Rgjkr1wJU="
)

var vectorForm = url.Values{"CallSid": {"CA1234567890ABCDE"}, "Caller": {"+14158675309"}, "Digits": {"1234"},
	"From": {"+14158675309"}, "To": {"+18005551212"}}

func TestSignVectors(t *testing.T) {
	if got := twilio.Sign(vectorToken, vectorURL, vectorForm); got != vectorSig {
		t.Errorf("Sign = %s, Twilio's vector %s", got, vectorSig)
	}
	repeated := url.Values{"Sid": {"CA123"}, "SidAccount": {"AC123"}, "Digits": {"5678", "1234", "1234"}}
	if got := twilio.Sign(vectorToken, vectorURL, repeated); got != repeatedSig {
		t.Errorf("Sign(repeated) = %s, Twilio's vector %s", got, repeatedSig)
	}
}

func TestVerify(t *testing.T) {
	// The raw body as Twilio would send it, in arrival (unsorted) order and
	// with '+' percent-encoded.
	body := []byte("Digits=1234&To=%2B18005551212&From=%2B14158675309&Caller=%2B14158675309&CallSid=CA1234567890ABCDE")
	cases := []struct {
		name, token, url, sig string
		body                  []byte
		ok                    bool
	}{
		{"valid", vectorToken, vectorURL, vectorSig, body, true},
		{"valid, default port in the configured URL", vectorToken, "https://mycompany.com:443/myapp.php?foo=1&bar=2", vectorSig, body, true},
		{"one parameter changed", vectorToken, vectorURL, vectorSig, []byte(strings.Replace(string(body), "Digits=1234", "Digits=1235", 1)), false},
		{"a parameter added", vectorToken, vectorURL, vectorSig, append(append([]byte{}, body...), "&Body=hi"...), false},
		{"another URL", vectorToken, "https://mycompany.com/other.php?foo=1&bar=2", vectorSig, body, false},
		{"another port", vectorToken, "https://mycompany.com:8443/myapp.php?foo=1&bar=2", vectorSig, body, false},
		{"wrong token", "54321", vectorURL, vectorSig, body, false},
		{"empty token", "", vectorURL, vectorSig, body, false},
		{"no signature", vectorToken, vectorURL, "", body, false},
		{"not base64", vectorToken, vectorURL, "%%%", body, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			form, err := twilio.Verify(c.token, c.url, c.sig, c.body)
			if c.ok && (err != nil || form.Get("CallSid") != "CA1234567890ABCDE") {
				t.Errorf("Verify = %v, %v", form, err)
			}
			if !c.ok && !errors.Is(err, twilio.ErrForged) {
				t.Errorf("Verify = %v, want ErrForged", err)
			}
		})
	}
	if _, err := twilio.Verify(vectorToken, vectorURL, vectorSig, []byte("a=%zz")); err == nil || errors.Is(err, twilio.ErrForged) {
		t.Errorf("a body that is not a form: %v", err)
	}
}

// The WhatsApp normalization vectors of HERMES-RELAY §3.5 and §7 (rows 15–20).
func TestNormalizeWhatsApp(t *testing.T) {
	cases := []struct{ in, want string }{
		{"+15551234567:47@s.whatsapp.net", "15551234567"},
		{"999999999999999@lid", "999999999999999"},
		{"+4915112345678:3@s.whatsapp.net", "4915112345678"},
		{"1+555", "1555"},
		{"  +15551234567 ", "15551234567"},
		{"+1+555", "1+555"},
		{"120363000000000000@g.us", "120363000000000000"},
	}
	for _, c := range cases {
		if got, err := twilio.NormalizeWhatsApp(c.in); err != nil || got != c.want {
			t.Errorf("NormalizeWhatsApp(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{" +1 555 123 4567 ", "", "+", "@x", "1_555", "١٢٣", "(555)123"} {
		if got, err := twilio.NormalizeWhatsApp(bad); err == nil {
			t.Errorf("NormalizeWhatsApp(%q) = %q, want an error", bad, got)
		}
	}
}

func TestNormalize(t *testing.T) {
	cases := []struct {
		name string
		form url.Values
		want relay.SessionSource
		typ  relay.MessageType
		key  string
	}{
		{"sms", url.Values{"MessageSid": {"SM1"}, "AccountSid": {"AC1"}, "From": {"+15551234567"}, "To": {"+15557654321"}, "Body": {"hello"}, "SmsStatus": {"received"}},
			relay.SessionSource{Platform: "sms", ChatType: "dm", ChatID: "+15551234567", UserID: "+15551234567", MessageID: "SM1"},
			relay.MessageText, "agent:main:sms:dm:+15551234567"},
		{"whatsapp", url.Values{"MessageSid": {"SM2"}, "AccountSid": {"AC1"}, "From": {"whatsapp:+4915112345678"}, "To": {"whatsapp:+14155238886"}, "Body": {"hallo"}, "ProfileName": {"Jo"}, "WaId": {"4915112345678"}},
			relay.SessionSource{Platform: "whatsapp", ChatType: "dm", ChatID: "4915112345678", UserID: "4915112345678", UserName: "Jo", MessageID: "SM2"},
			relay.MessageText, "agent:main:whatsapp:dm:4915112345678"},
		{"mms photo", url.Values{"MessageSid": {"MM3"}, "From": {"+15551234567"}, "NumMedia": {"1"}, "MediaUrl0": {"https://api.twilio.com/2010-04-01/Accounts/AC1/Messages/MM3/Media/ME1"}, "MediaContentType0": {"image/jpeg"}},
			relay.SessionSource{Platform: "sms", ChatType: "dm", ChatID: "+15551234567", UserID: "+15551234567", MessageID: "MM3"},
			relay.MessagePhoto, "agent:main:sms:dm:+15551234567"},
		{"whatsapp voice note", url.Values{"MessageSid": {"MM4"}, "From": {"whatsapp:+15551234567"}, "NumMedia": {"1"}, "MediaUrl0": {"https://x/ME2"}, "MediaContentType0": {"audio/ogg"}},
			relay.SessionSource{Platform: "whatsapp", ChatType: "dm", ChatID: "15551234567", UserID: "15551234567", MessageID: "MM4"},
			relay.MessageVoice, "agent:main:whatsapp:dm:15551234567"},
		{"whatsapp location", url.Values{"MessageSid": {"SM5"}, "From": {"whatsapp:+15551234567"}, "Latitude": {"52.5"}, "Longitude": {"13.4"}},
			relay.SessionSource{Platform: "whatsapp", ChatType: "dm", ChatID: "15551234567", UserID: "15551234567", MessageID: "SM5"},
			relay.MessageLocation, "agent:main:whatsapp:dm:15551234567"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in, err := twilio.Normalize(c.form)
			if err != nil {
				t.Fatal(err)
			}
			if in.Event.Source != c.want || in.Event.MessageType != c.typ || in.Event.MessageID != c.want.MessageID || len(in.Event.MediaURLs) != 0 {
				t.Errorf("got %+v %s, want %+v %s", in.Event.Source, in.Event.MessageType, c.want, c.typ)
			}
			if n := c.form.Get("MediaUrl0"); n != "" && (len(in.MediaURLs) != 1 || in.MediaURLs[0] != n) {
				t.Errorf("media kept at the edge: %v", in.MediaURLs)
			}
			if key, _ := relay.SessionKey(in.Event.Source, relay.DefaultSessionKeyOptions()); key != c.key {
				t.Errorf("key %q, want %q", key, c.key)
			}
		})
	}
	for _, f := range []url.Values{
		{"MessageSid": {"SM1"}, "From": {"+1555"}, "MessageStatus": {"delivered"}},
		{"MessageSid": {"SM1"}, "From": {"+1555"}, "SmsStatus": {"sent"}},
		{"MessageSid": {"SM1"}, "From": {"+1555"}, "Body": {""}},
	} {
		if _, err := twilio.Normalize(f); !errors.Is(err, twilio.ErrIgnored) {
			t.Errorf("Normalize(%v) = %v, want ErrIgnored", f, err)
		}
	}
	for _, f := range []url.Values{
		{"From": {"+1555"}, "Body": {"x"}},
		{"MessageSid": {"SM1"}, "Body": {"x"}},
		{"MessageSid": {"SM1"}, "From": {"whatsapp: +1 555 123"}, "Body": {"x"}},
	} {
		if _, err := twilio.Normalize(f); err == nil || errors.Is(err, twilio.ErrIgnored) {
			t.Errorf("Normalize(%v) = %v, want an error", f, err)
		}
	}
}

func TestClientSend(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		user, pass, _ := r.BasicAuth()
		got = append(got, r.URL.Path+" "+user+":"+pass+" "+string(b))
		if strings.Contains(string(b), "To=bad") {
			w.WriteHeader(400)
			io.WriteString(w, `{"code":21211,"message":"The 'To' number bad is not a valid phone number.","status":400}`)
			return
		}
		w.WriteHeader(201)
		io.WriteString(w, `{"sid":"SM900","status":"queued"}`)
	}))
	defer srv.Close()
	c := &twilio.Client{BaseURL: srv.URL, AccountSID: "AC1", AuthToken: "tok"}
	sid, err := c.Send(t.Context(), twilio.Message{To: "whatsapp:+15551234567", From: "whatsapp:+14155238886", Body: "hi"})
	if err != nil || sid != "SM900" {
		t.Fatalf("send: %q %v", sid, err)
	}
	if _, err := c.Send(t.Context(), twilio.Message{To: "+1555", MessagingServiceSID: "MG1", Body: "x"}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Send(t.Context(), twilio.Message{To: "bad", From: "+1", Body: "x"})
	var apiErr *twilio.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 21211 || strings.Contains(err.Error(), "tok") {
		t.Errorf("error answer: %v", err)
	}
	if _, err := c.Send(t.Context(), twilio.Message{To: "+1555", Body: "x"}); err == nil {
		t.Error("sent without a From number")
	}
	want := []string{
		"/2010-04-01/Accounts/AC1/Messages.json AC1:tok Body=hi&From=whatsapp%3A%2B14155238886&To=whatsapp%3A%2B15551234567",
		"/2010-04-01/Accounts/AC1/Messages.json AC1:tok Body=x&MessagingServiceSid=MG1&To=%2B1555",
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("call %d: %s\nwant %s", i, got[i], w)
		}
	}
}

func TestDescriptor(t *testing.T) {
	for _, c := range []struct{ platform, dialect string }{{"sms", "plain"}, {"whatsapp", "whatsapp"}} {
		b, _ := json.Marshal(twilio.Descriptor(c.platform))
		for _, k := range []string{`"platform":"` + c.platform + `"`, `"max_message_length":1600`, `"len_unit":"chars"`, `"markdown_dialect":"` + c.dialect + `"`, `"supported_ops":["send"]`} {
			if !strings.Contains(string(b), k) {
				t.Errorf("%s lacks %s", b, k)
			}
		}
	}
}

func FuzzWebhook(f *testing.F) {
	f.Add([]byte("MessageSid=SM1&From=whatsapp%3A%2B15551234567&Body=hi&NumMedia=1&MediaUrl0=x&MediaContentType0=image%2Fpng"), "+1+2 3@x")
	f.Add([]byte("MessageSid=SM1&From=%2B1555&Body=hi"), "")
	f.Fuzz(func(t *testing.T, body []byte, id string) {
		form, err := twilio.Verify("tok", "https://relay.example/hooks/twilio/AC1", twilio.Sign("tok", "https://relay.example/hooks/twilio/AC1", mustForm(body)), body)
		if err != nil {
			return
		}
		if in, err := twilio.Normalize(form); err == nil {
			if _, err := relay.SessionKey(in.Event.Source, relay.DefaultSessionKeyOptions()); err != nil || in.Event.Source.ChatID == "" {
				t.Fatalf("unkeyable: %+v %v", in.Event.Source, err)
			}
		}
		if n, err := twilio.NormalizeWhatsApp(id); err == nil {
			if n == "" || strings.ContainsAny(n, ": \t@") {
				t.Fatalf("NormalizeWhatsApp(%q) = %q", id, n)
			}
		}
	})
}

func mustForm(b []byte) url.Values {
	f, _ := url.ParseQuery(string(b))
	return f
}
