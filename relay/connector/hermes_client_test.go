package connector_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/connector"
	"github.com/caduceus-dev/caduceus/relay/gateway"
)

// hermesClient is a gateway written from HERMES-RELAY.md alone, not from
// relay/gateway: raw JSON frames in the Python gateway's spelling
// (json.dumps separators ", " and ": ", one frame and "\n" per text
// message), tokens minted as §1.2 says, and frames read as plain maps.
type hermesClient struct {
	t       *testing.T
	ws      *websocket.Conn
	pending [][]byte // frames read but not yet taken
}

// hermesToken is §1.2: unpadded base64url of "<id>:<exp>:<hex hmac>".
func hermesToken(id string, secret []byte, exp int64) string {
	payload := id + ":" + strconv.FormatInt(exp, 10)
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString([]byte(payload + ":" + hex.EncodeToString(m.Sum(nil))))
}

func dialHermes(t *testing.T, e *env, token string) *hermesClient {
	t.Helper()
	url := strings.Replace(e.srv.URL, "http://", "ws://", 1) + "/relay"
	ws, resp, err := websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade answered %d", resp.StatusCode)
	}
	t.Cleanup(func() { _ = ws.CloseNow() })
	return &hermesClient{t: t, ws: ws}
}

// send writes one frame as the gateway does: Python's json.dumps of obj.
func (h *hermesClient) send(obj map[string]any) {
	h.t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		h.t.Fatal(err)
	}
	// Python's default separators.
	var out bytes.Buffer
	inStr, esc := false, false
	for _, c := range b {
		out.WriteByte(c)
		switch {
		case esc:
			esc = false
		case c == '\\' && inStr:
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ',' || c == ':'):
			out.WriteByte(' ')
		}
	}
	out.WriteByte('\n')
	if err := h.ws.Write(h.t.Context(), websocket.MessageText, out.Bytes()); err != nil {
		h.t.Fatal(err)
	}
}

// next returns the next frame (a connector message may hold several).
func (h *hermesClient) next() map[string]any {
	h.t.Helper()
	for len(h.pending) == 0 {
		ctx, cancel := context.WithTimeout(h.t.Context(), 10*time.Second)
		_, msg, err := h.ws.Read(ctx)
		cancel()
		if err != nil {
			h.t.Fatalf("read: %v", err)
		}
		for _, line := range bytes.Split(msg, []byte("\n")) {
			if len(bytes.TrimSpace(line)) > 0 {
				h.pending = append(h.pending, line)
			}
		}
	}
	line := h.pending[0]
	h.pending = h.pending[1:]
	var f map[string]any
	if err := json.Unmarshal(line, &f); err != nil {
		h.t.Fatalf("frame %s: %v", line, err)
	}
	return f
}

// expect returns the next frame, which must be of type typ.
func (h *hermesClient) expect(typ string) map[string]any {
	h.t.Helper()
	f := h.next()
	if f["type"] != typ {
		h.t.Fatalf("got %v, want a %s frame", f, typ)
	}
	return f
}

// call sends an outbound action and returns its result.
func (h *hermesClient) call(id, platform, bot string, action map[string]any) map[string]any {
	h.t.Helper()
	h.send(map[string]any{"type": "outbound", "requestId": id, "action": action, "platform": platform, "botId": bot})
	f := h.expect("outbound_result")
	if f["requestId"] != id {
		h.t.Fatalf("result for %v, want %s", f["requestId"], id)
	}
	r, ok := f["result"].(map[string]any)
	if !ok {
		h.t.Fatalf("result is not an object: %v", f)
	}
	return r
}

// descriptorKeys are the nine keys the gateway requires (§2.3).
var descriptorKeys = []string{"contract_version", "platform", "label", "max_message_length", "supports_draft_streaming",
	"supports_edit", "supports_threads", "markdown_dialect", "len_unit"}

func stringsOf(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestHermesGatewayClient drives the connector the way the current Hermes
// gateway does (HERMES-RELAY.md §1–§2, §9), with raw JSON frames.
func TestHermesGatewayClient(t *testing.T) {
	t.Run("wire", hermesWire)
	t.Run("authors and edits", hermesAuthorsAndEdits)
	t.Run("bot messages when asked", hermesBotMessagesWhenAsked)
	t.Run("untagged ops and the relay descriptor", hermesUntaggedOps)
}

// inboundFrom checks an inbound frame: it names the identity that received
// the event (platform and botId, seed 004 Appendix A), and its source
// carries is_bot and message_is_edit, explicit booleans (HERMES-RELAY.md §9).
// It returns the event and its source.
func inboundFrom(t *testing.T, in map[string]any, platform, bot string) (ev, src map[string]any) {
	t.Helper()
	ev, _ = in["event"].(map[string]any)
	src, _ = ev["source"].(map[string]any)
	if in["platform"] != platform || in["botId"] != bot {
		t.Errorf("inbound frame names platform %v bot %v, want %s %s: %v", in["platform"], in["botId"], platform, bot, in)
	}
	for _, k := range []string{"is_bot", "message_is_edit"} {
		if _, ok := src[k].(bool); !ok {
			t.Errorf("source.%s is %v (%T), want a boolean: %v", k, src[k], src[k], src)
		}
	}
	return ev, src
}

func hermesWire(t *testing.T) {
	e := newEnv(t)
	e.discord.seen = make(chan string, 64)
	e.telegram.seen = make(chan string, 256)
	tgTopic := func(update, msg int, text string) string { return forumUpdate(update, msg, 42, text) }

	// While no gateway is connected, a Telegram message is buffered.
	if code := e.postTelegram(tgTopic(1, 70, "before the gateway"), tgSecret); code != http.StatusOK {
		t.Fatalf("webhook: %d", code)
	}

	// A token that aged out is refused after the upgrade with a 4401 close
	// frame (reason "expired"), a bad one with 4401 too — never HTTP 401.
	for _, tc := range []struct{ token, reason string }{
		{hermesToken("gw-a", secretA, time.Now().Add(-time.Minute).Unix()), "expired"},
		{hermesToken("gw-a", secretB, time.Now().Add(time.Minute).Unix()), "unauthorized"},
	} {
		h := dialHermes(t, e, tc.token)
		_, _, err := h.ws.Read(t.Context())
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != 4401 || ce.Reason != tc.reason {
			t.Errorf("refused upgrade: %v, want close 4401 %q", err, tc.reason)
		}
	}

	manifest := []any{
		map[string]any{"name": "new", "description": "Start a new session"},
		map[string]any{"name": "model", "description": "Switch model", "options": []any{map[string]any{"type": 3, "name": "name", "description": "Model", "required": false}}},
		map[string]any{"name": "Bad Name", "description": "dropped: not a Discord command name"},
	}
	hello := func(h *hermesClient) (map[string]map[string]any, string) {
		h.send(map[string]any{"type": "hello", "platform": "telegram", "botId": telegramBot})
		h.send(map[string]any{"type": "hello", "platform": "discord", "botId": discordApp, "command_manifest": manifest})
		descs := map[string]map[string]any{}
		var first string
		var buffered []map[string]any
		for len(descs) < 2 {
			f := h.next()
			switch f["type"] {
			case "descriptor":
				d, _ := f["descriptor"].(map[string]any)
				p, _ := d["platform"].(string)
				if first == "" {
					first = p
				}
				descs[p] = d
			case "inbound":
				buffered = append(buffered, f)
			default:
				t.Fatalf("during the handshake: %v", f)
			}
		}
		h.pending = append(encodeAll(t, buffered), h.pending...)
		return descs, first
	}

	h := dialHermes(t, e, hermesToken("gw-a", secretA, time.Now().Add(300*time.Second).Unix()))
	descs, first := hello(h)
	if first != "telegram" {
		t.Errorf("first descriptor is %s, want the first hello's (telegram)", first)
	}
	for p, d := range descs {
		for _, k := range descriptorKeys {
			if _, ok := d[k]; !ok {
				t.Errorf("%s descriptor lacks %s: %v", p, k, d)
			}
		}
		if len(stringsOf(d["supported_ops"])) == 0 {
			t.Errorf("%s descriptor advertises no ops", p)
		}
	}

	// The Discord manifest is reconciled: GET, then one bulk PUT of the
	// valid commands.
	waitCall(t, e.discord.seen, "PUT /applications/"+discordApp+"/commands")
	var put []map[string]any
	e.discord.mu.Lock()
	_ = json.Unmarshal(e.discord.commands, &put)
	e.discord.mu.Unlock()
	if len(put) != 2 || put[0]["name"] != "new" || put[1]["name"] != "model" {
		t.Errorf("commands put: %v", put)
	}

	// The buffered Telegram message is drained with a string bufferId and
	// scope_id; the acknowledgement removes it.
	in := h.expect("inbound")
	buf, ok := in["bufferId"].(string)
	ev, src := inboundFrom(t, in, "telegram", telegramBot)
	if !ok || buf == "" || src["scope_id"] != forumChat || src["chat_type"] != "forum" || src["thread_id"] != "42" || src["is_bot"] != false || src["message_is_edit"] != false {
		t.Fatalf("drained inbound: %v", in)
	}
	h.send(map[string]any{"type": "inbound_ack", "bufferId": buf})

	// A live Telegram webhook message: scope_id, and the key the gateway
	// computes (§3.2) is the key the connector routes by — an interrupt for
	// it comes back to its owner, this very socket.
	if code := e.postTelegram(tgTopic(2, 71, "live"), tgSecret); code != http.StatusOK {
		t.Fatalf("webhook: %d", code)
	}
	in = h.expect("inbound")
	if _, buffered := in["bufferId"]; buffered {
		t.Errorf("live event carries a bufferId: %v", in)
	}
	ev, src = inboundFrom(t, in, "telegram", telegramBot)
	if src["scope_id"] != forumChat || ev["message_id"] != "71" {
		t.Errorf("live inbound: %v", in)
	}
	key := "agent:main:telegram:forum:" + forumChat + ":42"
	h.send(map[string]any{"type": "interrupt", "session_key": key, "reason": nil})
	ii := h.expect("interrupt_inbound")
	if ii["session_key"] != key || ii["chat_id"] != forumChat {
		t.Errorf("interrupt_inbound %v", ii)
	}

	// A Discord interaction binds its channel and its token (never sent).
	if code, _ := e.postDiscord(interaction("1200000000000000100", "111", "333", "556", interactionToken, "hi"), nil); code != http.StatusOK {
		t.Fatalf("interaction: %d", code)
	}
	in = h.expect("inbound")
	_, src = inboundFrom(t, in, "discord", discordApp)
	if src["scope_id"] != "111" || src["guild_id"] != "111" {
		t.Errorf("discord inbound: %v", in)
	}

	// Outbound media goes the gateway's way (§2.12): the raw file is POSTed
	// to /relay/media with a fresh token, then send_media names
	// {base}/relay/media/{id}.
	chartPNG := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{3}, 200)...)
	upReq, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/relay/media", bytes.NewReader(chartPNG))
	upReq.Header.Set("Authorization", "Bearer "+hermesToken("gw-a", secretA, time.Now().Add(300*time.Second).Unix()))
	upReq.Header.Set("Content-Type", "image/png")
	upReq.Header.Set("X-Media-Filename", "chart.png")
	upResp, err := http.DefaultClient.Do(upReq)
	if err != nil {
		t.Fatal(err)
	}
	var uploaded struct {
		ID   string `json:"id"`
		Size int    `json:"size"`
	}
	if err := json.NewDecoder(upResp.Body).Decode(&uploaded); err != nil || upResp.StatusCode/100 != 2 || uploaded.Size != len(chartPNG) {
		t.Fatalf("media upload: %d %v %+v", upResp.StatusCode, err, uploaded)
	}
	upResp.Body.Close()

	// Every advertised op is answered, for the platform and bot the frame
	// names.
	n := 0
	threads := map[string]string{} // platform -> the thread thread_create made
	for platform, d := range descs {
		bot, chat := telegramBot, forumChat
		if platform == "discord" {
			bot, chat = discordApp, "333"
		}
		for _, op := range stringsOf(d["supported_ops"]) {
			n++
			id := fmt.Sprintf("%032x", n)
			meta := map[string]any{"thread_id": "42"}
			var action map[string]any
			switch op {
			case "send":
				action = map[string]any{"op": op, "chat_id": chat, "content": "hello", "reply_to": nil, "metadata": meta}
			case "edit":
				action = map[string]any{"op": op, "chat_id": chat, "message_id": "501", "content": "edited", "metadata": meta}
			case "typing":
				action = map[string]any{"op": op, "chat_id": chat, "metadata": meta}
			case "get_chat_info":
				action = map[string]any{"op": op, "chat_id": chat}
			case "react":
				action = map[string]any{"op": op, "chat_id": chat, "message_id": "71", "emoji": "👀", "remove": false, "metadata": meta}
			case "delete":
				action = map[string]any{"op": op, "chat_id": chat, "message_id": "501", "metadata": meta}
			case "draft":
				action = map[string]any{"op": op, "chat_id": chat, "draft_id": 7, "content": "thinking", "final": false, "metadata": meta}
			case "prompt":
				action = map[string]any{"op": op, "chat_id": chat, "content": "Run it?", "prompt_kind": "approval", "prompt_id": "a1b2c3.0000ffff",
					"options":  []any{map[string]any{"id": "once", "label": "Once", "style": "primary"}, map[string]any{"id": "deny", "label": "Deny", "style": "danger"}},
					"reply_to": nil, "metadata": meta}
			case "thread_create":
				action = map[string]any{"op": op, "chat_id": chat, "thread_name": "handoff: deploy", "metadata": meta}
			case "thread_rename":
				action = map[string]any{"op": op, "chat_id": chat, "message_id": threads[platform], "thread_name": "deploy done",
					"only_if_connector_created": true, "metadata": meta}
			case "send_media":
				action = map[string]any{"op": op, "chat_id": chat, "media_kind": "image", "source_url": e.srv.URL + "/relay/media/" + uploaded.ID,
					"content": "the chart", "reply_to": nil, "metadata": meta}
			case "follow_up":
				action = map[string]any{"op": op, "session_key": "agent:main:discord:group:333:556", "kind": "discord.interaction_token",
					"content": "done", "metadata": map[string]any{}}
			default:
				t.Errorf("%s advertises %q, which this test does not know", platform, op)
				continue
			}
			r := h.call(id, platform, bot, action)
			if r["success"] != true {
				t.Errorf("%s %s: %v", platform, op, r)
			}
			if op == "thread_create" {
				threads[platform], _ = r["thread_id"].(string)
				if threads[platform] == "" {
					t.Errorf("%s thread_create: no thread_id in %v", platform, r)
				}
			}
			if op == "thread_rename" {
				// A rename guarded by a name the thread no longer has is refused.
				action["only_if_connector_created"], action["only_if_current_name"] = false, "handoff: deploy"
				if again := h.call(id+"r", platform, bot, action); again["success"] != false {
					t.Errorf("%s guarded rename after the name changed: %v", platform, again)
				}
			}
			if op == "get_chat_info" {
				if ci, _ := r["chat_info"].(map[string]any); ci["name"] == "" || ci["type"] == "" {
					t.Errorf("%s get_chat_info: %v", platform, r)
				}
			}
			if op == "draft" {
				// The seal edits the same message and answers its id, twice.
				action["final"], action["content"] = true, "the answer"
				sealed := h.call(id+"s", platform, bot, action)
				again := h.call(id+"t", platform, bot, action)
				if sealed["success"] != true || sealed["message_id"] != r["message_id"] || again["message_id"] != r["message_id"] {
					t.Errorf("%s draft seal: %v then %v (draft %v)", platform, sealed, again, r)
				}
			}
		}
	}
	// The uploaded bytes reached both platforms as files.
	uploads := 0
	for _, c := range append(e.discord.Calls(), e.telegram.Calls()...) {
		if c.Body["_file_data"] != nil {
			uploads++
			if c.Body["_file_data"] != string(chartPNG) || c.Body["_file_name"] != "chart.png" || c.Body["_file_type"] != "image/png" {
				t.Errorf("send_media upload %s: %v %v %v", c.Path, c.Body["_file_field"], c.Body["_file_name"], c.Body["_file_type"])
			}
		}
	}
	if uploads != 2 {
		t.Errorf("send_media uploaded %d files, want one per platform", uploads)
	}
	for _, c := range e.discord.Calls() {
		if rows, ok := c.Body["components"].([]any); ok {
			row, _ := rows[0].(map[string]any)
			buttons, _ := row["components"].([]any)
			b, _ := buttons[0].(map[string]any)
			if len(buttons) != 2 || b["custom_id"] != "hp1:a1b2c3.0000ffff:once" || b["style"] != float64(1) {
				t.Errorf("prompt buttons: %v", rows)
			}
		}
	}
	// Telegram's prompt is an inline keyboard with the same tokens, and a
	// press (callback_query) comes back as prompt_response and is answered.
	var keyboard any
	for _, c := range e.telegram.Calls() {
		if m, ok := c.Body["reply_markup"].(map[string]any); ok {
			keyboard = m["inline_keyboard"]
		}
	}
	if rows, _ := keyboard.([]any); len(rows) != 1 {
		t.Errorf("telegram keyboard: %v", keyboard)
	} else if row, _ := rows[0].([]any); len(row) != 2 || row[0].(map[string]any)["callback_data"] != "hp1:a1b2c3.0000ffff:once" {
		t.Errorf("telegram keyboard: %v", keyboard)
	}
	cb := `{"update_id":50,"callback_query":{"id":"4382bfdwdsb323b2d9","from":{"id":9,"first_name":"Al"},"data":"hp1:a1b2c3.0000ffff:deny",
		"message":{"message_id":600,"message_thread_id":42,"is_topic_message":true,"chat":{"id":` + forumChat + `,"type":"supergroup","title":"Team","is_forum":true},"date":1700000000,"text":"Run it?"}}}`
	if code := e.postTelegram(cb, tgSecret); code != http.StatusOK {
		t.Fatalf("callback_query: %d", code)
	}
	in = h.expect("inbound")
	ev, _ = in["event"].(map[string]any)
	src, _ = ev["source"].(map[string]any)
	if pr, _ := ev["prompt_response"].(map[string]any); pr["option_id"] != "deny" || pr["prompt_message_id"] != "600" ||
		ev["text"] != "/deny" || src["thread_id"] != "42" || src["user_id"] != "9" {
		t.Errorf("telegram button press inbound: %v", in)
	}
	waitCall(t, e.telegram.seen, "POST /bot123:TGTOKEN/answerCallbackQuery")
	// A press of a Discord prompt button comes back as prompt_response.
	press := `{"id":"1200000000000000101","application_id":"` + discordApp + `","type":3,"token":"` + interactionToken + `","version":1,
		"guild_id":"111","channel_id":"333","member":{"user":{"id":"556","username":"u556"}},"message":{"id":"4242"},
		"data":{"custom_id":"hp1:a1b2c3.0000ffff:once","component_type":2}}`
	if code, _ := e.postDiscord(press, nil); code != http.StatusOK {
		t.Fatalf("button press: %d", code)
	}
	in = h.expect("inbound")
	ev, _ = in["event"].(map[string]any)
	if pr, _ := ev["prompt_response"].(map[string]any); pr["prompt_id"] != "a1b2c3.0000ffff" || pr["option_id"] != "once" || pr["prompt_message_id"] != "4242" {
		t.Errorf("button press inbound: %v", in)
	}
	if n < 21 {
		t.Errorf("only %d ops advertised across both descriptors", n)
	}
	// A chat the tenant was never in is a structured refusal.
	r := h.call("ffff", "telegram", telegramBot, map[string]any{"op": "send", "chat_id": "-100999", "content": "x", "reply_to": nil, "metadata": map[string]any{}})
	if r["success"] != false || r["code"] != "egress_declined" || !strings.Contains(r["error"].(string), "egress declined:") {
		t.Errorf("unbound chat: %v", r)
	}

	// going_idle is acknowledged; what arrives afterwards is buffered, and
	// drained in order after the next dial and hellos.
	h.send(map[string]any{"type": "going_idle"})
	h.expect("going_idle_ack")
	// Calls still in flight from the gateway are served while it idles.
	if r := h.call("dddd", "telegram", telegramBot, map[string]any{"op": "typing", "chat_id": forumChat, "metadata": map[string]any{}}); r["success"] != true {
		t.Errorf("outbound after going_idle_ack: %v", r)
	}
	for i, text := range []string{"while idle 1", "while idle 2"} {
		if code := e.postTelegram(tgTopic(10+i, 80+i, text), tgSecret); code != http.StatusOK {
			t.Fatalf("webhook: %d", code)
		}
	}
	pending, err := e.store.Pending(t.Context(), slot1, "telegram", telegramBot, e.clock.Now(), 10)
	if err != nil || len(pending) != 2 {
		t.Fatalf("buffered while idle: %d, %v", len(pending), err)
	}
	_ = h.ws.Close(websocket.StatusNormalClosure, "")

	h2 := dialHermes(t, e, hermesToken("gw-a", secretA, time.Now().Add(300*time.Second).Unix()))
	hello(h2)
	for _, want := range []string{"80", "81"} {
		in := h2.expect("inbound")
		buf, ok := in["bufferId"].(string)
		ev, _ := inboundFrom(t, in, "telegram", telegramBot)
		if !ok || buf == "" || ev["message_id"] != want {
			t.Fatalf("drain after re-dial: %v, want message %s", in, want)
		}
		h2.send(map[string]any{"type": "inbound_ack", "bufferId": buf})
	}
	// The same manifest again changes nothing on Discord (GET, no PUT).
	waitCall(t, e.discord.seen, "GET /applications/"+discordApp+"/commands")
	h2.call("eeee", "telegram", telegramBot, map[string]any{"op": "typing", "chat_id": forumChat, "metadata": map[string]any{}})
	puts := 0
	for _, c := range e.discord.Calls() {
		if c.Method == http.MethodPut && strings.HasSuffix(c.Path, "/commands") {
			puts++
		}
	}
	if puts != 1 {
		t.Errorf("%d command PUTs, want 1 (the second dial's manifest matched)", puts)
	}
	// Acknowledged means gone.
	if p, _ := e.store.Pending(t.Context(), slot1, "telegram", telegramBot, e.clock.Now().Add(time.Hour), 10); len(p) != 0 {
		t.Errorf("%d events still buffered after acks", len(p))
	}
}

// encodeAll re-encodes frames read early so next returns them again.
func encodeAll(t *testing.T, fs []map[string]any) [][]byte {
	var out [][]byte
	for _, f := range fs {
		b, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// waitCall waits until the fake API reports want.
func waitCall(t *testing.T, seen chan string, want string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case got := <-seen:
			if got == want {
				return
			}
		case <-deadline:
			t.Fatalf("no %s call", want)
		}
	}
}

// relay/gateway speaks the same wire: several identities, a descriptor
// each, the Discord manifest, the newer ops, going_idle and buffering.
func TestAdapterCurrentWire(t *testing.T) {
	e := newEnv(t)
	e.discord.seen = make(chan string, 64)
	manifest := json.RawMessage(`[{"name":"new","description":"Start a new session"}]`)
	events := make(chan gateway.Inbound, 10)
	a, err := gateway.New(gateway.Config{
		URL: e.srv.URL, GatewayID: "gw-a", Secret: secretA,
		Identities: []gateway.Identity{{Platform: "telegram", BotID: telegramBot}, {Platform: "discord", BotID: discordApp, CommandManifest: manifest}},
		OnEvent:    func(_ context.Context, in gateway.Inbound) error { events <- in; return nil },
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	if d, _ := a.Descriptor(); d.Platform != "telegram" {
		t.Errorf("default descriptor %s, want the first identity's", d.Platform)
	}
	waitCall(t, e.discord.seen, "PUT /applications/"+discordApp+"/commands")
	// The connector answers each hello with its descriptor; the discord
	// one may reach the adapter after the commands were registered.
	tick := time.NewTicker(5 * time.Millisecond)
	for deadline := time.Now().Add(5 * time.Second); len(a.Descriptors()) < 2 && time.Now().Before(deadline); {
		<-tick.C
	}
	tick.Stop()
	if ds := a.Descriptors(); len(ds) != 2 || !ds["discord"].Supports(relay.OpFollowUp) || ds["telegram"].Supports(relay.OpFollowUp) {
		t.Errorf("descriptors %+v", ds)
	}
	if r := a.Draft(t.Context(), forumChat, 1, "thinking", false); !r.Success {
		t.Errorf("draft: %+v", r)
	} else if s := a.Draft(t.Context(), forumChat, 1, "done", true); !s.Success || s.MessageID != r.MessageID {
		t.Errorf("seal: %+v, draft %+v", s, r)
	}
	if r := a.React(t.Context(), forumChat, "71", "👀", false); !r.Success {
		t.Errorf("react: %+v", r)
	}
	if r := a.CallAs(t.Context(), "discord", discordApp, relay.Action{Op: relay.OpDelete, ChatID: "999", MessageID: "1"}); r.Code != relay.CodeEgressDeclined {
		t.Errorf("delete in an unbound discord chat: %+v", r)
	}
	if err := a.GoIdle(t.Context()); err != nil {
		t.Fatalf("going_idle: %v", err)
	}
	if code := e.postTelegram(forumUpdate(1, 90, 42, "while idle"), tgSecret); code != http.StatusOK {
		t.Fatalf("webhook %d", code)
	}
	if p, _ := e.store.Pending(t.Context(), slot1, "telegram", telegramBot, e.clock.Now(), 10); len(p) != 1 {
		t.Fatalf("%d buffered while idle, want 1", len(p))
	}
	_ = a.Close()
	// A new adapter (a re-dial) gets the buffered event with its bufferId.
	b, err := gateway.New(gateway.Config{
		URL: e.srv.URL, GatewayID: "gw-a", Secret: secretA, Platform: "telegram", BotID: telegramBot,
		OnEvent: func(_ context.Context, in gateway.Inbound) error { events <- in; return nil },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Connect(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	select {
	case in := <-events:
		if in.BufferID == "" || in.Event.MessageID != "90" || in.SessionKey != "agent:main:telegram:forum:"+forumChat+":42" ||
			in.Platform != "telegram" || in.BotID != telegramBot {
			t.Errorf("drained %+v", in)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("buffered event not drained")
	}
}

// dispatch sends one raw Gateway dispatch of type typ with data d on c.
func (f *fakeDiscordGateway) dispatch(t *testing.T, c *gatewayConn, typ, d string) {
	t.Helper()
	b := fmt.Appendf(nil, `{"op":0,"s":%d,"t":%q,"d":%s}`, f.seq.Add(1), typ, d)
	if err := c.ws.Write(t.Context(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

// tgMessage is a Telegram update: kind is "message" or "edited_message".
func tgMessage(update, msg int, kind, chat, chatType string, from int, fromBot bool, text string) string {
	edit := ""
	if kind == "edited_message" {
		edit = `,"edit_date":1700000100`
	}
	return fmt.Sprintf(`{"update_id":%d,%q:{"message_id":%d,"from":{"id":%d,"is_bot":%v,"first_name":"F%d"},
		"chat":{"id":%s,"type":%q,"title":"Team"},"date":1700000000%s,"text":%q}}`, update, kind, msg, from, fromBot, from, chat, chatType, edit, text)
}

// helloAll says hello for each (platform, botId) and returns the
// descriptors by platform.
func helloAll(t *testing.T, h *hermesClient, ids ...[2]string) map[string]map[string]any {
	t.Helper()
	for _, id := range ids {
		h.send(map[string]any{"type": "hello", "platform": id[0], "botId": id[1]})
	}
	descs := map[string]map[string]any{}
	for len(descs) < len(ids) {
		d, _ := h.expect("descriptor")["descriptor"].(map[string]any)
		p, _ := d["platform"].(string)
		descs[p] = d
	}
	return descs
}

// hermesAuthorsAndEdits: every inbound source says whether its author is a
// bot and whether it is an edit (explicit false for a person's new
// message); a Slack DM is one_to_one_verified; edits arrive as
// message_is_edit true (Telegram edited_message, Slack message_changed,
// Discord MESSAGE_UPDATE); the connector's own messages and, by default,
// other bots' never arrive.
func hermesAuthorsAndEdits(t *testing.T) {
	dgw := newFakeDiscordGateway(t)
	e := newEnv(t, withSlack(fakeSlackAPI(t)), withDiscordGateway(dgw))
	h := dialHermes(t, e, hermesToken("gw-a", secretA, time.Now().Add(300*time.Second).Unix()))
	helloAll(t, h, [2]string{"telegram", telegramBot}, [2]string{"slack", slackApp}, [2]string{"discord", discordApp})
	now := e.clock.Now()

	// Telegram: another bot's message and the bot's own (id 123, the
	// token's first part) are not delivered; a person's message and its
	// edit are.
	for i, body := range []string{
		tgMessage(1, 10, "message", forumChat, "supergroup", 777, true, "I am another bot"),
		tgMessage(2, 11, "message", forumChat, "supergroup", 123, true, "I am this bot"),
		tgMessage(3, 12, "message", forumChat, "supergroup", 9, false, "a person"),
		tgMessage(4, 12, "edited_message", forumChat, "supergroup", 9, false, "a person, edited"),
	} {
		if code := e.postTelegram(body, tgSecret); code != http.StatusOK {
			t.Fatalf("telegram update %d: %d", i, code)
		}
	}
	for _, want := range []struct {
		text string
		edit bool
	}{{"a person", false}, {"a person, edited", true}} {
		ev, src := inboundFrom(t, h.expect("inbound"), "telegram", telegramBot)
		if ev["text"] != want.text || src["is_bot"] != false || src["message_is_edit"] != want.edit || src["user_id"] != "9" {
			t.Errorf("telegram inbound %v, want %q with message_is_edit %v", ev, want.text, want.edit)
		}
		if _, ok := src["one_to_one_verified"]; ok {
			t.Errorf("a telegram group says one_to_one_verified: %v", src)
		}
	}

	// Slack: the app's own message (app_id = api_app_id), another app's bot
	// and an unfurl (message_changed without an edit) are not delivered; a
	// DM is one_to_one_verified, a channel is not; an edit is the edited
	// message with message_is_edit true.
	own := fmt.Sprintf(`{"token":"x","team_id":"T1","api_app_id":%q,"type":"event_callback","event_id":"Ev1","event_time":1700000000,
		"event":{"type":"message","channel":"C1","channel_type":"channel","user":"UBOT","bot_id":"B1","app_id":%q,"text":"my own reply","ts":"1700000001.000100"}}`, slackApp, slackApp)
	otherBot := fmt.Sprintf(`{"token":"x","team_id":"T1","api_app_id":%q,"type":"event_callback","event_id":"Ev2","event_time":1700000000,
		"event":{"type":"message","subtype":"bot_message","channel":"C1","channel_type":"channel","bot_id":"B2","app_id":"A0OTHER","text":"beep","ts":"1700000001.000200"}}`, slackApp)
	unfurl := fmt.Sprintf(`{"token":"x","team_id":"T1","api_app_id":%q,"type":"event_callback","event_id":"Ev3","event_time":1700000000,
		"event":{"type":"message","subtype":"message_changed","channel":"C1","channel_type":"channel","ts":"1700000001.000400","hidden":true,
		"message":{"type":"message","user":"U1","text":"see https://example.com","ts":"1700000001.000300","attachments":[{"title":"Example"}]}}}`, slackApp)
	edit := fmt.Sprintf(`{"token":"x","team_id":"T1","api_app_id":%q,"type":"event_callback","event_id":"Ev4","event_time":1700000000,
		"event":{"type":"message","subtype":"message_changed","channel":"D1","channel_type":"im","ts":"1700000001.000600","hidden":true,
		"message":{"type":"message","user":"U1","text":"deploy staging, not prod","ts":"1700000001.000500","edited":{"user":"U1","ts":"1700000001.000600"}},
		"previous_message":{"type":"message","user":"U1","text":"deploy prod","ts":"1700000001.000500"}}}`, slackApp)
	for i, body := range []string{own, otherBot, unfurl,
		slackMessage("T1", "D1", "im", "U1", "1700000001.000500", "", "deploy prod"), edit,
		slackMessage("T1", "C1", "channel", "U1", "1700000001.000700", "", "in the channel")} {
		if code, out := e.postSlack(body, now, slackSecret); code != http.StatusOK {
			t.Fatalf("slack event %d: %d %s", i, code, out)
		}
	}
	for _, want := range []struct {
		text, chat, id string
		edit, dm       bool
	}{{"deploy prod", "D1", "1700000001.000500", false, true}, {"deploy staging, not prod", "D1", "1700000001.000500", true, true},
		{"in the channel", "C1", "1700000001.000700", false, false}} {
		ev, src := inboundFrom(t, h.expect("inbound"), "slack", slackApp)
		v, has := src["one_to_one_verified"]
		if ev["text"] != want.text || src["chat_id"] != want.chat || src["is_bot"] != false || src["message_is_edit"] != want.edit ||
			has != want.dm || (want.dm && v != true) || ev["message_id"] != want.id {
			t.Errorf("slack inbound %v, want %q in %s, message_is_edit %v, one_to_one_verified %v", ev, want.text, want.chat, want.edit, want.dm)
		}
	}

	// Discord: the bot's own message (999, from READY), another bot's, a
	// webhook's and an embed-only MESSAGE_UPDATE are not delivered; a
	// person's message and its edit (MESSAGE_UPDATE with edited_timestamp)
	// are.
	c := dgw.next(t)
	dgw.message(t, c, "111", "333", "999", "m-own", "my own reply", true)
	dgw.message(t, c, "111", "333", "888", "m-bot", "another bot", true)
	dgw.dispatch(t, c, "MESSAGE_CREATE", `{"id":"m-hook","channel_id":"333","guild_id":"111","webhook_id":"w1","author":{"id":"w1","username":"hook","bot":true},"content":"ci passed","mentions":[],"attachments":[]}`)
	dgw.message(t, c, "111", "333", "777", "m-1", "hello there", false)
	dgw.dispatch(t, c, "MESSAGE_UPDATE", `{"id":"m-1","channel_id":"333","guild_id":"111","embeds":[{"title":"x"}]}`)
	dgw.dispatch(t, c, "MESSAGE_UPDATE", `{"id":"m-1","channel_id":"333","guild_id":"111","author":{"id":"777","username":"u777"},"member":{"nick":"Nick777"},
		"content":"hello there, edited","mentions":[],"attachments":[],"edited_timestamp":"2026-12-01T10:00:00.000000+00:00"}`)
	for _, want := range []struct {
		text string
		edit bool
	}{{"hello there", false}, {"hello there, edited", true}} {
		ev, src := inboundFrom(t, h.expect("inbound"), "discord", discordApp)
		if ev["text"] != want.text || src["is_bot"] != false || src["message_is_edit"] != want.edit || ev["message_id"] != "m-1" {
			t.Errorf("discord inbound %v, want %q with message_is_edit %v", ev, want.text, want.edit)
		}
	}
}

// hermesBotMessagesWhenAsked: with bot_messages on, other bots' messages
// arrive marked is_bot true; the connector's own still never do.
func hermesBotMessagesWhenAsked(t *testing.T) {
	dgw := newFakeDiscordGateway(t)
	e := newEnv(t, withSlack(fakeSlackAPI(t)), withDiscordGateway(dgw), func(c *connector.Config) { c.BotMessages = true })
	h := dialHermes(t, e, hermesToken("gw-a", secretA, time.Now().Add(300*time.Second).Unix()))
	helloAll(t, h, [2]string{"telegram", telegramBot}, [2]string{"slack", slackApp}, [2]string{"discord", discordApp})

	for _, body := range []string{
		tgMessage(1, 10, "message", forumChat, "supergroup", 123, true, "I am this bot"),
		tgMessage(2, 11, "message", forumChat, "supergroup", 777, true, "I am another bot"),
	} {
		if code := e.postTelegram(body, tgSecret); code != http.StatusOK {
			t.Fatalf("telegram: %d", code)
		}
	}
	ev, src := inboundFrom(t, h.expect("inbound"), "telegram", telegramBot)
	if ev["text"] != "I am another bot" || src["is_bot"] != true || src["user_id"] != "777" {
		t.Errorf("telegram bot inbound: %v", ev)
	}

	own := fmt.Sprintf(`{"token":"x","team_id":"T1","api_app_id":%q,"type":"event_callback","event_id":"Ev1","event_time":1700000000,
		"event":{"type":"message","channel":"C1","channel_type":"channel","user":"UBOT","bot_id":"B1","app_id":%q,"text":"my own reply","ts":"1700000001.000100"}}`, slackApp, slackApp)
	otherBot := fmt.Sprintf(`{"token":"x","team_id":"T1","api_app_id":%q,"type":"event_callback","event_id":"Ev2","event_time":1700000000,
		"event":{"type":"message","subtype":"bot_message","channel":"C1","channel_type":"channel","bot_id":"B2","app_id":"A0OTHER","text":"beep","ts":"1700000001.000200"}}`, slackApp)
	for _, body := range []string{own, otherBot} {
		if code, out := e.postSlack(body, e.clock.Now(), slackSecret); code != http.StatusOK {
			t.Fatalf("slack: %d %s", code, out)
		}
	}
	ev, src = inboundFrom(t, h.expect("inbound"), "slack", slackApp)
	if ev["text"] != "beep" || src["is_bot"] != true || src["user_id"] != "B2" {
		t.Errorf("slack bot inbound: %v", ev)
	}

	c := dgw.next(t)
	dgw.message(t, c, "111", "333", "999", "m-own", "my own reply", true)
	dgw.message(t, c, "111", "333", "888", "m-bot", "another bot", true)
	ev, src = inboundFrom(t, h.expect("inbound"), "discord", discordApp)
	if ev["text"] != "another bot" || src["is_bot"] != true || src["user_id"] != "888" {
		t.Errorf("discord bot inbound: %v", ev)
	}
}

// hermesUntaggedOps: on a socket whose first hello was Telegram, an op
// without platform for a Discord chat is resolved from the connector's own
// routing, not refused egress_declined; a "relay" hello (every bot on one
// identity) gets a descriptor whose supports_threads agrees with its thread
// ops, and each inbound event on it names the bot that received it.
func hermesUntaggedOps(t *testing.T) {
	e := newEnv(t)
	e.discord.seen = make(chan string, 64)
	h := dialHermes(t, e, hermesToken("gw-a", secretA, time.Now().Add(300*time.Second).Unix()))
	helloAll(t, h, [2]string{"telegram", telegramBot}, [2]string{"discord", discordApp})

	if code, _ := e.postDiscord(interaction("1200000000000000200", "111", "333", "556", interactionToken, "hi"), nil); code != http.StatusOK {
		t.Fatalf("interaction: %d", code)
	}
	inboundFrom(t, h.expect("inbound"), "discord", discordApp)
	h.send(map[string]any{"type": "outbound", "requestId": strings.Repeat("a", 32), "action": map[string]any{"op": "get_chat_info", "chat_id": "333"}})
	r, _ := h.expect("outbound_result")["result"].(map[string]any)
	if ci, _ := r["chat_info"].(map[string]any); r["success"] != true || ci["name"] != "general" {
		t.Errorf("untagged get_chat_info for a Discord chat: %v", r)
	}
	h.send(map[string]any{"type": "outbound", "requestId": strings.Repeat("b", 32), "action": map[string]any{"op": "send", "chat_id": "333", "content": "on discord", "reply_to": nil, "metadata": map[string]any{}}})
	if r, _ := h.expect("outbound_result")["result"].(map[string]any); r["success"] != true {
		t.Errorf("untagged send to a Discord chat: %v", r)
	}
	waitCall(t, e.discord.seen, "POST /channels/333/messages")
	// A chat the tenant has on no platform of the socket is still refused.
	h.send(map[string]any{"type": "outbound", "requestId": strings.Repeat("c", 32), "action": map[string]any{"op": "send", "chat_id": "-100999", "content": "x", "reply_to": nil, "metadata": map[string]any{}}})
	if r, _ := h.expect("outbound_result")["result"].(map[string]any); r["success"] != false || r["code"] != "egress_declined" {
		t.Errorf("untagged send to an unbound chat: %v", r)
	}

	// One "relay" identity for every bot (a connector of its own, so no
	// other socket of the tenant competes for the events).
	e = newEnv(t)
	r2 := dialHermes(t, e, hermesToken("gw-a", secretA, time.Now().Add(300*time.Second).Unix()))
	d := helloAll(t, r2, [2]string{"relay", ""})["relay"]
	ops := stringsOf(d["supported_ops"])
	if d == nil || (slices.Contains(ops, "thread_create") || slices.Contains(ops, "thread_rename")) && d["supports_threads"] != true {
		t.Errorf("relay descriptor says supports_threads %v with ops %v", d["supports_threads"], ops)
	}
	if code := e.postTelegram(forumUpdate(30, 90, 42, "to the relay identity"), tgSecret); code != http.StatusOK {
		t.Fatalf("webhook: %d", code)
	}
	inboundFrom(t, r2.expect("inbound"), "telegram", telegramBot)
	if code, _ := e.postDiscord(interaction("1200000000000000201", "111", "333", "556", interactionToken, "again"), nil); code != http.StatusOK {
		t.Fatalf("interaction: %d", code)
	}
	inboundFrom(t, r2.expect("inbound"), "discord", discordApp)
}
