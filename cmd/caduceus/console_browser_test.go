package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color/palette"
	"image/draw"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay/gateway"
	"github.com/chromedp/chromedp"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/store"
	"github.com/caduceus-dev/caduceus/trail"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite docs/console.png from TestConsoleInBrowser")

// chromium finds the headless browser. It fails the test, never skips it:
// the console is tested in a real browser or not at all (.ci/run installs
// Debian's chromium when it is missing).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: the console's browser test needs it (apt-get install -y chromium; .ci/run installs it)")
	return ""
}

// TestConsoleInBrowser drives the console in headless Chromium: data made
// through the real API (a shim turn, a trader decision and an executor
// tick in one conversation), a login link from `caduceus console`, the
// conversations page, the conversation's timeline with every event of
// its trail, and every other page; each page's screenshot goes to the
// test's temp dir.
func TestConsoleInBrowser(t *testing.T) {
	browser := chromium(t)
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
    quietbot: {token: "env:TG_TOKEN", secret_token: "tg-webhook-secret", tenant: slot-1, parse_mode: plain}
`, tgSrv.URL)), 0o600)
	env := map[string]string{"GW_A_SECRET": secret, "TG_TOKEN": "123:TGTOKEN"}
	in := startEnv(t, func(k string) string { return env[k] }, "--config", cfg, "--skills", exSkills, "--scenario", exScenario, "--offline")
	if code, out, errOut := cli(t, "trader", "import", "testdata/strategies.yaml", "--data", in.data); code != 0 {
		t.Fatalf("import: %d %s %s", code, out, errOut)
	}
	_, shimKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,configure", "--harness", "claude-code")
	_, opKey, _ := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route,operate", "--context", "cron", "--harness", "autotrader")
	shimKey, opKey = strings.TrimSpace(shimKey), strings.TrimSpace(opKey)

	// A Telegram message reaches the agent's gateway with its session key.
	a, events, _ := connectAdapter(t, in.url, "gw-a", secret, "telegram", "acmebot")
	webhook := func(bot, update string) {
		t.Helper()
		req, _ := http.NewRequest("POST", in.url+"/hooks/telegram/"+bot, strings.NewReader(update))
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", "tg-webhook-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("webhook %s: %d", bot, resp.StatusCode)
		}
	}
	webhook("acmebot", `{"update_id":1,"message":{"message_id":77,"from":{"id":42,"first_name":"Al"},"chat":{"id":-1001,"type":"supergroup","title":"Team"},"date":1700000000,"text":"buy some SPY. how do I get a refund?"}}`)
	var ev gateway.Inbound
	select {
	case ev = <-events:
	case <-time.After(10 * time.Second):
		t.Fatal("no event reached the gateway")
	}
	session := ev.SessionKey
	// Another bot that no gateway serves: its message waits in the buffer.
	webhook("quietbot", `{"update_id":2,"message":{"message_id":78,"from":{"id":43,"first_name":"Bo"},"chat":{"id":-1002,"type":"supergroup","title":"Ops"},"date":1700000000,"text":"anyone there?"}}`)

	// The agent works on it: an LLM turn, a trader decision and an
	// executor tick, each naming the conversation by its session key; then
	// it replies.
	conv := contract.ConversationFor("slot-1", session)
	post := func(path, key, body string, hdr ...string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), "POST", in.url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %d %s", path, resp.StatusCode, b)
		}
	}
	post("/v1/provisions", shimKey, `{"id":"PROV-REFUNDS","triggers":{"keyword":{"any":["refund"]}},"action":"respond_directly","response":{"text":"Refunds take 14 days.","stop_reason":"end_turn"}}`, "X-Caduceus-Harness", "claude-code")
	post("/v1/chat/completions", shimKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"buy some SPY. how do I get a refund?"}]}`, "X-Caduceus-Harness", "claude-code", contract.HeaderConversation, session)
	decision, _ := os.ReadFile("testdata/decision.json")
	post("/v1/trader/decisions", opKey, string(decision), contract.HeaderConversation, session)
	payload, _ := os.ReadFile(exPayload)
	tick, _ := json.Marshal(map[string]any{"payload": json.RawMessage(payload)})
	post("/v1/executor/ticks", opKey, string(tick), contract.HeaderConversation, session)
	if res := a.Send(t.Context(), "-1001", "Bought 1 SPY. Refunds take 14 days.", "", nil); !res.Success {
		t.Fatalf("reply: %+v", res)
	}

	// The trail the console must show, read as the server reads it.
	db, err := store.Open(t.Context(), "", in.data)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	reader := trail.New(db.Trail(), trail.Options{})
	want, err := reader.Get(t.Context(), "slot-1", conv)
	if err != nil {
		t.Fatalf("the conversation's trail: %v", err)
	}
	gates := map[trail.Gate]bool{}
	for _, e := range want.Events {
		gates[e.Gate] = true
	}
	var kinds []string
	for _, e := range want.Events {
		kinds = append(kinds, e.Kind)
	}
	if got := strings.Join(kinds, " "); got != "inbound_message llm_turn decision tick outbound_reply" {
		t.Fatalf("the trail of %s: %s", conv, got)
	}
	t.Logf("trail of %s: %d events from gates %v", conv, len(want.Events), gates)

	// `caduceus console` for the admin key's tenant.
	adminID := strings.Split(in.adminKey, "_")[1]
	code, loginURL, errOut := cli(t, "console", "--data", in.data, "--key", adminID, "--url", in.url)
	loginURL = strings.TrimSpace(loginURL)
	if code != 0 || !strings.HasPrefix(loginURL, in.url+"/console/login?token=ct1.") {
		t.Fatalf("caduceus console: %d %q %s", code, loginURL, errOut)
	}

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1200, 800))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	defer cancel()

	shots := t.TempDir()
	if dir := os.Getenv("CADUCEUS_CONSOLE_SCREENSHOTS"); dir != "" {
		shots = dir // to look at them after the test
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	shoot := func(name string) {
		t.Helper()
		shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		if err := os.WriteFile(filepath.Join(shots, name+".png"), shot, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Log in: the link sets the cookie and the page moves on to the
	// conversations list by itself.
	if err := chromedp.Do(ctx, chromedp.Navigate(loginURL), chromedp.WaitVisible(chromedp.CSS(`table.list`))); err != nil {
		t.Fatalf("login and conversations page: %v", err)
	}
	listText := text(`main`)
	cookie, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie`))
	if err != nil {
		t.Fatal(err)
	}
	shoot("conversations")
	if !strings.Contains(listText, conv) {
		t.Errorf("conversations page lacks %s:\n%s", conv, listText)
	}
	if cookie != "" {
		t.Errorf("the session cookie is readable from the page (not HttpOnly): %q", cookie)
	}

	// The conversation: click through from the list, then find each event.
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`a[href="/console/conversations/`+conv+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)),
	); err != nil {
		t.Fatalf("conversation page: %v", err)
	}
	shoot("conversation")
	for _, e := range want.Events {
		text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`li#ev-`+e.AuditID), chromedp.AtLeast(0)))
		if err != nil || text == "" {
			t.Errorf("event %s (%s %s) is not on the page: %v", e.AuditID, e.Gate, e.Kind, err)
			continue
		}
		for _, part := range []string{string(e.Gate), e.Kind, e.AuditID} {
			if !strings.Contains(text, part) {
				t.Errorf("event %s on the page lacks %q: %s", e.AuditID, part, text)
			}
		}
		if e.Verified && !strings.Contains(text, "✓ verified") {
			t.Errorf("event %s is verified but not marked so: %s", e.AuditID, text)
		}
	}
	if *updateScreenshot {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(1000, 620)); err != nil {
			t.Fatal(err)
		}
		shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "console.png"), smallPNG(t, shot), 0o644); err != nil {
			t.Fatal(err)
		}
		chromedp.Do(ctx, chromedp.EmulateViewport(1200, 800))
	}

	// The LLM turn's receipt, reached through the event's details.
	var turn trail.Event
	for _, e := range want.Events {
		if e.Kind == "llm_turn" {
			turn = e
		}
	}
	receiptLink := `li#ev-` + turn.AuditID + ` a[href^="/console/receipts#rcpt_"]`
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`li#ev-`+turn.AuditID+` summary`)),
		chromedp.WaitVisible(chromedp.CSS(receiptLink)),
		chromedp.Click(chromedp.CSS(receiptLink)),
		chromedp.WaitVisible(chromedp.CSS(`tr:target`)),
	); err != nil {
		t.Fatalf("from the LLM turn to its receipt: %v", err)
	}
	if row := text(`tr:target`); !strings.Contains(row, "respond_directly") || !strings.Contains(row, "PROV-REFUNDS") {
		t.Errorf("the receipt row the turn links to: %s", row)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(in.url+"/console/conversations/"+conv), chromedp.WaitVisible(chromedp.CSS(`ol.timeline`))); err != nil {
		t.Fatal(err)
	}

	// A record, reached through the timeline's link.
	first := want.Events[0].AuditID
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.CSS(`li#ev-`+first+` a[href="/console/records/`+first+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dl.facts`)),
	); err != nil {
		t.Fatalf("record page: %v", err)
	}
	rec := text(`main`)
	shoot("record")
	if !strings.Contains(rec, first) || !strings.Contains(rec, "verifies from genesis") {
		t.Errorf("record page:\n%s", rec)
	}

	// Every other page renders in the browser.
	for _, p := range []struct{ path, name, want string }{
		{"/console/receipts", "receipts", "respond_directly"},
		{"/console/decisions", "decisions", "dec_2026_04_16_001"},
		{"/console/ticks", "ticks", "placed"},
		{"/console/relay", "relay", "gw-a"},
		{"/console/keys", "keys", adminID},
		{"/console/audit", "audit", "✓ verified"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(in.url+p.path), chromedp.WaitVisible(chromedp.CSS(`main h1`))); err != nil {
			t.Fatalf("%s: %v", p.path, err)
		}
		shoot(p.name)
		if got := text(`main`); !strings.Contains(got, p.want) {
			t.Errorf("%s lacks %q:\n%s", p.path, p.want, got)
		}
	}

	// The login link worked once: a second visit is refused.
	if err := chromedp.Do(ctx, chromedp.Navigate(loginURL)); err != nil {
		t.Fatal(err)
	}
	if again := text(`main`); !strings.Contains(again, "already used") {
		t.Errorf("second use of the login link:\n%s", again)
	}
	entries, _ := os.ReadDir(shots)
	if len(entries) != 9 {
		t.Errorf("%d screenshots in %s, want 9", len(entries), shots)
	}
	t.Logf("screenshots in %s", shots)
}

// smallPNG re-encodes a screenshot with a 256-colour palette, so the one
// the README shows stays a few tens of KB.
func smallPNG(t *testing.T, b []byte) []byte {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	pal := image.NewPaletted(img.Bounds(), palette.Plan9)
	draw.Draw(pal, img.Bounds(), img, img.Bounds().Min, draw.Src)
	var out bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestCompression}
	if err := enc.Encode(&out, pal); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
