package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay/gateway"
)

// fakeTelegram records Bot API calls.
type fakeTelegram struct {
	mu    sync.Mutex
	calls []string
}

func (f *fakeTelegram) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.calls = append(f.calls, r.URL.Path+" "+string(b))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"ok":true,"result":{"message_id":501,"date":1700000000,"chat":{"id":-1001,"type":"supergroup"}}}`)
}

func (f *fakeTelegram) seen() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "\n")
}

// TestRelayThroughTheServer: `serve` hosts the connector from the config
// file; a gateway adapter connects with an HMAC token; a Telegram webhook
// reaches it as a MessageEvent with the gateway's session key; its reply
// reaches the (fake) Bot API; a wrong secret token delivers nothing.
func TestRelayThroughTheServer(t *testing.T) {
	tg := &fakeTelegram{}
	tgSrv := httptest.NewServer(tg)
	defer tgSrv.Close()
	secret := "a-shared-gateway-secret-of-40-characters"
	cfg := filepath.Join(t.TempDir(), "caduceus.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`relay:
  telegram_base_url: %s
  gateways:
    gw-a: {tenant: slot-1, secrets: ["env:GW_A_SECRET"]}
  telegram:
    acmebot: {token: "env:TG_TOKEN", secret_token: "tg-webhook-secret", tenant: slot-1, parse_mode: plain}
`, tgSrv.URL)), 0o600)
	env := map[string]string{"GW_A_SECRET": secret, "TG_TOKEN": "123:TGTOKEN"}
	getenv := func(k string) string { return env[k] }
	in := startEnv(t, getenv, "--config", cfg)

	var out, errb strings.Builder
	if code := run(t.Context(), []string{"relay", "token", "--gateway", "gw-a", "--config", cfg}, getenv, nil, &out, &errb); code != 0 || strings.TrimSpace(out.String()) == "" {
		t.Fatalf("relay token: %d %s", code, errb.String())
	}

	a, events, stop := connectAdapter(t, in.url, "gw-a", secret, "telegram", "acmebot")

	update := `{"update_id":1,"message":{"message_id":77,"from":{"id":42,"first_name":"Al"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1700000000,"text":"hello agent"}}`
	post := func(secretToken string) int {
		req, _ := http.NewRequest("POST", in.url+"/hooks/telegram/acmebot", strings.NewReader(update))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secretToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post("wrong-secret"); code < 400 {
		t.Errorf("wrong secret token answered %d", code)
	}
	if code := post("tg-webhook-secret"); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	var ev gateway.Inbound
	select {
	case ev = <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached the gateway")
	}
	if ev.Event.Text != "hello agent" || ev.SessionKey != "agent:main:telegram:group:-1001:42" {
		t.Errorf("event %+v key %q", ev.Event, ev.SessionKey)
	}
	// Events of one chat arrive in order, and the refused webhook was
	// answered before the accepted one was posted: anything it had
	// delivered would have come first.
	select {
	case extra := <-events:
		t.Errorf("the refused webhook delivered something: %+v", extra)
	default:
	}
	res := a.Send(t.Context(), "-1001", "hello human", "", nil)
	if !res.Success || !strings.Contains(tg.seen(), "/bot123:TGTOKEN/sendMessage") || !strings.Contains(tg.seen(), "hello human") {
		t.Errorf("reply: %+v; bot API saw %s", res, tg.seen())
	}
	stop()
	if code, out, errOut := cli(t, "audit", "verify", "--data", in.data); code != 0 {
		t.Errorf("verify: %s %s", out, errOut)
	}
	_, tail, _ := cli(t, "audit", "tail", "--data", in.data, "--tenant", "slot-1", "--json", "-n", "100")
	if !strings.Contains(tail, `"action":"relay.`) || strings.Contains(tail, "TGTOKEN") {
		t.Errorf("relay audit records: %s", tail)
	}
}

func TestRelaySessionKeyCLI(t *testing.T) {
	var out, errb strings.Builder
	in := strings.NewReader(`{"platform":"discord","chat_id":"333","chat_type":"group","user_id":"555","guild_id":"111"}
{"platform":"discord","chat_id":333,"chat_type":"group"}
{"platform":"telegram","chat_id":"-1001","chat_type":"group","user_id":"42"}
`)
	if code := run(t.Context(), []string{"relay", "session-key"}, noEnv, in, &out, &errb); code != 0 {
		t.Fatalf("session-key: %d %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || lines[0] != "agent:main:discord:group:333:555" || !strings.HasPrefix(lines[1], "error:") || lines[2] != "agent:main:telegram:group:-1001:42" {
		t.Errorf("session keys:\n%s", out.String())
	}
}

func TestRelaySessionKeyCLIProfile(t *testing.T) {
	src := `{"platform":"discord","chat_id":"333","chat_type":"group","user_id":"555","scope_id":"111"}
{"platform":"discord","chat_id":"333","chat_type":"group","user_id":"555","profile":"main"}
{"platform":"slack","chat_id":"C1","chat_type":"group","user_id":"U1","scope_id":"T1"}
{"platform":"whatsapp","chat_type":"dm","chat_id":" +1 555 123 4567 "}
`
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"agent:main:discord:group:333:555", "agent:main:discord:group:333:555", "agent:main:slack:group:T1:C1:U1", "error:"}},
		{[]string{"--profile", "coder"}, []string{"agent:coder:discord:group:333:555", "agent:main~:discord:group:333:555", "agent:coder:slack:group:T1:C1:U1", "error:"}},
		{[]string{"--profile", "default"}, []string{"agent:main:discord:group:333:555", "agent:main~:discord:group:333:555", "agent:main:slack:group:T1:C1:U1", "error:"}},
	} {
		var out, errb strings.Builder
		args := append([]string{"relay", "session-key"}, tc.args...)
		if code := run(t.Context(), args, noEnv, strings.NewReader(src), &out, &errb); code != 0 {
			t.Fatalf("%v: %d %s", args, code, errb.String())
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if len(lines) != len(tc.want) {
			t.Fatalf("%v: %d lines:\n%s", args, len(lines), out.String())
		}
		for i, w := range tc.want {
			if w == "error:" {
				if !strings.Contains(lines[i], "error: ") || !strings.Contains(lines[i], "WhatsApp") {
					t.Errorf("%v line %d = %q, want an error naming WhatsApp", args, i, lines[i])
				}
			} else if lines[i] != w {
				t.Errorf("%v line %d = %q, want %q", args, i, lines[i], w)
			}
		}
	}
}

// connectAdapter connects our gateway adapter to the server at url as
// gateway id for platform/bot and waits until it is connected. Its events
// arrive on the channel; stop closes it (also done at the test's end).
func connectAdapter(t *testing.T, url, id, secret, platform, bot string) (*gateway.Adapter, <-chan gateway.Inbound, func()) {
	t.Helper()
	events := make(chan gateway.Inbound, 4)
	a, err := gateway.New(gateway.Config{URL: url, GatewayID: id, Secret: []byte(secret), Platform: platform, BotID: bot,
		OnEvent: func(_ context.Context, ev gateway.Inbound) error { events <- ev; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	go a.Run(ctx)
	stop := func() { a.Close(); cancel() }
	t.Cleanup(stop)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := a.WaitConnected(wctx); err != nil {
		t.Fatalf("adapter did not connect: %v", err)
	}
	return a, events, stop
}
