package main

import (
	"crypto/ed25519"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay/slack"
	"github.com/caduceus-dev/caduceus/relay/twilio"
	"github.com/caduceus-dev/caduceus/relay/whatsapp"
)

// TestWebhooksRefuseMalformedInput extends the malformed-input matrix of
// hardening_test.go to the platform webhooks and the media upload, whose
// bodies are the platform's format and whose callers are authenticated by
// signature rather than by key: each malformed body, forged or validly
// signed, is answered below 500, nothing is buffered or delivered, the
// process stays up and the audit chain verifies.
func TestWebhooksRefuseMalformedInput(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	const (
		sid     = "AC00000000000000000000000000000001"
		pnid    = "106540352242922"
		twilURL = "https://relay.example.com/hooks/twilio/" + sid
	)
	cfg := filepath.Join(t.TempDir(), "caduceus.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`relay:
  telegram_base_url: http://127.0.0.1:1
  discord_base_url: http://127.0.0.1:1
  gateways:
    gw-a: {tenant: slot-1, secrets: ["env:GW_A_SECRET"]}
  telegram:
    acmebot: {token: "env:TG_TOKEN", secret_token: "tg-webhook-secret", tenant: slot-1}
  discord:
    "123456789012345678": {public_key: "%s", bot_token: "env:DISCORD_TOKEN", tenant: slot-1}
  slack:
    A0APP: {signing_secret: env:SLACK_SIGNING_SECRET, bot_token: env:SLACK_BOT_TOKEN, teams: {T1: slot-1}, api_base_url: "http://127.0.0.1:1"}
  twilio:
    %s: {auth_token: env:TWILIO_AUTH_TOKEN, public_url: %s, tenant: slot-1, sms_from: "+15550000001", api_base_url: "http://127.0.0.1:1"}
  whatsapp:
    "%s": {app_secret: env:WHATSAPP_APP_SECRET, verify_token: env:WHATSAPP_VERIFY_TOKEN, access_token: env:WHATSAPP_ACCESS_TOKEN, tenant: slot-1, api_base_url: "http://127.0.0.1:1"}
`, hex.EncodeToString(pub), sid, twilURL, pnid)), 0o600)
	env := map[string]string{"GW_A_SECRET": "a-shared-gateway-secret-of-40-characters", "TG_TOKEN": "123:TGTOKEN", "DISCORD_TOKEN": "dtoken",
		"SLACK_SIGNING_SECRET": "slack-signing-secret", "SLACK_BOT_TOKEN": "xoxb-1", "TWILIO_AUTH_TOKEN": "twilio-token",
		"WHATSAPP_APP_SECRET": "meta-secret", "WHATSAPP_VERIFY_TOKEN": "verify-me", "WHATSAPP_ACCESS_TOKEN": "EAAG-1"}
	in := startEnv(t, func(k string) string { return env[k] }, "--config", cfg)

	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	bodies := map[string]string{
		"empty":          "",
		"not json":       "{not json",
		"invalid utf-8":  "{\"message\":{\"text\":\"\xff\xfe\"}}",
		"nul":            "{\"message\":{\"text\":\"a\\u0000b\"}}",
		"10001 deep":     deep,
		"duplicate keys": `{"update_id":1,"update_id":2,"type":1,"type":2}`,
		"trailing data":  `{"update_id":1}{"update_id":2}garbage`,
		"wrong shapes":   `{"update_id":"x","message":[],"type":"1","event":7,"entry":{}}`,
		"array":          `[1,2,3]`,
		"huge":           `{"x":"` + strings.Repeat("a", 3<<20) + `"}`,
	}
	type route struct {
		name string
		post func(body string, forge bool) int
	}
	now := func() string { return strconv.FormatInt(time.Now().Unix(), 10) }
	routes := []route{
		{"telegram", func(body string, forge bool) int {
			secret := "tg-webhook-secret"
			if forge {
				secret = "wrong"
			}
			return postSigned(t, in.url+"/hooks/telegram/acmebot", "application/json", body, map[string]string{"X-Telegram-Bot-Api-Secret-Token": secret})
		}},
		{"discord", func(body string, forge bool) int {
			ts := now()
			sig := ed25519.Sign(priv, []byte(ts+body))
			if forge {
				sig[0] ^= 1
			}
			return postSigned(t, in.url+"/hooks/discord/123456789012345678", "application/json", body,
				map[string]string{"X-Signature-Ed25519": hex.EncodeToString(sig), "X-Signature-Timestamp": ts})
		}},
		{"slack", func(body string, forge bool) int {
			ts := now()
			sig := slack.Sign(env["SLACK_SIGNING_SECRET"], ts, []byte(body))
			if forge {
				sig = slack.Sign("wrong", ts, []byte(body))
			}
			return postSigned(t, in.url+"/hooks/slack/A0APP", "application/json", body,
				map[string]string{"X-Slack-Signature": sig, "X-Slack-Request-Timestamp": ts})
		}},
		{"whatsapp", func(body string, forge bool) int {
			secret := env["WHATSAPP_APP_SECRET"]
			if forge {
				secret = "wrong"
			}
			return postSigned(t, in.url+"/hooks/whatsapp/"+pnid, "application/json", body,
				map[string]string{"X-Hub-Signature-256": whatsapp.Sign(secret, []byte(body))})
		}},
		{"twilio", func(body string, forge bool) int {
			// Twilio posts a form: the malformed JSON goes in as one field,
			// and as the raw (unparseable) form body too.
			form := url.Values{"Body": {body}, "From": {"+1555\xff"}, "MessageSid": {"SM1"}}
			token := env["TWILIO_AUTH_TOKEN"]
			if forge {
				token = "wrong"
			}
			status := postSigned(t, in.url+"/hooks/twilio/"+sid, "application/x-www-form-urlencoded", form.Encode(),
				map[string]string{"X-Twilio-Signature": twilio.Sign(token, twilURL, form)})
			if status >= 500 {
				return status
			}
			return postSigned(t, in.url+"/hooks/twilio/"+sid, "application/x-www-form-urlencoded", "%zz="+body,
				map[string]string{"X-Twilio-Signature": twilio.Sign(token, twilURL, url.Values{})})
		}},
		{"media upload without a token", func(body string, _ bool) int {
			return postSigned(t, in.url+"/relay/media", "application/octet-stream", body, map[string]string{"X-Media-Filename": "a\xffb"})
		}},
	}

	db, err := sql.Open("sqlite", "file:"+filepath.Join(in.data, "caduceus.db")+"?_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(q string) int {
		var n int
		if err := db.QueryRow(q).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const delivered = `SELECT COUNT(*) FROM audit_records WHERE action IN ('relay.deliver', 'relay.buffer')`
	buffered, deliveredBefore := count(`SELECT COUNT(*) FROM relay_buffer`), count(delivered)

	for _, r := range routes {
		for name, body := range bodies {
			for _, forge := range []bool{false, true} {
				if status := r.post(body, forge); status >= 500 || status == 0 {
					t.Errorf("%s, %s (forged %v): status %d", r.name, name, forge, status)
				}
			}
		}
	}
	if n := count(`SELECT COUNT(*) FROM relay_buffer`); n != buffered {
		t.Errorf("relay_buffer: %d rows before the malformed webhooks, %d after", buffered, n)
	}
	if n := count(delivered); n != deliveredBefore {
		t.Errorf("%d deliveries recorded before the malformed webhooks, %d after", deliveredBefore, n)
	}
	if status := postSigned(t, in.url+"/healthz", "application/json", "", nil); status != 405 && status != 200 {
		t.Errorf("server not answering after the matrix: %d", status)
	}
	var out, errb strings.Builder
	if code := run(t.Context(), []string{"audit", "verify", "--data", in.data}, noEnv, nil, &out, &errb); code != 0 {
		t.Fatalf("audit verify after the matrix: %d %s %s", code, out.String(), errb.String())
	}
}
