package connector

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/discord"
	"github.com/caduceus-dev/caduceus/relay/telegram"
)

// Inbound is one platform event, verified and normalized at the edge,
// ready for delivery to its tenant's gateway.
type Inbound struct {
	Tenant contract.TenantSlot
	Bot    string
	Event  relay.MessageEvent
	// DedupeID identifies the delivery within its chat (the message id,
	// or the message id and edit date for an edit).
	DedupeID string
	// Capability, when set, goes into the vault under the event's session
	// key; it never reaches a gateway.
	Capability *relay.Capability
}

// Delivery says what became of an inbound event.
type Delivery string

// Deliveries.
const (
	Delivered  Delivery = "delivered"   // queued on a gateway connection
	Buffered   Delivery = "buffered"    // kept until a gateway connects and acknowledges it
	Duplicate  Delivery = "duplicate"   // seen before; dropped
	FromBot    Delivery = "from_bot"    // another bot's message while Config.BotMessages is off; dropped
	BufferFull Delivery = "buffer_full" // no gateway and no room; dropped, recorded as a refusal
	// Blocked: the platform's guardrails found a kind they block; not
	// delivered, recorded as a refusal, and the sender told (guardrails.go).
	Blocked Delivery = "blocked"
)

// Deliver runs an inbound event through the pipeline: drop another bot's
// message unless Config.BotMessages (platform packages drop the
// connector's own before this), dedupe on
// platform:chat_id:dedupe_id, bind the chat to the tenant, store the
// capability, route a "/stop" command as an interrupt, then deliver it to
// the connection owning its session (or any connection of the tenant
// serving that platform and bot, which becomes the owner), or buffer it
// while none is connected. It returns an error only when the store fails
// (the webhook then answers 500 and the platform retries), and an invalid
// *contract.Error for a tenant that is not a slot or an event whose source
// cannot be keyed (nothing is stored then).
//
// When the identity's guardrails apply, the event's texts are scanned
// after deduplication and before anything else reads them (guardrails.go):
// redacted in place, or — a blocked kind found — not delivered at all
// (Blocked; the sender is told on the platform, the refusal recorded).
func (c *Connector) Deliver(ctx context.Context, in Inbound) (Delivery, error) {
	d, _, err := c.deliver(ctx, in, true)
	return d, err
}

// deliver is Deliver; for a Blocked event it also returns the kinds found,
// and tells the sender on the platform only when tell is set (a Discord
// interaction is answered in the webhook's response instead).
func (c *Connector) deliver(ctx context.Context, in Inbound, tell bool) (Delivery, []guard.Kind, error) {
	src := in.Event.Source
	if !contract.ValidTenantSlot(string(in.Tenant)) {
		return "", nil, contract.FieldError("tenant", "relay_tenant", "relay: tenant %q is not a tenant slot", in.Tenant)
	}
	if strings.TrimSpace(src.Platform) == "" {
		return "", nil, contract.FieldError("source.platform", "relay_unkeyable", "relay: the event's source names no platform")
	}
	if src.IsBot && !c.cfg.BotMessages {
		c.log.Debug("relay: bot message dropped (bot_messages is off)", "platform", src.Platform, "chat", src.ChatID, "user", src.UserID)
		return FromBot, nil, nil
	}
	key, err := c.SessionKey(in.Tenant, in.Event)
	if err != nil {
		// The gateway would fail this message (e.g. a WhatsApp id with a
		// space): refuse it here, with the reason, and pass nothing on.
		return "", nil, contract.Invalidf("relay_unkeyable", "%v", err)
	}
	now := c.now()
	first, err := c.cfg.Store.MarkSeen(ctx, in.Tenant, src.Platform+":"+src.ChatID+":"+in.DedupeID, now)
	if err != nil {
		return "", nil, contract.Internal(err)
	}
	if !first {
		c.log.Debug("relay: duplicate inbound dropped", "platform", src.Platform, "chat", src.ChatID, "message", in.Event.MessageID)
		return Duplicate, nil, nil
	}
	// The guardrails act before anything else reads the text.
	g := c.guardInbound(src.Platform, in.Bot, &in.Event)
	if g != nil && len(g.blocked) > 0 {
		e := entry{tenant: in.Tenant, action: "relay.deliver", resource: src.Platform + ":" + src.ChatID,
			outcome: contract.OutcomeDeny, reason: guard.CodeBlocked, subjectOf: subjectKey(src), platform: src.Platform,
			actor: contract.ActorUser, sessionKey: key, messageID: in.Event.MessageID, guard: g,
			payload: &delivery{Direction: "in", Platform: src.Platform, Bot: in.Bot, ChatID: src.ChatID, SessionKey: key,
				MessageID: in.Event.MessageID, Error: blockedError(g.blocked)}}
		g.annotate(e.payload)
		c.record(ctx, e)
		c.log.Info("relay: inbound message blocked by guardrails", "tenant", in.Tenant, "platform", src.Platform,
			"bot", in.Bot, "chat", src.ChatID, "message", in.Event.MessageID, "kinds", kindNames(g.blocked))
		if tell {
			c.replyBlocked(in.Bot, in.Event, g.blocked)
		}
		return Blocked, g.blocked, nil
	}
	if err := c.cfg.Store.BindChat(ctx, in.Tenant, src.Platform, src.ChatID, now); err != nil {
		return "", nil, contract.Internal(err)
	}
	if in.Capability != nil {
		cp := *in.Capability
		cp.Tenant, cp.SessionKey = in.Tenant, key
		if err := c.cfg.Store.PutCapability(ctx, cp); err != nil {
			return "", nil, contract.Internal(err)
		}
	}
	if in.Event.MessageType == relay.MessageCommand && isStop(in.Event.Text) {
		c.interrupt(ctx, in.Tenant, key, "platform", subjectKey(src))
	}
	e := entry{tenant: in.Tenant, resource: src.Platform + ":" + src.ChatID, subjectOf: subjectKey(src),
		platform: src.Platform, actor: contract.ActorUser, sessionKey: key, messageID: in.Event.MessageID, guard: g}
	d := &delivery{Direction: "in", Platform: src.Platform, Bot: in.Bot, ChatID: src.ChatID, SessionKey: key,
		MessageID: in.Event.MessageID, ContentSHA256: contentHash(in.Event.Text)}
	if g != nil {
		g.annotate(d)
	}
	e.payload = d
	c.sessions.remember(in.Tenant, src.Platform, in.Bot, src.ChatID, key)
	if o := c.pick(in.Tenant, src.Platform, in.Bot, key, src.ChatID); o != nil {
		ev := in.Event
		if o.Deliver(relay.Frame{Type: relay.FrameInbound, Event: &ev, Platform: src.Platform, BotID: in.Bot}) {
			d.Conn, d.Success = o.ID(), true
			e.action, e.outcome, e.conn = "relay.deliver", contract.OutcomeAllow, o.ID()
			c.record(ctx, e)
			return Delivered, nil, nil
		}
	}
	body, err := json.Marshal(in.Event)
	if err != nil {
		return "", nil, contract.Internal(err)
	}
	b := relay.Buffered{ID: contract.NewID("rbuf"), Tenant: in.Tenant, Platform: src.Platform, Bot: in.Bot,
		SessionKey: key, Event: body, CreatedAt: now}
	ok, err := c.cfg.Store.Enqueue(ctx, b, c.cfg.BufferLimit)
	if err != nil {
		return "", nil, contract.Internal(err)
	}
	e.action = "relay.buffer"
	if !ok {
		d.Error = "buffer full"
		e.outcome, e.reason = contract.OutcomeDeny, "buffer_full"
		c.record(ctx, e)
		c.log.Warn("relay: buffer full; inbound event dropped", "tenant", in.Tenant, "platform", src.Platform)
		return BufferFull, nil, nil
	}
	d.BufferID, d.Success = b.ID, true
	e.outcome = contract.OutcomeAllow
	c.record(ctx, e)
	// A gateway may have said hello between pick and Enqueue: drain for it;
	// and one may be connected to another process sharing the store.
	c.drainFor(in.Tenant, src.Platform, in.Bot)
	if bs, ok := c.router.(BufferSignal); ok {
		bs.Buffered(in.Tenant, src.Platform, in.Bot)
	}
	return Buffered, nil, nil
}

// drainFor offers tenant's buffered events for (platform, bot) to one of
// this process's connections serving it, if any.
func (c *Connector) drainFor(tenant contract.TenantSlot, platform, bot string) {
	c.mu.RLock()
	var k *conn
	if list := c.byID[identKey{tenant, platform, bot}]; len(list) > 0 {
		k = list[0]
	}
	c.mu.RUnlock()
	if k != nil {
		go c.drain(k, platform, bot)
	}
}

func isStop(text string) bool {
	f := strings.Fields(text)
	return len(f) > 0 && (f[0] == "/stop" || strings.HasPrefix(f[0], "/stop@"))
}

func subjectKey(src relay.SessionSource) string {
	u := src.UserID
	if u == "" {
		u = src.ChatID
	}
	return src.Platform + ":" + u
}

// drain delivers the tenant's buffered events for (platform, bot) to k,
// each with its bufferId, leasing each so no other connection receives it
// meanwhile. An event leaves the buffer only when k acknowledges it.
func (c *Connector) drain(k *conn, platform, bot string) {
	k.drainMu.Lock()
	defer k.drainMu.Unlock()
	ctx := k.ctx
	for ctx.Err() == nil {
		now := c.now()
		page, err := c.cfg.Store.Pending(ctx, k.tenant, platform, bot, now, 256)
		if err != nil {
			if ctx.Err() == nil {
				c.log.Error("relay: read buffer", "conn", k.id, "err", err)
			}
			return
		}
		c.log.Debug("relay: drain", "conn", k.id, "platform", platform, "bot", bot, "pending", len(page))
		if len(page) == 0 {
			return
		}
		for _, b := range page {
			ok, err := c.cfg.Store.Lease(ctx, k.tenant, b.ID, k.id, now, now.Add(c.cfg.LeaseTTL))
			if err != nil || !ok {
				continue
			}
			var ev relay.MessageEvent
			if err := json.Unmarshal(b.Event, &ev); err != nil {
				c.log.Error("relay: buffered event unreadable; dropped", "buffer", b.ID, "err", err)
				_, _ = c.cfg.Store.Ack(ctx, k.tenant, b.ID)
				continue
			}
			c.router.SetOwner(k.tenant, b.SessionKey, ev.Source.ChatID, k)
			c.sessions.remember(k.tenant, platform, bot, ev.Source.ChatID, b.SessionKey)
			if !k.Deliver(relay.Frame{Type: relay.FrameInbound, Event: &ev, BufferID: b.ID, Platform: platform, BotID: bot}) {
				return // the lease is released when the connection ends
			}
			c.record(ctx, entry{tenant: k.tenant, action: "relay.deliver", resource: platform + ":" + ev.Source.ChatID,
				outcome: contract.OutcomeAllow, subjectOf: subjectKey(ev.Source), platform: platform, actor: contract.ActorUser,
				sessionKey: b.SessionKey, messageID: ev.MessageID, conn: k.id,
				payload: &delivery{Direction: "in", Platform: platform, Bot: bot, ChatID: ev.Source.ChatID, SessionKey: b.SessionKey,
					MessageID: ev.MessageID, BufferID: b.ID, ContentSHA256: contentHash(ev.Text), Conn: k.id, Success: true}})
		}
		if len(page) < 256 {
			return
		}
	}
}

// readBody reads at most limit bytes; ok is false (and 413 answered) when
// the body is longer.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return nil, false
	}
	if int64(len(body)) > limit {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return nil, false
	}
	return body, true
}

// webhookEntry returns the configuration entry of m that the request
// path's value key names, and the request body (at most limit bytes).
// When m has no such entry (404) or the body cannot be read (400, 413) it
// has answered, and ok is false.
func webhookEntry[T any](w http.ResponseWriter, r *http.Request, m map[string]T, key string, limit int64) (id string, entry T, body []byte, ok bool) {
	id = r.PathValue(key)
	if entry, ok = m[id]; !ok {
		http.NotFound(w, r)
		return id, entry, nil, false
	}
	body, ok = readBody(w, r, limit)
	return id, entry, body, ok
}

// webhookEdge returns the edge of platform that the request path's value
// key names, or answers 404 and returns nil.
func (c *Connector) webhookEdge(w http.ResponseWriter, r *http.Request, platform, key string) (string, *edge) {
	bot := r.PathValue(key)
	e := c.edge(platform, bot)
	if e == nil {
		http.NotFound(w, r)
	}
	return bot, e
}

// answerUnnormalized answers a webhook whose event Normalize did not turn
// into one: 200 for an event the platform package ignores (answered, so
// the platform does not retry it), 400 with bad for one it cannot read. It
// reports whether it answered, that is whether err is not nil.
func answerUnnormalized(w http.ResponseWriter, err, ignored error, bad string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ignored):
		w.WriteHeader(http.StatusOK)
	default:
		http.Error(w, bad, http.StatusBadRequest)
	}
	return true
}

// tenantOr is the tenant m gives key, else def.
func tenantOr(m map[string]contract.TenantSlot, key string, def contract.TenantSlot) contract.TenantSlot {
	if t, ok := m[key]; ok {
		return t
	}
	return def
}

// serveDiscord is POST /hooks/discord/{app}.
func (c *Connector) serveDiscord(w http.ResponseWriter, r *http.Request) {
	app, e := c.webhookEdge(w, r, discord.Platform, "app")
	if e == nil {
		return
	}
	refuse := func(msg string) {
		c.log.Warn(msg, "app", app, "remote", r.RemoteAddr)
		http.Error(w, "invalid request signature", http.StatusUnauthorized)
	}
	// What the headers can refuse is refused before the body is read: a
	// missing or malformed signature, a timestamp out of range (a validly
	// signed but old request is a replay).
	sig, stamp := r.Header.Get("X-Signature-Ed25519"), r.Header.Get("X-Signature-Timestamp")
	if len(sig) != 2*ed25519.SignatureSize {
		refuse("relay: discord signature refused")
		return
	}
	if ts, err := strconv.ParseInt(stamp, 10, 64); err != nil || absDuration(c.now().Sub(time.Unix(ts, 0))) > discord.MaxClockSkew {
		refuse("relay: discord request timestamp out of range")
		return
	}
	body, ok := readBody(w, r, discord.MaxBodyBytes)
	if !ok {
		return
	}
	if !discord.Verify(e.discordKey, sig, stamp, body) {
		refuse("relay: discord signature refused")
		return
	}
	i, err := discord.ParseInteraction(body)
	if err != nil {
		http.Error(w, "bad interaction", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if i.Type == discord.TypePing || i.Type == discord.TypeAutocomplete {
		_, _ = w.Write(discord.Ack(i))
		return
	}
	in, err := discord.Normalize(i)
	if err != nil {
		http.Error(w, "unsupported interaction", http.StatusBadRequest)
		return
	}
	// Tenant from the event: the guild's, else the DM user's, else the app's.
	var tenant contract.TenantSlot
	if in.GuildID != "" {
		tenant = e.discordApp.Guilds[in.GuildID]
	} else {
		tenant = e.discordApp.Users[in.UserID]
	}
	if tenant == "" {
		tenant = e.discordApp.Tenant
	}
	if tenant == "" {
		c.log.Warn("relay: discord interaction with no tenant", "app", app, "guild", in.GuildID)
		_, _ = w.Write([]byte(`{"type":4,"data":{"content":"This conversation is not connected to an agent.","flags":64}}`))
		return
	}
	d, blocked, err := c.deliver(r.Context(), Inbound{Tenant: tenant, Bot: app, Event: in.Event, DedupeID: in.Event.MessageID,
		Capability: &relay.Capability{Kind: relay.KindDiscordInteractionToken, Bot: in.ApplicationID, Secret: in.Token,
			ExpiresAt: c.now().Add(discord.TokenTTL)}}, false)
	if err != nil {
		c.webhookError(w, "discord", err)
		return
	}
	if d == Blocked {
		// The interaction is answered with the refusal, seen only by its
		// user.
		_, _ = w.Write(discordBlocked(blocked))
		return
	}
	_, _ = w.Write(discord.Ack(i))
}

// serveTelegram is POST /hooks/telegram/{bot}.
func (c *Connector) serveTelegram(w http.ResponseWriter, r *http.Request) {
	name, e := c.webhookEdge(w, r, telegram.Platform, "bot")
	if e == nil {
		return
	}
	if !telegram.CheckSecret(r.Header.Get(telegram.SecretHeader), e.telegramBot.SecretToken) {
		c.log.Warn("relay: telegram secret token refused", "bot", name, "remote", r.RemoteAddr)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, ok := readBody(w, r, telegram.MaxBodyBytes)
	if !ok {
		return
	}
	u, err := telegram.ParseUpdate(body)
	if err != nil {
		http.Error(w, "bad update", http.StatusBadRequest)
		return
	}
	in, err := telegram.Normalize(u)
	if in.CallbackQueryID != "" {
		// Stop the client's progress indicator on the pressed button.
		go func(id string) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := e.telegram.AnswerCallbackQuery(ctx, id); err != nil {
				c.log.Info("relay: telegram answerCallbackQuery failed", "bot", name, "err", err)
			}
		}(in.CallbackQueryID)
	}
	if answerUnnormalized(w, err, telegram.ErrIgnored, "bad update") {
		return
	}
	// The bot's own messages are never delivered (its id is the token's
	// first part).
	if own, _, _ := strings.Cut(e.telegramBot.Token, ":"); in.Event.Source.IsBot && in.Event.Source.UserID == own {
		w.WriteHeader(http.StatusOK)
		return
	}
	tenant := tenantOr(e.telegramBot.Chats, in.ChatID, e.telegramBot.Tenant)
	if tenant == "" {
		c.log.Warn("relay: telegram update with no tenant", "bot", name, "chat", in.ChatID)
		w.WriteHeader(http.StatusOK) // answered, so Telegram does not retry it forever
		return
	}
	c.rehost(r.Context(), tenant, &in.Event, telegramAttachments(e.telegram, in.Files))
	if _, err := c.Deliver(r.Context(), Inbound{Tenant: tenant, Bot: name, Event: in.Event, DedupeID: in.DedupeKey}); err != nil {
		c.webhookError(w, "telegram", err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func (c *Connector) webhookError(w http.ResponseWriter, platform string, err error) {
	e := contract.AsError(err)
	c.log.Error("relay: inbound delivery failed", "platform", platform, "err", err)
	http.Error(w, e.Message, e.Kind.HTTPStatus())
}
