package connector_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/gateway"
)

const interactionToken = "aW50ZXJhY3Rpb246MTIzNDU2Nzg5MDpTRUNSRVQ-TOKEN"

// A signed Discord interaction reaches the adapter as a MessageEvent with
// the gateway's session key; the token stays in the vault.
func TestDiscordInteractionReachesAdapter(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "discord", discordApp)
	d, ok := g.Descriptor()
	if !ok || d.Platform != "discord" || d.MaxMessageLength != 2000 || d.LenUnit != relay.LenChars || d.ContractVersion != 1 {
		t.Fatalf("descriptor %+v", d)
	}
	status, body := e.postDiscord(interaction("1200000000000000001", "111", "333", "555", interactionToken, "what is up"), nil)
	if status != 200 || body != `{"type":5}` {
		t.Fatalf("webhook answered %d %s", status, body)
	}
	in := g.next(t)
	if in.SessionKey != "agent:main:discord:group:333:555" {
		t.Errorf("session key %q", in.SessionKey)
	}
	ev := in.Event
	if ev.Text != "/ask what is up" || ev.MessageType != relay.MessageCommand || ev.Source.GuildID != "111" || ev.Source.ChatID != "333" ||
		ev.Source.ChatType != "group" || ev.Source.UserID != "555" || ev.MessageID != "1200000000000000001" || in.BufferID != "" {
		t.Errorf("event %+v", in)
	}
	b, _ := json.Marshal(ev)
	if strings.Contains(string(b), interactionToken) {
		t.Error("the event carries the interaction token")
	}
	if strings.Contains(e.auditBodies(slot1), interactionToken) {
		t.Error("an audit record carries the interaction token")
	}
	if got := e.auditActions(slot1)["relay.deliver/allow"]; got != 1 {
		t.Errorf("deliver records: %v", e.auditActions(slot1))
	}
	if strings.Contains(e.logs.String(), interactionToken) {
		t.Error("a log line carries the interaction token")
	}
	// A PING is answered and delivers nothing.
	if status, body := e.postDiscord(`{"id":"p","application_id":"`+discordApp+`","type":1}`, nil); status != 200 || body != `{"type":1}` {
		t.Errorf("PING answered %d %s", status, body)
	}
	// A retried delivery of the same interaction is dropped.
	e.postDiscord(interaction("1200000000000000001", "111", "333", "555", interactionToken, "what is up"), nil)
	g.none(t, "duplicate interaction")
}

// The adapter's long reply reaches the fake Discord API split to 2000
// characters, numbered, in order.
func TestReplySplitToDiscord(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "discord", discordApp)
	e.postDiscord(interaction("1200000000000000002", "111", "333", "555", interactionToken, "essay please"), nil)
	g.next(t)
	var reply strings.Builder
	for i := range 450 {
		fmt.Fprintf(&reply, "word%04d ", i) // 4500 characters
	}
	res := g.Send(t.Context(), "333", reply.String(), "1200000000000000002", nil)
	if !res.Success || res.MessageID == "" {
		t.Fatalf("Send = %+v", res)
	}
	calls := e.discord.Calls()
	if len(calls) != 3 {
		t.Fatalf("%d Discord calls, want 3", len(calls))
	}
	var joined []string
	for i, c := range calls {
		content, _ := c.Body["content"].(string)
		if c.Method != "POST" || c.Path != "/channels/333/messages" || c.Auth != "Bot discord-bot-token" {
			t.Errorf("call %d: %s %s %q", i, c.Method, c.Path, c.Auth)
		}
		if n := len([]rune(content)); n > 2000 {
			t.Errorf("chunk %d is %d characters", i+1, n)
		}
		suffix := fmt.Sprintf(" (%d/3)", i+1)
		if !strings.HasSuffix(content, suffix) {
			t.Errorf("chunk %d ends %q", i+1, content[len(content)-8:])
		}
		joined = append(joined, strings.TrimSuffix(content, suffix))
		_, replied := c.Body["message_reference"]
		if replied != (i == 0) {
			t.Errorf("chunk %d reply reference: %v", i+1, replied)
		}
	}
	if got := strings.Join(joined, " "); strings.TrimSpace(got) != strings.TrimSpace(reply.String()) {
		t.Error("the chunks do not add up to the reply")
	}
	if res.MessageID != "903" {
		t.Errorf("message id %q, want the last chunk's", res.MessageID)
	}
	// A chat the tenant has never been in is refused without a platform call.
	res = g.Send(t.Context(), "999", "hello", "", nil)
	if res.Success || res.Code != relay.CodeEgressDeclined || !strings.Contains(res.Error, "egress declined:") {
		t.Errorf("Send to an unbound chat = %+v", res)
	}
	if len(e.discord.Calls()) != 3 {
		t.Error("an unbound send reached Discord")
	}
	// typing, edit and get_chat_info reach the API too.
	if r := g.Typing(t.Context(), "333", nil); !r.Success {
		t.Errorf("Typing = %+v", r)
	}
	if r := g.Edit(t.Context(), "333", "901", "fixed", nil); !r.Success {
		t.Errorf("Edit = %+v", r)
	}
	if r := g.GetChatInfo(t.Context(), "333"); !r.Success || r.Name != "general" || r.Type != "group" {
		t.Errorf("GetChatInfo = %+v", r)
	}
	if got := e.auditActions(slot1)["relay.outbound/allow"]; got != 4 {
		t.Errorf("outbound records %v", e.auditActions(slot1))
	}
	if e.auditActions(slot1)["relay.outbound/deny"] != 1 {
		t.Errorf("refused send not recorded: %v", e.auditActions(slot1))
	}
}

// follow_up works for the tenant whose interaction it was and fails for
// another tenant and after the token's 15 minutes.
func TestFollowUpTenants(t *testing.T) {
	e := newEnv(t)
	a := e.gateway("gw-a", secretA, "discord", discordApp)
	b := e.gateway("gw-b", secretB, "discord", discordApp)
	e.postDiscord(interaction("1200000000000000003", "111", "333", "555", interactionToken, "later"), nil)
	in := a.next(t)
	key := in.SessionKey

	res := b.FollowUp(t.Context(), key, relay.KindDiscordInteractionToken, "tenant B tries", nil)
	if res.Success {
		t.Fatalf("tenant B's follow_up succeeded: %+v", res)
	}
	if n := len(e.discord.Calls()); n != 0 {
		t.Fatalf("tenant B's follow_up reached Discord (%d calls)", n)
	}
	res = a.FollowUp(t.Context(), key, relay.KindDiscordInteractionToken, "here you go", nil)
	if !res.Success {
		t.Fatalf("tenant A's follow_up = %+v", res)
	}
	calls := e.discord.Calls()
	if len(calls) != 1 || calls[0].Path != "/webhooks/"+discordApp+"/"+interactionToken+"?wait=true" || calls[0].Body["content"] != "here you go" || calls[0].Auth != "" {
		t.Fatalf("follow-up call %+v", calls)
	}
	if r := a.FollowUp(t.Context(), "agent:main:discord:group:333:556", relay.KindDiscordInteractionToken, "x", nil); r.Success {
		t.Error("follow_up for a session without a capability succeeded")
	}
	e.clock.Advance(15*time.Minute + time.Second)
	if r := a.FollowUp(t.Context(), key, relay.KindDiscordInteractionToken, "too late", nil); r.Success {
		t.Error("follow_up after 15 minutes succeeded")
	}
	if len(e.discord.Calls()) != 1 {
		t.Error("a refused follow_up reached Discord")
	}
	for _, tenant := range []string{"slot-1", "slot-2"} {
		if strings.Contains(e.auditBodies(contractSlot(tenant)), interactionToken) {
			t.Errorf("%s audit carries the token", tenant)
		}
	}
	if logs := e.logs.String(); logs == "" || strings.Contains(logs, interactionToken) {
		t.Errorf("logs empty or carrying the token:\n%s", logs)
	}
	if e.auditActions(slot2)["relay.outbound/deny"] != 1 {
		t.Errorf("tenant B's refusal not recorded: %v", e.auditActions(slot2))
	}
}

// A Telegram forum message reaches the adapter with the forum key; a reply
// with emoji is split by UTF-16 units for the Bot API.
func TestTelegramForumEmojiSplit(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	if d, _ := g.Descriptor(); d.LenUnit != relay.LenUTF16 || d.MaxMessageLength != 4096 || d.MarkdownDialect != "markdown_v2" {
		t.Fatalf("descriptor %+v", d)
	}
	if s := e.postTelegram(forumUpdate(1, 77, 42, "hi 👋"), tgSecret); s != 200 {
		t.Fatalf("webhook %d", s)
	}
	in := g.next(t)
	if in.SessionKey != "agent:main:telegram:forum:-1001234567890:42" || in.Event.Text != "hi 👋" || in.Event.Source.ThreadID != "42" {
		t.Fatalf("inbound %+v", in)
	}
	// 3000 emoji: 3000 code points (would fit a chars budget of 4096) but
	// 6000 UTF-16 units, so two messages.
	reply := strings.Repeat("😀", 3000)
	res := g.Send(t.Context(), forumChat, reply, "77", map[string]any{"thread_id": in.Event.Source.ThreadID})
	if !res.Success {
		t.Fatalf("Send = %+v", res)
	}
	calls := e.telegram.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d Bot API calls, want 2", len(calls))
	}
	total := 0
	for i, c := range calls {
		text, _ := c.Body["text"].(string)
		units := relay.Len(text, relay.LenUTF16)
		if c.Path != "/bot123:TGTOKEN/sendMessage" || units > 4096 || c.Body["message_thread_id"] != float64(42) || c.Body["chat_id"] != forumChat {
			t.Errorf("call %d: %s units=%d body=%v", i, c.Path, units, c.Body["message_thread_id"])
		}
		if c.Body["parse_mode"] != "MarkdownV2" {
			t.Errorf("parse_mode %v", c.Body["parse_mode"])
		}
		total += strings.Count(text, "😀")
	}
	if total != 3000 {
		t.Errorf("%d emoji sent, want 3000", total)
	}
	if r := g.Typing(t.Context(), forumChat, map[string]any{"thread_id": "42"}); !r.Success {
		t.Errorf("Typing = %+v", r)
	}
	if r := g.GetChatInfo(t.Context(), forumChat); !r.Success || r.Type != "forum" || r.Name != "Team" {
		t.Errorf("GetChatInfo = %+v", r)
	}
	// A chat configured for another tenant is refused.
	if r := g.Send(t.Context(), "5", "hi", "", nil); r.Success {
		t.Error("sent into tenant B's chat")
	}
}

// An interrupt from an adapter reaches the connection that owns the
// session, not the other connections of the tenant, and never another
// tenant's.
func TestInterruptRouting(t *testing.T) {
	e := newEnv(t)
	a1 := e.gateway("gw-a", secretA, "discord", discordApp)
	a2 := e.gateway("gw-a2", secretA2, "discord", discordApp)
	b := e.gateway("gw-b", secretB, "discord", discordApp)
	e.postDiscord(interaction("1200000000000000004", "111", "333", "555", interactionToken, "long task"), nil)
	var owner, other *gw
	select {
	case in := <-a1.events:
		owner, other = a1, a2
		_ = in
	case in := <-a2.events:
		owner, other = a2, a1
		_ = in
	case <-time.After(5 * time.Second):
		t.Fatal("event not delivered")
	}
	key := "agent:main:discord:group:333:555"
	// Later events of the session go to the same connection.
	e.postDiscord(interaction("1200000000000000005", "111", "333", "555", "tok-2", "more"), nil)
	if in := owner.next(t); in.SessionKey != key {
		t.Fatalf("second event key %q", in.SessionKey)
	}
	other.none(t, "second event of an owned session")

	// The non-owner asks for the stop; the owner gets it.
	if err := other.Interrupt(t.Context(), key, "user pressed stop"); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-owner.interrupts:
		if got != [2]string{key, "333"} {
			t.Errorf("interrupt %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("owner got no interrupt")
	}
	// Tenant B cannot interrupt tenant A's session: the connector records
	// it as not found, and so delivers it to no one.
	if err := b.Interrupt(t.Context(), key, ""); err != nil {
		t.Fatal(err)
	}
	e.await(t, "tenant B's interrupt recorded", func() bool { return e.auditActions(slot2)["relay.interrupt/not_found"] == 1 })
	for _, g := range []*gw{a1, a2, b} {
		select {
		case got := <-g.interrupts:
			t.Errorf("stray interrupt %v", got)
		default:
		}
	}
	// A platform-side /stop command interrupts the owner as well.
	e.postDiscord(strings.Replace(interaction("1200000000000000006", "111", "333", "555", "tok-3", ""), `"name":"ask"`, `"name":"stop"`, 1), nil)
	select {
	case got := <-owner.interrupts:
		if got[0] != key {
			t.Errorf("interrupt %v", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("platform /stop did not interrupt the owner")
	}
	if e.auditActions(slot2)["relay.interrupt/not_found"] != 1 {
		t.Errorf("tenant B's interrupt not recorded as not_found: %v", e.auditActions(slot2))
	}
}

// Events posted while no gateway is connected arrive once it connects, once
// each, with a bufferId, and leave the buffer only when acknowledged.
func TestBufferedUntilConnected(t *testing.T) {
	e := newEnv(t)
	for i := 1; i <= 3; i++ {
		if s := e.postTelegram(forumUpdate(i, 100+i, 42, fmt.Sprintf("message %d", i)), tgSecret); s != 200 {
			t.Fatalf("webhook %d", s)
		}
	}
	e.postTelegram(forumUpdate(2, 102, 42, "message 2"), tgSecret) // Telegram retries an update
	if got := e.auditActions(slot1)["relay.buffer/allow"]; got != 3 {
		t.Fatalf("buffer records %v", e.auditActions(slot1))
	}
	// A gateway whose handler fails receives them but does not acknowledge.
	g1 := e.gateway("gw-a", secretA, "telegram", telegramBot, func(g *gw) { g.fail.Store(true) })
	for i := range 3 {
		select {
		case <-g1.refused:
		case <-time.After(5 * time.Second):
			t.Fatalf("the first gateway saw %d of 3 buffered events", i)
		}
	}
	_ = g1.Close()

	g := e.gateway("gw-a", secretA, "telegram", telegramBot)
	seen := map[string]int{}
	for range 3 {
		in := g.next(t)
		if in.BufferID == "" {
			t.Errorf("buffered event without bufferId: %+v", in)
		}
		seen[in.Event.Text]++
	}
	for i := 1; i <= 3; i++ {
		if seen[fmt.Sprintf("message %d", i)] != 1 {
			t.Errorf("message %d arrived %d times", i, seen[fmt.Sprintf("message %d", i)])
		}
	}
	g.none(t, "after the backlog")
	// Acknowledged: nothing is left, and the next connection gets nothing.
	e.await(t, "the backlog acknowledged", func() bool {
		p, _ := e.store.Pending(t.Context(), slot1, "telegram", telegramBot, e.clock.Now().Add(time.Hour), 0)
		return len(p) == 0
	})
	_ = g.Close()
	g3 := e.gateway("gw-a2", secretA2, "telegram", telegramBot)
	g3.none(t, "a later connection")
}

// Forged signatures, wrong secret tokens, bad HMAC tokens and malformed
// frames are refused, and nothing is delivered.
func TestRefusals(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "discord", discordApp)
	tg := e.gateway("gw-a", secretA, "telegram", telegramBot)
	body := interaction("1200000000000000007", "111", "333", "555", interactionToken, "forged")
	for name, tamper := range map[string]func(ts, sig string, b []byte) (string, string, []byte){
		"body changed": func(ts, sig string, b []byte) (string, string, []byte) {
			return ts, sig, []byte(strings.Replace(string(b), "forged", "f0rged", 1))
		},
		"timestamp":      func(ts, sig string, b []byte) (string, string, []byte) { return ts + "1", sig, b },
		"no signature":   func(ts, sig string, b []byte) (string, string, []byte) { return ts, "", b },
		"garbage sig":    func(ts, sig string, b []byte) (string, string, []byte) { return ts, strings.Repeat("ab", 64), b },
		"signature hex+": func(ts, sig string, b []byte) (string, string, []byte) { return ts, sig + "00", b },
		"replayed an hour later": func(ts, sig string, b []byte) (string, string, []byte) {
			old := fmt.Sprint(e.clock.Now().Add(-time.Hour).Unix())
			return old, hex.EncodeToString(ed25519.Sign(e.priv, append([]byte(old), b...))), b
		},
	} {
		if status, _ := e.postDiscord(body, tamper); status != 401 {
			t.Errorf("%s: status %d, want 401", name, status)
		}
	}
	for _, secret := range []string{"", "wrong-secret", tgSecret + "x"} {
		if s := e.postTelegram(forumUpdate(50, 500, 42, "forged"), secret); s != 401 {
			t.Errorf("telegram secret %q: status %d", secret, s)
		}
	}
	g.none(t, "forged Discord interactions")
	tg.none(t, "forged Telegram updates")
	if got := fmt.Sprint(e.auditActions(slot1)); got != "map[relay.connect/allow:2]" {
		t.Errorf("audit after forged events: %s, want only the two connections", got)
	}
	if p, _ := e.store.Pending(t.Context(), slot1, "discord", discordApp, e.clock.Now(), 0); len(p) != 0 {
		t.Error("a forged event was buffered")
	}
	// Unknown webhook paths.
	req, _ := e.postDiscordTo("/hooks/discord/999", body)
	if req != 404 {
		t.Errorf("unknown app: %d", req)
	}

	// Bad HMAC tokens: close code 4401.
	for name, tc := range map[string]struct {
		id     string
		secret []byte
		ttl    time.Duration
		reason string
	}{
		"wrong secret":  {"gw-a", secretB, time.Minute, "unauthorized"},
		"unknown id":    {"gw-z", secretA, time.Minute, "unauthorized"},
		"other gateway": {"gw-b", secretA, time.Minute, "unauthorized"},
	} {
		token := relay.MintToken(tc.secret, tc.id, tc.ttl)
		code, reason := dialRaw(t, e, token)
		if code != relay.CloseUnauthorized || reason != tc.reason {
			t.Errorf("%s: close %d %q", name, code, reason)
		}
	}
	code, reason := dialRaw(t, e, relay.MintTokenExp(secretA, "gw-a", e.clock.Now().Add(-time.Minute).Unix()))
	if code != relay.CloseUnauthorized || reason != "expired" {
		t.Errorf("expired: close %d %q", code, reason)
	}
	code, _ = dialRaw(t, e, "")
	if code != relay.CloseUnauthorized {
		t.Errorf("no token: close %d", code)
	}
	// The adapter reports a refused token as terminal.
	bad, _ := gateway.New(gateway.Config{URL: e.srv.URL, GatewayID: "gw-a", Secret: secretB, Platform: "discord", BotID: discordApp})
	if err := bad.Connect(t.Context()); !errors.Is(err, gateway.ErrUnauthorized) {
		t.Errorf("Connect with a bad secret: %v", err)
	}
	if err := bad.Run(t.Context()); !errors.Is(err, gateway.ErrUnauthorized) {
		t.Errorf("Run with a bad secret: %v", err)
	}
	if e.auditActions(slot1)["relay.connect/deny"] < 2 {
		t.Errorf("refused connections not recorded: %v", e.auditActions(slot1))
	}

}

// Malformed frames are skipped and unknown types ignored; the connection
// keeps working, and no frame carries capability material.
func TestMalformedFrames(t *testing.T) {
	e := newEnv(t)
	ws := rawConn(t, e, relay.MintToken(secretA, "gw-a", time.Minute))
	write(t, ws, "{not json}\n\n"+`{"type":"from_the_future","x":1}`+"\n"+`{"type":"outbound","requestId":"r0"}`+"\n"+`{"type":"hel`)
	write(t, ws, `lo","platform":"discord","botId":"`+discordApp+`"}`+"\n")
	f := readFrame(t, ws)
	if f.Type != relay.FrameDescriptor || f.Descriptor.Platform != "discord" {
		t.Fatalf("after malformed frames: %+v", f)
	}
	write(t, ws, `{"type":"outbound","requestId":"r1","action":{"op":"teleport","chat_id":"333"}}`+"\n")
	f = readFrame(t, ws)
	if f.Type != relay.FrameOutboundResult || f.RequestID != "r1" || f.Result.Success || !strings.Contains(f.Result.Error, "unsupported op") {
		t.Fatalf("unsupported op answered %+v", f)
	}
	// An event delivered on the raw socket carries no capability material.
	e.postDiscord(interaction("1200000000000000008", "111", "334", "556", interactionToken, "raw"), nil)
	raw := readRaw(t, ws)
	if !strings.Contains(string(raw), `"type":"inbound"`) || strings.Contains(string(raw), interactionToken) {
		t.Fatalf("raw inbound frame: %s", raw)
	}
	if err := relaySchemaCheck(raw); err != nil {
		t.Errorf("inbound frame against relay.frame.schema.json: %v", err)
	}
	// Hello for an unknown bot is ignored (no descriptor); the connection
	// and its other identities stay, and outbound for that bot is refused.
	write(t, ws, `{"type":"hello","platform":"discord","botId":"nope"}`+"\n")
	write(t, ws, `{"type":"outbound","requestId":"r2","platform":"discord","botId":"nope","action":{"op":"send","chat_id":"333","content":"x"}}`+"\n")
	f = readFrame(t, ws)
	if f.Type != relay.FrameOutboundResult || f.RequestID != "r2" || f.Result.Success {
		t.Fatalf("outbound for an unknown bot answered %+v", f)
	}
	if e.auditActions(slot1)["relay.deliver/allow"] != 1 {
		t.Errorf("audit %v", e.auditActions(slot1))
	}
}

// Close closes the gateways' sockets (http.Server.Shutdown would not).
func TestCloseClosesSockets(t *testing.T) {
	e := newEnv(t)
	g := e.gateway("gw-a", secretA, "discord", discordApp)
	if e.conn.Connections() != 1 {
		t.Fatalf("%d connections", e.conn.Connections())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := e.conn.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := g.WaitDisconnected(ctx); err != nil {
		t.Fatalf("adapter still connected after Close: %v", err)
	}
	if r := g.Send(t.Context(), "333", "x", "", nil); r.Success || r.Error != relay.ErrTextNotConnected {
		t.Errorf("Send after close = %+v", r)
	}
	if e.conn.Connections() != 0 {
		t.Errorf("%d connections after Close", e.conn.Connections())
	}
}
