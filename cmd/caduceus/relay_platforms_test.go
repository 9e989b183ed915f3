package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay/gateway"
	"github.com/caduceus-dev/caduceus/relay/slack"
	"github.com/caduceus-dev/caduceus/relay/twilio"
	"github.com/caduceus-dev/caduceus/relay/wecom"
	"github.com/caduceus-dev/caduceus/relay/whatsapp"
)

// recordingAPI is an httptest fake of a platform API: it records
// "path body" per request and answers with answer.
type recordingAPI struct {
	mu     sync.Mutex
	calls  []string
	answer string
}

func (f *recordingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, r.URL.Path+" "+r.Header.Get("Authorization")+" "+string(b))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, f.answer)
}

func (f *recordingAPI) seen() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "\n")
}

func newRecordingAPI(t *testing.T, answer string) (*recordingAPI, string) {
	f := &recordingAPI{answer: answer}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// platformCase is one platform edge driven through `serve`: post sends a
// signed webhook (forged when forge is set) and returns the status.
type platformCase struct {
	name, platform, bot string
	post                func(t *testing.T, base string, forge bool) int
	wantText, wantKey   string
	replyChat           string
	api                 *recordingAPI
	wantCall            string // in what the fake API saw after the reply
}

func postSigned(t *testing.T, url, contentType, body string, headers map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestRelayPlatformsThroughTheServer: `serve` hosts each platform edge from
// the config file; a signed webhook reaches a gateway adapter with the
// gateway's session key, a forged one delivers nothing, and the reply
// reaches the platform's (fake) API with the credentials from the
// environment.
func TestRelayPlatformsThroughTheServer(t *testing.T) {
	slackAPI, slackURL := newRecordingAPI(t, `{"ok":true,"ts":"1700000900.000100"}`)
	twilioAPI, twilioURL := newRecordingAPI(t, `{"sid":"SM900","status":"queued"}`)
	graphAPI, graphURL := newRecordingAPI(t, `{"messaging_product":"whatsapp","messages":[{"id":"wamid.out"}]}`)
	wecomAPI, wecomURL := newRecordingAPI(t, `{"errcode":0,"errmsg":"ok","access_token":"WECOMTOKEN","expires_in":7200,"msgid":"MSG1"}`)
	const (
		sid     = "AC00000000000000000000000000000001"
		aesKey  = "jWmYm7qr5nMoAUwZRjGtBxmz3KA1tkAj3ykkR6q2B2C"
		corp    = "ww0000000000000001"
		pnid    = "106540352242922"
		webhook = "https://relay.example.com/hooks/twilio/" + sid
	)
	secret := "a-shared-gateway-secret-of-40-characters"
	cfg := filepath.Join(t.TempDir(), "caduceus.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`relay:
  gateways:
    gw-a: {tenant: slot-1, secrets: ["env:GW_A_SECRET"]}
  slack:
    A0APP:
      signing_secret: env:SLACK_SIGNING_SECRET
      bot_token: env:SLACK_BOT_TOKEN
      teams: {T1: slot-1}
      api_base_url: %s
  twilio:
    %s:
      auth_token: env:TWILIO_AUTH_TOKEN
      public_url: %s
      tenant: slot-1
      sms_from: "+15550000001"
      whatsapp_from: "+15550000001"
      api_base_url: %s
  whatsapp:
    "%s":
      app_secret: env:WHATSAPP_APP_SECRET
      verify_token: env:WHATSAPP_VERIFY_TOKEN
      access_token: env:WHATSAPP_ACCESS_TOKEN
      tenant: slot-1
      api_base_url: %s/v21.0
  wecom:
    %s:
      token: env:WECOM_TOKEN
      encoding_aes_key: env:WECOM_AES_KEY
      corp_secret: env:WECOM_SECRET
      agent_id: 1000002
      tenant: slot-1
      api_base_url: %s
`, slackURL, sid, webhook, twilioURL, pnid, graphURL, corp, wecomURL)), 0o600)
	env := map[string]string{"GW_A_SECRET": secret, "SLACK_SIGNING_SECRET": "slack-signing-secret", "SLACK_BOT_TOKEN": "xoxb-e2e",
		"TWILIO_AUTH_TOKEN": "twilio-token", "WHATSAPP_APP_SECRET": "meta-secret", "WHATSAPP_VERIFY_TOKEN": "verify-me",
		"WHATSAPP_ACCESS_TOKEN": "EAAG-e2e", "WECOM_TOKEN": "wecom-token", "WECOM_AES_KEY": aesKey, "WECOM_SECRET": "wecom-secret"}
	getenv := func(k string) string { return env[k] }
	in := startEnv(t, getenv, "--config", cfg)
	wecomCrypt, err := wecom.NewCrypt(env["WECOM_TOKEN"], aesKey, corp)
	if err != nil {
		t.Fatal(err)
	}

	cases := []platformCase{{
		name: "slack", platform: "slack", bot: "A0APP",
		post: func(t *testing.T, base string, forge bool) int {
			body := `{"type":"event_callback","team_id":"T1","api_app_id":"A0APP","event_id":"Ev1","event":{"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"hello from slack","ts":"1700000000.000300"}}`
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			key := env["SLACK_SIGNING_SECRET"]
			if forge {
				key = "guessed"
			}
			return postSigned(t, base+"/hooks/slack/A0APP", "application/json", body,
				map[string]string{slack.TimestampHeader: ts, slack.SignatureHeader: slack.Sign(key, ts, []byte(body))})
		},
		wantText: "hello from slack", wantKey: "agent:main:slack:group:T1:C1:1700000000.000300",
		replyChat: "C1", api: slackAPI,
		wantCall: `/chat.postMessage Bearer xoxb-e2e {"channel":"C1","text":"reply","thread_ts":"1700000000.000300"}`,
	}, {
		name: "twilio whatsapp", platform: "whatsapp", bot: sid,
		post: func(t *testing.T, base string, forge bool) int {
			form := url.Values{"MessageSid": {"SM1"}, "AccountSid": {sid}, "From": {"whatsapp:+4915112345678"}, "To": {"whatsapp:+15550000001"},
				"Body": {"hello from whatsapp"}, "ProfileName": {"Jo"}}
			key := env["TWILIO_AUTH_TOKEN"]
			if forge {
				key = "guessed"
			}
			return postSigned(t, base+"/hooks/twilio/"+sid, "application/x-www-form-urlencoded", form.Encode(),
				map[string]string{twilio.SignatureHeader: twilio.Sign(key, webhook, form)})
		},
		wantText: "hello from whatsapp", wantKey: "agent:main:whatsapp:dm:4915112345678",
		replyChat: "4915112345678", api: twilioAPI,
		wantCall: "/2010-04-01/Accounts/" + sid + "/Messages.json Basic ",
	}, {
		name: "whatsapp cloud", platform: "whatsapp_cloud", bot: pnid,
		post: func(t *testing.T, base string, forge bool) int {
			body := fmt.Sprintf(`{"object":"whatsapp_business_account","entry":[{"id":"W","changes":[{"field":"messages","value":{"messaging_product":"whatsapp",`+
				`"metadata":{"phone_number_id":%q},"contacts":[{"profile":{"name":"Jo"},"wa_id":"4915112345678"}],`+
				`"messages":[{"from":"4915112345678","id":"wamid.E2E","timestamp":"%d","type":"text","text":{"body":"hello from the cloud"}}]}}]}]}`, pnid, time.Now().Unix())
			key := env["WHATSAPP_APP_SECRET"]
			if forge {
				key = "guessed"
			}
			return postSigned(t, base+"/hooks/whatsapp/"+pnid, "application/json", body, map[string]string{whatsapp.SignatureHeader: whatsapp.Sign(key, []byte(body))})
		},
		wantText: "hello from the cloud", wantKey: "agent:main:whatsapp_cloud:dm:4915112345678",
		replyChat: "4915112345678", api: graphAPI,
		wantCall: `/v21.0/` + pnid + `/messages Bearer EAAG-e2e {"context":{"message_id":"wamid.E2E"},"messaging_product":"whatsapp","recipient_type":"individual","text":{"body":"reply","preview_url":false},"to":"4915112345678","type":"text"}`,
	}, {
		name: "wecom", platform: "wecom", bot: corp,
		post: func(t *testing.T, base string, forge bool) int {
			cr := wecomCrypt
			if forge {
				cr, _ = wecom.NewCrypt("guessed", aesKey, corp)
			}
			ts := strconv.FormatInt(time.Now().Unix(), 10)
			enc, sig := cr.Seal([]byte(`<xml><ToUserName>`+corp+`</ToUserName><FromUserName>zhangsan</FromUserName><CreateTime>1</CreateTime><MsgType>text</MsgType><Content>你好</Content><MsgId>7001</MsgId></xml>`), ts, "n1", nil)
			return postSigned(t, base+"/hooks/wecom/"+corp+"?msg_signature="+sig+"&timestamp="+ts+"&nonce=n1", "text/xml",
				`<xml><ToUserName><![CDATA[`+corp+`]]></ToUserName><Encrypt><![CDATA[`+enc+`]]></Encrypt></xml>`, nil)
		},
		wantText: "你好", wantKey: "agent:main:wecom:dm:zhangsan",
		replyChat: "zhangsan", api: wecomAPI,
		wantCall: `/cgi-bin/message/send  {"agentid":1000002,"msgtype":"text","text":{"content":"reply"},"touser":"zhangsan"}`,
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, events, _ := connectAdapter(t, in.url, "gw-a", secret, c.platform, c.bot)
			if code := c.post(t, in.url, true); code < 400 {
				t.Errorf("forged webhook answered %d", code)
			}
			if code := c.post(t, in.url, false); code != 200 {
				t.Fatalf("webhook answered %d", code)
			}
			var ev gateway.Inbound
			select {
			case ev = <-events:
			case <-time.After(10 * time.Second):
				t.Fatal("no event reached the gateway")
			}
			if ev.Event.Text != c.wantText || ev.SessionKey != c.wantKey {
				t.Errorf("event %+v key %q", ev.Event, ev.SessionKey)
			}
			// Events of one chat arrive in order, and the forged webhook was
			// answered before the accepted one was posted: anything it had
			// delivered would have come first.
			select {
			case extra := <-events:
				t.Errorf("the forged webhook delivered something: %+v", extra)
			default:
			}
			meta := map[string]any{"thread_id": ev.Event.Source.ThreadID}
			if res := a.Send(t.Context(), c.replyChat, "reply", ev.Event.MessageID, meta); !res.Success || !strings.Contains(c.api.seen(), c.wantCall) {
				t.Errorf("reply: %+v; the API saw:\n%s", res, c.api.seen())
			}
		})
	}
	// The GET handshakes are routed too.
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	echo, sig := wecomCrypt.Seal([]byte("echo-42"), ts, "n1", nil)
	for u, want := range map[string]string{
		in.url + "/hooks/whatsapp/" + pnid + "?hub.mode=subscribe&hub.verify_token=verify-me&hub.challenge=42":                        "42",
		in.url + "/hooks/wecom/" + corp + "?msg_signature=" + sig + "&timestamp=" + ts + "&nonce=n1&echostr=" + url.QueryEscape(echo): "echo-42",
	} {
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != want {
			t.Errorf("GET %s: %d %q", u, resp.StatusCode, b)
		}
	}
	if code, out, errOut := cli(t, "audit", "verify", "--data", in.data); code != 0 {
		t.Errorf("verify: %s %s", out, errOut)
	}
	_, tail, _ := cli(t, "audit", "tail", "--data", in.data, "--tenant", "slot-1", "--json", "-n", "200")
	for _, secret := range []string{"xoxb-e2e", "twilio-token", "EAAG-e2e", "wecom-secret", "WECOMTOKEN", "meta-secret"} {
		if strings.Contains(tail, secret) {
			t.Errorf("the audit trail holds a platform secret (%s)", secret)
		}
	}
}
