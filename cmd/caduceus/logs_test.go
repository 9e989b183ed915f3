package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// TestLogsHoldNoSecrets runs serve with every kind of secret configured —
// the bootstrap admin key and keys made later, the edge secret, both LLM
// upstream keys, the relay gateway's secret and a token minted from it,
// the Telegram bot token and webhook secret, the Discord bot token, the
// audit signing key — and --log-format json at debug level, makes requests
// of every kind (an LLM prompt forwarded upstream, a Telegram update, a
// gateway dial, refusals), then reads the whole log: every line is JSON,
// every request has its line (request id, route, status, duration, tenant
// when the key was known), and no secret and no message text (a distinctive
// phrase in the prompt and in the chat message) appears anywhere in it.
func TestLogsHoldNoSecrets(t *testing.T) {
	rnd := func(prefix string) string {
		var b [16]byte
		rand.Read(b[:])
		return prefix + hex.EncodeToString(b[:])
	}
	var seed [32]byte
	rand.Read(seed[:])
	secrets := map[string]string{
		"CADUCEUS_EDGE_SECRET":       rnd("edge-"),
		"CADUCEUS_OPENAI_API_KEY":    rnd("sk-openai-"),
		"CADUCEUS_ANTHROPIC_API_KEY": rnd("sk-ant-"),
		"LOGTEST_GATEWAY_SECRET":     rnd("gw-secret-"),
		"LOGTEST_TELEGRAM_TOKEN":     "123456:" + rnd("tg-"),
		"LOGTEST_TELEGRAM_SECRET":    rnd("tgsecret"),
		"LOGTEST_DISCORD_TOKEN":      rnd("discord-"),
		"CADUCEUS_AUDIT_SIGNING_KEY": base64.StdEncoding.EncodeToString(seed[:]),
	}
	const phrase = "quartz-pelican-umbrella-7731"

	var upMu sync.Mutex
	var upstreamAuth, upstreamBody string
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		upMu.Lock()
		upstreamAuth, upstreamBody = r.Header.Get("Authorization"), string(b)
		upMu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"noted"},"finish_reason":"stop"}]}`)
	}))
	defer upstream.Close()
	platform := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true,"result":{"message_id":1}}`)
	}))
	defer platform.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "caduceus.yaml")
	os.WriteFile(cfg, []byte(`gates: [trader, shim, relay]
shim:
  offline: false
  upstreams:
    openai: `+upstream.URL+`/v1
    anthropic: `+upstream.URL+`
relay:
  telegram_base_url: `+platform.URL+`
  discord_base_url: `+platform.URL+`/api/v10
  gateways:
    gw-logs: {tenant: slot-1, secrets: ["env:LOGTEST_GATEWAY_SECRET"]}
  telegram:
    logbot:
      token: env:LOGTEST_TELEGRAM_TOKEN
      secret_token: env:LOGTEST_TELEGRAM_SECRET
      tenant: slot-1
      parse_mode: plain
  discord:
    "123456789012345678":
      public_key: f56cdf9ad997d199cac7ab91bdd7b3238e641a0f070692b685aacfeee6ec21fa
      bot_token: env:LOGTEST_DISCORD_TOKEN
      tenant: slot-1
`), 0o600)
	var env []string
	for k, v := range secrets {
		env = append(env, k+"="+v)
	}
	data := filepath.Join(dir, "data")
	p := startProc(t, env, "--config", cfg, "--data", data, "--log-format", "json", "--log-level", "debug")
	admin := p.awaitKey(t)
	edge := secrets["CADUCEUS_EDGE_SECRET"]

	do := func(method, path, key, body string, hdr ...string) int {
		t.Helper()
		req, _ := http.NewRequest(method, p.url+path, strings.NewReader(body))
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		req.Header.Set("X-Edge-Auth", edge)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: no X-Request-Id", method, path)
		}
		return resp.StatusCode
	}
	code, out, stderr := runCaduceus(t, env, "keys", "create", "--data", data, "--tenant", "slot-1", "--scopes", "route")
	if code != 0 {
		t.Fatal(stderr)
	}
	route := strings.TrimSpace(out)
	secrets["route key"], secrets["admin key"] = route, admin
	code, tok, stderr := runCaduceus(t, env, "relay", "token", "--gateway", "gw-logs", "--config", cfg)
	if code != 0 || strings.TrimSpace(tok) == "" {
		t.Fatalf("relay token: %d %s", code, stderr)
	}
	secrets["relay token"] = strings.TrimSpace(tok)

	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"remember ` + phrase + ` for later"}]}`
	if c := do("POST", "/v1/chat/completions", route, chat, "X-Request-Id", "client-req-42"); c != 200 {
		t.Errorf("chat completion: %d", c)
	}
	upMu.Lock()
	if upstreamAuth != "Bearer "+secrets["CADUCEUS_OPENAI_API_KEY"] || !strings.Contains(upstreamBody, phrase) {
		t.Errorf("the upstream did not get the prompt with the configured key: %q", upstreamAuth)
	}
	upMu.Unlock()
	// The gateway dials in; the Telegram update reaches it, text and all.
	ws, _, err := websocket.Dial(t.Context(), "ws"+strings.TrimPrefix(p.url, "http")+"/relay", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + secrets["relay token"]}, "X-Edge-Auth": {edge}}})
	if err != nil {
		t.Fatalf("gateway dial: %v", err)
	}
	defer ws.CloseNow()
	if err := ws.Write(t.Context(), websocket.MessageText, []byte("{\"type\":\"hello\",\"platform\":\"telegram\",\"botId\":\"logbot\"}\n")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	readUntil := func(want string) {
		t.Helper()
		for {
			_, frame, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("the gateway got no frame holding %q: %v", want, err)
			}
			if strings.Contains(string(frame), want) {
				return
			}
		}
	}
	readUntil(`"type":"descriptor"`) // the connector answered the hello
	update := `{"update_id":1,"message":{"message_id":7,"date":1,"chat":{"id":42,"type":"private"},"from":{"id":9,"is_bot":false,"first_name":"A"},"text":"` + phrase + `"}}`
	do("POST", "/hooks/telegram/logbot", "", update, "X-Telegram-Bot-Api-Secret-Token", secrets["LOGTEST_TELEGRAM_SECRET"])
	readUntil(phrase)
	ws.Close(websocket.StatusNormalClosure, "")
	do("POST", "/hooks/telegram/logbot", "", update, "X-Telegram-Bot-Api-Secret-Token", "wrong-"+secrets["LOGTEST_TELEGRAM_SECRET"])
	if c := do("GET", "/v1/admin/keys", admin, ""); c != 200 {
		t.Errorf("list keys: %d", c)
	}
	do("GET", "/v1/admin/keys", route[:len(route)-4]+"aaaa", "")                 // a wrong secret for a known key id
	do("GET", "/v1/admin/keys?token="+secrets["LOGTEST_GATEWAY_SECRET"], "", "") // a secret in a query
	do("GET", "/healthz", "", "")
	req, _ := http.NewRequest("GET", p.url+"/v1/admin/keys", nil) // no edge secret
	req.Header.Set("Authorization", "Bearer "+admin)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	p.stop(t)

	log := p.stderr.String()
	if os.Getenv("CADUCEUS_TEST_SHOW") != "" {
		t.Log(log)
	}
	for name, secret := range secrets {
		if strings.Contains(log, secret) {
			t.Errorf("the log holds the %s", name)
		}
		if _, rest, ok := strings.Cut(secret, "_"); ok && strings.HasPrefix(secret, "cad_") {
			if _, sec, ok := strings.Cut(rest, "_"); ok && strings.Contains(log, sec) {
				t.Errorf("the log holds the secret part of the %s", name)
			}
		}
	}
	if strings.Contains(log, phrase) {
		t.Error("the log holds message text")
	}
	requests := map[string][]map[string]any{}
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Errorf("a log line is not JSON: %q", sc.Text())
			continue
		}
		if rec["msg"] == "request" {
			r, _ := rec["route"].(string)
			requests[r] = append(requests[r], rec)
		}
	}
	chatLines := requests["POST /v1/chat/completions"]
	if len(chatLines) != 1 {
		t.Fatalf("request lines of the chat completion: %v (all: %v)", chatLines, requests)
	}
	l := chatLines[0]
	if l["request_id"] != "client-req-42" || l["status"] != float64(200) || l["tenant"] != "slot-1" || l["key_id"] != route[4:20] || l["duration_ms"] == nil {
		t.Errorf("the chat completion's request line: %v", l)
	}
	for _, want := range []string{"POST /hooks/telegram/{bot}", "GET /relay", "GET /v1/admin/keys", "GET /healthz"} {
		if len(requests[want]) == 0 {
			t.Errorf("no request line for %s (routes logged: %v)", want, keysOf(requests))
		}
	}
	statuses := map[float64]bool{}
	for _, l := range requests["GET /v1/admin/keys"] {
		statuses[l["status"].(float64)] = true
		if id, _ := l["request_id"].(string); len(id) != 24 {
			t.Errorf("a made request id: %q", id)
		}
	}
	if !statuses[200] || !statuses[401] {
		t.Errorf("the admin route's lines: %v", requests["GET /v1/admin/keys"])
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
