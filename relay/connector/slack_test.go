package connector_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/slack"
)

// rawAPI is an httptest fake of a third-party API that records each request
// as "METHOD path?query auth body" and answers through reply.
type rawAPI struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []string
}

func newRawAPI(t testing.TB, reply func(r *http.Request, body string, n int) (int, string)) *rawAPI {
	f := &rawAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.calls = append(f.calls, fmt.Sprintf("%s %s %s %s", r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), b))
		n := len(f.calls)
		f.mu.Unlock()
		code, out := reply(r, string(b), n)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, out)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *rawAPI) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *rawAPI) seen() string { return strings.Join(f.Calls(), "\n") }

const (
	slackApp    = "A0SLACKAPP"
	slackSecret = "slack-signing-secret-1"
)

func fakeSlackAPI(t testing.TB) *rawAPI {
	return newRawAPI(t, func(r *http.Request, body string, n int) (int, string) {
		switch {
		case strings.HasSuffix(r.URL.Path, "/chat.postMessage"):
			return 200, `{"ok":true,"channel":"C1","ts":"1700000500.00000` + strconv.Itoa(n) + `"}`
		case strings.HasSuffix(r.URL.Path, "/conversations.info"):
			return 200, `{"ok":true,"channel":{"id":"C1","name":"general","is_channel":true}}`
		}
		return 200, `{"ok":true}`
	})
}

func withSlack(api *rawAPI) func(*connector.Config) {
	return func(c *connector.Config) {
		c.Slack = map[string]connector.SlackApp{slackApp: {SigningSecret: slackSecret, BotToken: "xoxb-slack-token",
			Teams: map[string]contract.TenantSlot{"T1": slot1, "T2": slot2}, APIBaseURL: api.srv.URL}}
	}
}

// postSlack signs body at ts with secret and posts it.
func (e *env) postSlack(body string, ts time.Time, secret string) (int, string) {
	e.t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	req, _ := http.NewRequest("POST", e.srv.URL+"/hooks/slack/"+slackApp, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(slack.TimestampHeader, stamp)
	req.Header.Set(slack.SignatureHeader, slack.Sign(secret, stamp, []byte(body)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func slackMessage(team, channel, channelType, user, ts, threadTS, text string) string {
	thread := ""
	if threadTS != "" {
		thread = fmt.Sprintf(`,"thread_ts":%q`, threadTS)
	}
	return fmt.Sprintf(`{"token":"x","team_id":%q,"api_app_id":%q,"type":"event_callback","event_id":"Ev%s","event_time":1700000000,`+
		`"event":{"type":"message","channel":%q,"channel_type":%q,"user":%q,"text":%q,"ts":%q%s}}`,
		team, slackApp, ts, channel, channelType, user, text, ts, thread)
}

func TestSlackWebhook(t *testing.T) {
	api := fakeSlackAPI(t)
	e := newEnv(t, withSlack(api))
	now := e.clock.Now()

	// The URL verification handshake is signed too.
	challenge := `{"token":"x","challenge":"c-123","type":"url_verification"}`
	if code, body := e.postSlack(challenge, now, slackSecret); code != 200 || body != `{"challenge":"c-123"}` {
		t.Fatalf("url_verification: %d %s", code, body)
	}
	if code, _ := e.postSlack(challenge, now, "not-the-secret"); code != 401 {
		t.Errorf("forged url_verification: %d", code)
	}

	// No gateway connected yet: the message is buffered and answered at once.
	msg := slackMessage("T1", "C1", "channel", "U1", "1700000000.000300", "", "hello agent")
	if code, _ := e.postSlack(msg, now, slackSecret); code != 200 {
		t.Fatalf("webhook: %d", code)
	}
	// Forged (wrong secret), stale (6 minutes old), replayed (the same
	// signed bytes again): nothing delivered.
	forged := slackMessage("T1", "C1", "channel", "U1", "1700000000.000301", "", "forged")
	if code, _ := e.postSlack(forged, now, "not-the-secret"); code != 401 {
		t.Errorf("forged: %d", code)
	}
	stale := slackMessage("T1", "C1", "channel", "U1", "1700000000.000302", "", "stale")
	if code, _ := e.postSlack(stale, now.Add(-6*time.Minute), slackSecret); code != 401 {
		t.Errorf("stale: %d", code)
	}
	if code, _ := e.postSlack(msg, now, slackSecret); code != 200 {
		t.Errorf("replay: %d", code)
	}
	tampered := strings.Replace(msg, "hello agent", "hello agenT", 1)
	req, _ := http.NewRequest("POST", e.srv.URL+"/hooks/slack/"+slackApp, strings.NewReader(tampered))
	stamp := strconv.FormatInt(now.Unix(), 10)
	req.Header.Set(slack.TimestampHeader, stamp)
	req.Header.Set(slack.SignatureHeader, slack.Sign(slackSecret, stamp, []byte(msg)))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Errorf("tampered body: %v %v", resp, err)
	}

	g := e.gateway("gw-a", secretA, slack.Platform, slackApp)
	if d, ok := g.Descriptor(); !ok || d.MaxMessageLength != 40000 || d.MarkdownDialect != "mrkdwn" || len(d.SupportedOps) != 4 {
		t.Errorf("descriptor %+v", d)
	}
	in := g.next(t)
	src := in.Event.Source
	if in.Event.Text != "hello agent" || in.SessionKey != "agent:main:slack:group:T1:C1:1700000000.000300" ||
		src.ScopeID != "T1" || src.ThreadID != "1700000000.000300" || in.BufferID == "" {
		t.Errorf("event %+v key %q buffer %q", in.Event, in.SessionKey, in.BufferID)
	}
	g.none(t, "forged, stale, replayed and tampered requests")

	// Connected: a DM and a thread reply arrive directly; another team's
	// message goes to that team's tenant, not here.
	if code, _ := e.postSlack(slackMessage("T1", "D1", "im", "U1", "1700000001.000100", "", "in a DM"), now, slackSecret); code != 200 {
		t.Fatal(code)
	}
	if in := g.next(t); in.SessionKey != "agent:main:slack:dm:T1:D1:1700000001.000100" || in.Event.Source.ChatType != "dm" {
		t.Errorf("dm: %q %+v", in.SessionKey, in.Event.Source)
	}
	if code, _ := e.postSlack(slackMessage("T1", "C1", "channel", "U2", "1700000002.000100", "1700000000.000300", "follow-up"), now, slackSecret); code != 200 {
		t.Fatal(code)
	}
	if in := g.next(t); in.SessionKey != "agent:main:slack:group:T1:C1:1700000000.000300" {
		t.Errorf("thread reply keyed %q", in.SessionKey)
	}
	if code, _ := e.postSlack(slackMessage("T2", "C9", "channel", "U9", "1700000003.000100", "", "other team"), now, slackSecret); code != 200 {
		t.Fatal(code)
	}
	g.none(t, "another tenant's team")

	// Replies: in the session's thread, edits, typing status, chat info.
	ctx := t.Context()
	meta := map[string]any{"thread_id": "1700000000.000300"}
	res := g.Send(ctx, "C1", "hi *there*", "1700000000.000300", meta)
	if !res.Success || !strings.HasPrefix(res.MessageID, "1700000500.") {
		t.Fatalf("send: %+v", res)
	}
	if r := g.Edit(ctx, "C1", res.MessageID, "edited", nil); !r.Success {
		t.Errorf("edit: %+v", r)
	}
	if r := g.Typing(ctx, "C1", meta); !r.Success {
		t.Errorf("typing: %+v", r)
	}
	if r := g.Typing(ctx, "C1", nil); r.Success {
		t.Errorf("typing outside a thread succeeded: %+v", r)
	}
	if r := g.GetChatInfo(ctx, "C1"); !r.Success || r.Name != "general" || r.Type != "group" {
		t.Errorf("chat info: %+v", r)
	}
	if r := g.Send(ctx, "C9", "not my chat", "", nil); r.Success {
		t.Errorf("send to another tenant's chat succeeded: %+v", r)
	}
	calls := api.Calls()
	want := []string{
		`POST /chat.postMessage Bearer xoxb-slack-token {"channel":"C1","text":"hi *there*","thread_ts":"1700000000.000300"}`,
		`POST /chat.update Bearer xoxb-slack-token {"channel":"C1","text":"edited","ts":"` + res.MessageID + `"}`,
		`POST /assistant.threads.setStatus Bearer xoxb-slack-token {"channel_id":"C1","status":"is thinking…","thread_ts":"1700000000.000300"}`,
		`POST /conversations.info Bearer xoxb-slack-token channel=C1`,
	}
	if len(calls) != len(want) {
		t.Fatalf("Slack API saw:\n%s", api.seen())
	}
	for i := range want {
		if calls[i] != want[i] {
			t.Errorf("call %d:\n got %s\nwant %s", i, calls[i], want[i])
		}
	}
	if strings.Contains(e.auditBodies(slot1), "xoxb-slack-token") || strings.Contains(e.logs.String(), "xoxb-slack-token") {
		t.Error("the bot token leaked into audit or logs")
	}
}

func TestSlackConfig(t *testing.T) {
	f := connector.FileConfig{FilePlatforms: connector.FilePlatforms{Slack: map[string]connector.FileSlackApp{
		"A1": {SigningSecret: "env:SLACK_SECRET", BotToken: "env:SLACK_TOKEN", Tenant: "slot-1", TopLevelThreads: new(bool)}}}}
	cfg, err := f.Config(func(k string) string { return map[string]string{"SLACK_SECRET": "s", "SLACK_TOKEN": "xoxb"}[k] })
	if err != nil || cfg.Slack["A1"].SigningSecret != "s" || cfg.Slack["A1"].BotToken != "xoxb" || !cfg.Slack["A1"].NoTopLevelStamp {
		t.Fatalf("config: %+v %v", cfg.Slack, err)
	}
	if _, err := f.Config(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "relay.slack.A1.signing_secret") {
		t.Errorf("empty env: %v", err)
	}
	if !f.Configured() {
		t.Error("a Slack app alone is a configured relay")
	}
	_, err = connector.New(connector.Config{Store: newEnv(t).store, Audit: newEnv(t).audit,
		Slack: map[string]connector.SlackApp{"A1": {Tenant: "slot-1"}}})
	if err == nil || !strings.Contains(err.Error(), "signing secret") {
		t.Errorf("no signing secret: %v", err)
	}
}
