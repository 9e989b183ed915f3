package connector_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/gateway"
	"github.com/caduceus-dev/caduceus/relay/relaytest"
)

const (
	slot1 contract.TenantSlot = "slot-1"
	slot2 contract.TenantSlot = "slot-2"

	discordApp   = "100000000000000001"
	telegramBot  = "tbot"
	tgSecret     = "tg-webhook-secret-1"
	forumChat    = "-1001234567890"
	secretLength = 32
)

var (
	secretA  = bytes.Repeat([]byte("a"), secretLength)
	secretA2 = bytes.Repeat([]byte("c"), secretLength)
	secretB  = bytes.Repeat([]byte("b"), secretLength)
)

// apiCall is one request a fake platform API received.
type apiCall struct {
	Method, Path, Auth string
	Body               map[string]any
}

// fakeAPI is an httptest fake of a platform API (Discord REST or the
// Telegram Bot API): it records requests and answers in the platform's shape.
type fakeAPI struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []apiCall
	next  atomic.Int64
	// commands are the Discord application's global commands (GET and PUT
	// /applications/{app}/commands).
	commands []byte
	// seen, when set, receives "METHOD path" of every call (never blocking).
	seen chan string
}

func (f *fakeAPI) record(c apiCall) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	ch := f.seen
	f.mu.Unlock()
	if ch != nil {
		select {
		case ch <- c.Method + " " + c.Path:
		default:
		}
	}
}

func (f *fakeAPI) Calls() []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]apiCall(nil), f.calls...)
}

// apiBody reads a request body: a JSON object, or a multipart form whose
// fields become strings and whose one file part becomes _file_field,
// _file_name, _file_type and _file_data. It also returns the raw JSON.
func apiBody(r *http.Request) ([]byte, map[string]any) {
	var body map[string]any
	if mt, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt == "multipart/form-data" {
		body = map[string]any{}
		mr := multipart.NewReader(r.Body, params["boundary"])
		for {
			p, err := mr.NextPart()
			if err != nil {
				break
			}
			data, _ := io.ReadAll(p)
			if p.FileName() != "" {
				body["_file_field"], body["_file_name"], body["_file_type"], body["_file_data"] = p.FormName(), p.FileName(), p.Header.Get("Content-Type"), string(data)
				continue
			}
			body[p.FormName()] = string(data)
		}
		return nil, body
	}
	b, _ := io.ReadAll(r.Body)
	_ = json.Unmarshal(b, &body)
	return b, body
}

func newFakeDiscord(t testing.TB) *fakeAPI {
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, body := apiBody(r)
		f.record(apiCall{r.Method, r.URL.RequestURI(), r.Header.Get("Authorization"), body})
		switch {
		case strings.HasSuffix(r.URL.Path, "/commands"):
			f.mu.Lock()
			if r.Method == http.MethodPut {
				f.commands = b
			}
			out := f.commands
			f.mu.Unlock()
			if out == nil {
				out = []byte("[]")
			}
			_, _ = w.Write(out)
		case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/channels/thr"): // a public thread off channel 333
			fmt.Fprintf(w, `{"id":%q,"type":11,"name":"a thread","parent_id":"333"}`, strings.TrimPrefix(r.URL.Path, "/channels/"))
		case r.Method == http.MethodGet:
			fmt.Fprintf(w, `{"id":%q,"type":0,"name":"general"}`, strings.TrimPrefix(r.URL.Path, "/channels/"))
		case strings.HasSuffix(r.URL.Path, "/typing"):
			w.WriteHeader(http.StatusNoContent)
		default:
			fmt.Fprintf(w, `{"id":"%d"}`, 900+f.next.Add(1))
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func newFakeTelegram(t testing.TB) *fakeAPI {
	f := &fakeAPI{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, body := apiBody(r)
		f.record(apiCall{r.Method, r.URL.Path, "", body})
		if text, _ := body["text"].(string); strings.Contains(text, "*unclosed") && body["parse_mode"] != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"ok":false,"error_code":400,"description":"Bad Request: can't parse entities: Can't find end of Bold entity at byte offset 0"}`)
			return
		}
		switch {
		case strings.HasSuffix(r.URL.Path, "/getFile"):
			if id, _ := body["file_id"].(string); strings.HasPrefix(id, "gone") {
				fmt.Fprint(w, `{"ok":false,"error_code":400,"description":"Bad Request: invalid file_id"}`)
				return
			}
			fmt.Fprintf(w, `{"ok":true,"result":{"file_id":%q,"file_path":"photos/%s.jpg"}}`, body["file_id"], body["file_id"])
		case strings.HasPrefix(r.URL.Path, "/file/bot123:TGTOKEN/photos/"): // the file's bytes, by the bot's token
			w.Header().Set("Content-Type", "application/octet-stream")
			fmt.Fprint(w, tgFileBytes(strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/file/bot123:TGTOKEN/photos/"), ".jpg")))
		case strings.HasPrefix(r.URL.Path, "/file/"):
			w.WriteHeader(http.StatusNotFound)
		case strings.HasSuffix(r.URL.Path, "/sendMessage"), strings.HasSuffix(r.URL.Path, "/sendPhoto"), strings.HasSuffix(r.URL.Path, "/sendDocument"),
			strings.HasSuffix(r.URL.Path, "/sendVideo"), strings.HasSuffix(r.URL.Path, "/sendVoice"), strings.HasSuffix(r.URL.Path, "/sendAudio"):
			fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%d,"chat":{"id":1,"type":"supergroup"}}}`, 500+f.next.Add(1))
		case strings.HasSuffix(r.URL.Path, "/createForumTopic"):
			fmt.Fprintf(w, `{"ok":true,"result":{"message_thread_id":%d,"name":"t","icon_color":0}}`, 700+f.next.Add(1))
		case strings.HasSuffix(r.URL.Path, "/getChat"):
			fmt.Fprint(w, `{"ok":true,"result":{"id":-1001234567890,"type":"supergroup","title":"Team","is_forum":true}}`)
		default:
			fmt.Fprint(w, `{"ok":true,"result":true}`)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// clock is a settable time source.
type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// env is one connector on an httptest server with fake platform APIs.
type env struct {
	t        testing.TB
	conn     *connector.Connector
	srv      *httptest.Server
	store    *relaytest.Memory
	audit    *audit.Memory
	discord  *fakeAPI
	telegram *fakeAPI
	priv     ed25519.PrivateKey
	clock    *clock
	logs     *syncBuffer // everything the connector logged, at debug level
	config   connector.Config
	// changed is signalled whenever the connector logs, appends an audit
	// record, acknowledges a buffered event or releases a connection's
	// leases: await re-reads its condition then.
	changed chan struct{}
}

// signal wakes an await (never blocking: one pending wake is enough, the
// condition is read again after it).
func (e *env) signal() {
	select {
	case e.changed <- struct{}{}:
	default:
	}
}

// await blocks until cond holds, reading it again on every change the
// connector makes (see env.changed); what names the wait in a failure.
func (e *env) await(t testing.TB, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-e.changed:
		case <-timeout:
			t.Fatalf("gave up waiting for %s", what)
		}
	}
}

// watchedLog is the env's audit log: the memory log, signalling each append.
type watchedLog struct {
	*audit.Memory
	e *env
}

func (l watchedLog) Append(ctx context.Context, en audit.Entry) (audit.Record, error) {
	defer l.e.signal()
	return l.Memory.Append(ctx, en)
}

// watchedStore is the env's relay store: the memory store, signalling each
// acknowledgement and each release of a connection's leases (the last thing
// the connector does with a connection's buffer when it ends).
type watchedStore struct {
	*relaytest.Memory
	e *env
}

func (s watchedStore) Ack(ctx context.Context, tenant contract.TenantSlot, id string) (bool, error) {
	defer s.e.signal()
	return s.Memory.Ack(ctx, tenant, id)
}

func (s watchedStore) ReleaseLeases(ctx context.Context, tenant contract.TenantSlot, owner string) error {
	defer s.e.signal()
	return s.Memory.ReleaseLeases(ctx, tenant, owner)
}

// syncBuffer is a goroutine-safe log sink; onWrite, when set, runs after
// each write.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	onWrite func()
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	n, err := s.b.Write(p)
	s.mu.Unlock()
	if s.onWrite != nil {
		s.onWrite()
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newEnv(t testing.TB, mutate ...func(*connector.Config)) *env {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(nil)
	e := &env{t: t, store: relaytest.NewMemory(), audit: audit.NewMemory(), discord: newFakeDiscord(t), telegram: newFakeTelegram(t),
		priv: priv, clock: &clock{}, logs: &syncBuffer{}, changed: make(chan struct{}, 1)}
	e.logs.onWrite = e.signal
	e.clock.ns.Store(time.Now().UnixNano())
	cfg := connector.Config{
		Gateways: map[string]connector.Gateway{
			"gw-a":  {Tenant: slot1, Secrets: [][]byte{secretA}},
			"gw-a2": {Tenant: slot1, Secrets: [][]byte{secretA2}},
			"gw-b":  {Tenant: slot2, Secrets: [][]byte{secretB}},
		},
		Discord: map[string]connector.DiscordApp{discordApp: {
			PublicKey: hex.EncodeToString(pub), BotToken: "discord-bot-token",
			Guilds: map[string]contract.TenantSlot{"111": slot1, "222": slot2},
			Users:  map[string]contract.TenantSlot{"555": slot1},
		}},
		Telegram: map[string]connector.TelegramBot{telegramBot: {
			Token: "123:TGTOKEN", SecretToken: tgSecret,
			Chats: map[string]contract.TenantSlot{forumChat: slot1, "5": slot2},
		}},
		Store: watchedStore{e.store, e}, Audit: watchedLog{e.audit, e}, Now: e.clock.Now,
		DiscordBaseURL: e.discord.srv.URL, TelegramBaseURL: e.telegram.srv.URL,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(logOut(), e.logs), &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mutate {
		m(&cfg)
	}
	e.config = cfg
	c, err := connector.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.conn = c
	e.srv = httptest.NewServer(c.Handler())
	t.Cleanup(func() {
		_ = c.Close()
		e.srv.Close()
	})
	return e
}

// gw is a connected gateway adapter that collects what it receives.
type gw struct {
	*gateway.Adapter
	events     chan gateway.Inbound
	interrupts chan [2]string
	fail       atomic.Bool   // when set, OnEvent fails (no ack)
	refused    chan struct{} // one per event refused while failing
}

func (e *env) gateway(id string, secret []byte, platform, bot string, opts ...func(*gw)) *gw {
	e.t.Helper()
	g := &gw{events: make(chan gateway.Inbound, 1000), interrupts: make(chan [2]string, 100), refused: make(chan struct{}, 1000)}
	for _, o := range opts {
		o(g)
	}
	a, err := gateway.New(gateway.Config{
		URL: e.srv.URL, GatewayID: id, Secret: secret, Platform: platform, BotID: bot,
		OnEvent: func(_ context.Context, in gateway.Inbound) error {
			if g.fail.Load() {
				g.refused <- struct{}{}
				return fmt.Errorf("handler down")
			}
			g.events <- in
			return nil
		},
		OnInterrupt: func(k, c string) { g.interrupts <- [2]string{k, c} },
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		MinBackoff:  10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := a.Connect(e.t.Context()); err != nil {
		e.t.Fatalf("connect %s: %v", id, err)
	}
	e.t.Cleanup(func() { _ = a.Close() })
	g.Adapter = a
	return g
}

func (g *gw) next(t *testing.T) gateway.Inbound {
	t.Helper()
	select {
	case in := <-g.events:
		return in
	case <-time.After(5 * time.Second):
		t.Fatal("no inbound event within 5 s")
		return gateway.Inbound{}
	}
}

// none asserts nothing more arrives within a short wait.
func (g *gw) none(t *testing.T, what string) {
	t.Helper()
	select {
	case in := <-g.events:
		t.Fatalf("%s: unexpected event %+v", what, in.Event)
	case <-time.After(150 * time.Millisecond):
	}
}

// postDiscord signs and posts an interaction; it returns status and body.
func (e *env) postDiscord(body string, tamper func(ts, sig string, b []byte) (string, string, []byte)) (int, string) {
	e.t.Helper()
	ts := fmt.Sprint(e.clock.Now().Unix())
	b := []byte(body)
	sig := hex.EncodeToString(ed25519.Sign(e.priv, append([]byte(ts), b...)))
	if tamper != nil {
		ts, sig, b = tamper(ts, sig, b)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/discord/"+discordApp, bytes.NewReader(b))
	req.Header.Set("X-Signature-Ed25519", sig)
	req.Header.Set("X-Signature-Timestamp", ts)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

func (e *env) postTelegram(body, secret string) int {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/hooks/telegram/"+telegramBot, strings.NewReader(body))
	if secret != "" {
		req.Header.Set("X-Telegram-Bot-Api-Secret-Token", secret)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// interaction builds a slash-command interaction body.
func interaction(id, guild, channel, user, token, prompt string) string {
	g := ""
	who := fmt.Sprintf(`"user":{"id":%q,"username":"u%s"}`, user, user)
	if guild != "" {
		g = fmt.Sprintf(`"guild_id":%q,`, guild)
		who = fmt.Sprintf(`"member":{"user":{"id":%q,"username":"u%s"}}`, user, user)
	}
	return fmt.Sprintf(`{"id":%q,"application_id":%q,"type":2,"token":%q,"version":1,%s"channel_id":%q,%s,
		"data":{"id":"c1","name":"ask","type":1,"options":[{"name":"prompt","type":3,"value":%q}]}}`,
		id, discordApp, token, g, channel, who, prompt)
}

func forumUpdate(updateID, messageID int, thread int, text string) string {
	return fmt.Sprintf(`{"update_id":%d,"message":{"message_id":%d,"message_thread_id":%d,"is_topic_message":true,
		"from":{"id":9,"first_name":"Al"},"chat":{"id":%s,"type":"supergroup","title":"Team","is_forum":true},
		"date":1700000000,"text":%q}}`, updateID, messageID, thread, forumChat, text)
}

// auditBodies returns every audit record body of a tenant, joined.
func (e *env) auditBodies(t contract.TenantSlot) string {
	var b strings.Builder
	for _, r := range e.audit.Records(t) {
		b.Write(r.Body)
		b.WriteByte('\n')
	}
	return b.String()
}

func (e *env) auditActions(t contract.TenantSlot) map[string]int {
	m := map[string]int{}
	for _, r := range e.audit.Records(t) {
		m[r.Outcome.Action+"/"+string(r.Outcome.Outcome)]++
	}
	return m
}

var _ = relay.ContractVersion

func contractSlot(s string) contract.TenantSlot { return contract.TenantSlot(s) }

func (e *env) postDiscordTo(path, body string) (int, error) {
	resp, err := http.Post(e.srv.URL+path, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

func wsURL(e *env) string { return "ws" + strings.TrimPrefix(e.srv.URL, "http") + "/relay" }

// dialRaw dials with token and returns the close code and reason.
func dialRaw(t *testing.T, e *env, token string) (websocket.StatusCode, string) {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), wsURL(e), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer ws.CloseNow()
	_, _, err = ws.Read(t.Context())
	var ce websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("read after refused upgrade: %v", err)
	}
	return ce.Code, ce.Reason
}

func rawConn(t *testing.T, e *env, token string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), wsURL(e), &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return ws
}

func write(t *testing.T, ws *websocket.Conn, s string) {
	t.Helper()
	if err := ws.Write(t.Context(), websocket.MessageText, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

func readRaw(t *testing.T, ws *websocket.Conn) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, b, err := ws.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFrame(t *testing.T, ws *websocket.Conn) relay.Frame {
	t.Helper()
	b := readRaw(t, ws)
	f, err := relay.ParseFrame(bytes.TrimSpace(b))
	if err != nil {
		t.Fatalf("frame %s: %v", b, err)
	}
	return f
}

var frameSchema = contract.MustSchema("relay.frame.schema.json")

func relaySchemaCheck(raw []byte) error {
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		if err := frameSchema.ValidateJSON(line); err != nil {
			return err
		}
	}
	return nil
}

func logOut() io.Writer {
	if os.Getenv("RELAY_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
