package connector

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/relay"
	"github.com/caduceus-dev/caduceus/relay/discord"
	"github.com/caduceus-dev/caduceus/relay/telegram"
)

// outbound performs one outbound action for connection k and returns the
// result the gateway receives. Every call is one audit record.
func (c *Connector) outbound(ctx context.Context, k *conn, f relay.Frame) relay.Result {
	a := f.Action
	platform, bot := f.Platform, f.BotID
	if platform == "" {
		ids := k.identities()
		if len(ids) == 0 {
			return relay.Failure("relay: outbound before hello")
		}
		platform, bot = c.untagged(ctx, k, ids, a)
	}
	if bot == "" {
		bot, _ = c.defaultBot(platform)
	}
	d := &delivery{Direction: "out", Platform: platform, Bot: bot, Op: a.Op, RequestID: trunc(f.RequestID, 80),
		ChatID: a.ChatID, SessionKey: a.SessionKey, MessageID: a.MessageID, Kind: a.Kind,
		ContentSHA256: contentHash(a.Content), Gateway: k.gatewayID, Conn: k.id}
	res, reason := c.act(ctx, k, platform, bot, a, d)
	d.Success, d.Error = res.Success, res.Error
	if res.MessageID != "" {
		d.MessageID = res.MessageID
	}
	session := a.SessionKey
	if session == "" {
		session = c.sessions.lookup(k.tenant, platform, bot, a.ChatID)
	}
	e := entry{tenant: k.tenant, action: "relay.outbound", outcome: contract.OutcomeAllow, subjectOf: "gateway:" + k.gatewayID,
		platform: platform, actor: contract.ActorAssistant, sessionKey: session, messageID: d.MessageID,
		gateway: k.gatewayID, conn: k.id, payload: d}
	e.resource = platform + ":" + a.ChatID
	if a.Op == relay.OpFollowUp {
		e.resource = platform + ":" + a.SessionKey
	}
	if reason != "" {
		e.outcome, e.reason = contract.OutcomeDeny, reason
	}
	c.record(ctx, e)
	return res
}

// untagged picks the identity of an outbound frame without a platform, from
// the connector's own routing rather than the socket's first hello alone:
// a follow_up goes to the platform its kind names; an op naming a chat to
// the first of the socket's identities (in hello order) that delivered the
// chat on this process, else that has the chat bound to the tenant; with
// none, the first hello's.
func (c *Connector) untagged(ctx context.Context, k *conn, ids []ident, a *relay.Action) (platform, bot string) {
	if len(ids) > 1 {
		if a.Op == relay.OpFollowUp {
			p, _, _ := strings.Cut(a.Kind, ".")
			for _, id := range ids {
				if id.platform == p {
					return id.platform, id.bot
				}
			}
		}
		if a.ChatID != "" {
			for _, id := range ids {
				if c.sessions.lookup(k.tenant, id.platform, id.bot, a.ChatID) != "" {
					return id.platform, id.bot
				}
			}
			for _, id := range ids {
				if e := c.edge(id.platform, id.bot); e != nil {
					if ok, err := c.chatAllowed(ctx, k.tenant, e, a.ChatID); err == nil && ok {
						return id.platform, id.bot
					}
				}
			}
		}
	}
	return ids[0].platform, ids[0].bot
}

// act performs the action. reason is set when the connector refused it
// (as opposed to the platform failing it). The checks every op shares come
// first: a hello for the identity, a known edge, the op known (and, for the
// optional ones, supported by the platform), a chat bound to the tenant
// for the ops that name one; then the op's own function.
func (c *Connector) act(ctx context.Context, k *conn, platform, bot string, a *relay.Action, d *delivery) (relay.Result, string) {
	if !k.said(platform, bot) {
		return relay.Failure("relay: no hello for " + platform + " " + bot), "not_hello"
	}
	e := c.edge(platform, bot)
	if e == nil {
		return relay.Failure("relay: unknown platform or bot"), "unknown_bot"
	}
	op, known := outboundOp(a.Op)
	if !known || (op.optional && !e.desc.Supports(a.Op)) {
		return relay.Failure("relay: unsupported op " + a.Op), "unsupported_op"
	}
	if op.needsChat {
		if r, why, ok := c.chatBound(ctx, k, e, a); !ok {
			return r, why
		}
	}
	return op.do(c, ctx, k, e, a, d)
}

// opHandler performs one outbound op after act's shared checks.
type opHandler func(c *Connector, ctx context.Context, k *conn, e *edge, a *relay.Action, d *delivery) (relay.Result, string)

// opSpec is how act treats an op: whether it names a chat that must be
// bound to the tenant, whether the platform may lack it (the descriptor
// says), and its function.
type opSpec struct {
	needsChat bool
	optional  bool
	do        opHandler
}

// outboundOp is the spec of op; known is false for an op the connector
// does not perform.
func outboundOp(op string) (spec opSpec, known bool) {
	switch op {
	case relay.OpSend:
		return opSpec{needsChat: true, do: (*Connector).sendText}, true
	case relay.OpEdit:
		return opSpec{needsChat: true, do: (*Connector).editText}, true
	case relay.OpTyping:
		return opSpec{needsChat: true, do: (*Connector).sendTyping}, true
	case relay.OpGetChatInfo:
		return opSpec{needsChat: true, do: (*Connector).getChatInfo}, true
	case relay.OpFollowUp:
		return opSpec{optional: true, do: (*Connector).followUp}, true
	case relay.OpReact, relay.OpDelete:
		return opSpec{needsChat: true, do: (*Connector).reactOrDelete}, true
	case relay.OpPrompt:
		return opSpec{needsChat: true, optional: true, do: func(c *Connector, ctx context.Context, _ *conn, e *edge, a *relay.Action, d *delivery) (relay.Result, string) {
			return c.prompt(ctx, e, a, d)
		}}, true
	case relay.OpSendMedia:
		return opSpec{needsChat: true, optional: true, do: (*Connector).sendMedia}, true
	case relay.OpThreadMake, relay.OpThreadName:
		return opSpec{needsChat: true, do: func(c *Connector, ctx context.Context, k *conn, e *edge, a *relay.Action, _ *delivery) (relay.Result, string) {
			return c.thread(ctx, k, e, a)
		}}, true
	case relay.OpDraft:
		return opSpec{needsChat: true, do: func(c *Connector, ctx context.Context, k *conn, e *edge, a *relay.Action, d *delivery) (relay.Result, string) {
			if a.DraftID == nil {
				return relay.Failure("relay: draft needs draft_id"), "invalid"
			}
			return c.draft(ctx, k, e, a, d)
		}}, true
	}
	return opSpec{}, false
}

// chatBound checks that the action names a chat and that the chat is bound
// to the connection's tenant.
func (c *Connector) chatBound(ctx context.Context, k *conn, e *edge, a *relay.Action) (relay.Result, string, bool) {
	if a.ChatID == "" {
		return relay.Failure("relay: " + a.Op + " needs chat_id"), "invalid", false
	}
	ok, err := c.chatAllowed(ctx, k.tenant, e, a.ChatID)
	if err != nil {
		c.log.Error("relay: chat binding lookup", "err", err)
		return relay.Failure("relay: internal error"), "internal", false
	}
	if !ok {
		return relay.Declined(e.platform), "chat_not_bound", false
	}
	return relay.Result{}, "", true
}

// sendText sends content, split to the platform's limit; the first chunk
// replies to reply_to, and the result names the last chunk.
func (c *Connector) sendText(ctx context.Context, _ *conn, e *edge, a *relay.Action, d *delivery) (relay.Result, string) {
	chunks := relay.Split(a.Content, e.desc.MaxMessageLength, e.desc.LenUnit)
	d.Chunks = len(chunks)
	_, last, failed := sendChunks(ctx, e, a, chunks, a.ReplyTo)
	if failed != "" {
		return relay.Failure(failed), ""
	}
	return relay.Result{Success: true, MessageID: last}, ""
}

// sendChunks sends chunks in order to the action's chat (with its
// metadata), the first replying to replyTo, and returns the first message
// id and the last; it stops at a chunk that fails, and failed (failText)
// says which.
func sendChunks(ctx context.Context, e *edge, a *relay.Action, chunks []string, replyTo string) (first, last, failed string) {
	for i, chunk := range chunks {
		if i > 0 {
			replyTo = ""
		}
		id, err := e.send(ctx, a.ChatID, chunk, replyTo, a.Metadata)
		if err != nil {
			return first, last, failText(err, i, len(chunks))
		}
		if first == "" {
			first = id
		}
		last = id
	}
	return first, last, ""
}

// editText replaces a message's content; content over the platform's limit
// is refused before the platform is called.
func (c *Connector) editText(ctx context.Context, _ *conn, e *edge, a *relay.Action, _ *delivery) (relay.Result, string) {
	if a.MessageID == "" {
		return relay.Failure("relay: edit needs message_id"), "invalid"
	}
	if n := relay.Len(a.Content, e.desc.LenUnit); n > e.desc.MaxMessageLength {
		return relay.Failure(fmt.Sprintf("relay: edit content is %d %s, over the limit of %d", n, e.desc.LenUnit, e.desc.MaxMessageLength)), "invalid"
	}
	if err := e.edit(ctx, a.ChatID, a.MessageID, a.Content); err != nil {
		return relay.Failure(err.Error()), ""
	}
	return relay.Result{Success: true, MessageID: a.MessageID}, ""
}

func (c *Connector) sendTyping(ctx context.Context, _ *conn, e *edge, a *relay.Action, _ *delivery) (relay.Result, string) {
	if err := e.typing(ctx, a.ChatID, a.Metadata); err != nil {
		return relay.Failure(err.Error()), ""
	}
	return relay.Result{Success: true}, ""
}

func (c *Connector) getChatInfo(ctx context.Context, _ *conn, e *edge, a *relay.Action, _ *delivery) (relay.Result, string) {
	name, typ, err := e.chatInfo(ctx, a.ChatID)
	if err != nil {
		return relay.Failure(err.Error()), ""
	}
	return relay.Result{Success: true, Name: name, Type: typ, ChatInfo: &relay.ChatInfo{Name: name, Type: typ}}, ""
}

// reactOrDelete adds or removes a reaction (react needs an emoji) or
// deletes a message.
func (c *Connector) reactOrDelete(ctx context.Context, _ *conn, e *edge, a *relay.Action, _ *delivery) (relay.Result, string) {
	if a.MessageID == "" {
		return relay.Failure("relay: " + a.Op + " needs message_id"), "invalid"
	}
	var err error
	if a.Op == relay.OpReact {
		if a.Emoji == "" {
			return relay.Failure("relay: react needs emoji"), "invalid"
		}
		err = e.react(ctx, a.ChatID, a.MessageID, a.Emoji, a.Remove)
	} else {
		err = e.delete(ctx, a.ChatID, a.MessageID)
	}
	if err != nil {
		return relay.Failure(err.Error()), ""
	}
	return relay.Result{Success: true, MessageID: a.MessageID}, ""
}

// followUp resolves the capability from the vault by (the connection's
// tenant, session key, kind) — never from the frame — and uses it. It is
// refused when the capability is absent, expired or another tenant's (the
// three look the same to the gateway), and when another connection owns the
// session.
func (c *Connector) followUp(ctx context.Context, k *conn, e *edge, a *relay.Action, d *delivery) (relay.Result, string) {
	if a.SessionKey == "" || a.Kind == "" {
		return relay.Failure("relay: follow_up needs session_key and kind"), "invalid"
	}
	o, chatID, owned := c.router.Owner(k.tenant, a.SessionKey)
	if owned && o.ID() != k.id {
		return relay.Failure("relay: session is owned by another connection"), "not_owner"
	}
	cp, ok, err := c.cfg.Store.Capability(ctx, k.tenant, a.SessionKey, a.Kind, c.now())
	if err != nil {
		c.log.Error("relay: vault lookup", "err", err)
		return relay.Failure("relay: internal error"), "internal"
	}
	if !ok {
		return relay.Failure("relay: no " + a.Kind + " capability for this session"), "no_capability"
	}
	if cp.Kind == relay.KindDiscordInteractionToken && cp.Bot != e.bot {
		return relay.Failure("relay: capability belongs to another application"), "no_capability"
	}
	if !owned {
		c.router.SetOwner(k.tenant, a.SessionKey, chatID, k)
	}
	chunks := relay.Split(a.Content, e.desc.MaxMessageLength, e.desc.LenUnit)
	d.Chunks = len(chunks)
	var last string
	for i, chunk := range chunks {
		id, err := e.followUp(ctx, cp, chunk)
		if err != nil {
			return relay.Failure(failText(err, i, len(chunks))), ""
		}
		last = id
	}
	return relay.Result{Success: true, MessageID: last}, ""
}

// chatAllowed reports whether tenant may act in chatID: the chat is bound
// to the tenant (an inbound event of the tenant came from it) or the
// configuration maps it to the tenant.
func (c *Connector) chatAllowed(ctx context.Context, tenant contract.TenantSlot, e *edge, chatID string) (bool, error) {
	if t := e.tenantOf(chatID); t != "" {
		return t == tenant, nil
	}
	return c.cfg.Store.ChatBound(ctx, tenant, e.platform, chatID)
}

// createdThread is a thread the connector created, and its current name.
type createdThread struct {
	platform, bot, id string
}

// thread performs thread_create (a Discord thread or Telegram forum topic
// named thread_name, default "handoff", cut to 100 characters; the result
// carries thread_id) and thread_rename (message_id is the thread; with
// only_if_connector_created it renames only threads this connector
// created, with only_if_current_name only a thread whose name it knows to be
// that one — otherwise a plain failure, nothing renamed).
func (c *Connector) thread(ctx context.Context, k *conn, e *edge, a *relay.Action) (relay.Result, string) {
	name := a.ThreadName
	if name == "" && a.Op == relay.OpThreadMake {
		name = "handoff"
	}
	if r := []rune(name); len(r) > 100 {
		name = string(r[:100])
	}
	if name == "" {
		return relay.Failure("relay: " + a.Op + " needs thread_name"), "invalid"
	}
	if a.Op == relay.OpThreadMake {
		id, err := e.createThread(ctx, a.ChatID, name)
		if err != nil {
			return relay.Failure(err.Error()), ""
		}
		c.threadsMu.Lock()
		if len(c.threads) > 100000 {
			c.threads = map[createdThread]string{} // bounded: forget, rather than grow without end
		}
		c.threads[createdThread{e.platform, e.bot, id}] = name
		c.threadsMu.Unlock()
		if e.platform == discord.Platform {
			// The thread is a chat of its own on Discord: the tenant may act in it.
			if err := c.cfg.Store.BindChat(ctx, k.tenant, e.platform, id, c.now()); err != nil {
				c.log.Error("relay: bind created thread", "err", err)
			}
		}
		return relay.Result{Success: true, ThreadID: id, MessageID: id}, ""
	}
	if a.MessageID == "" {
		return relay.Failure("relay: thread_rename needs message_id (the thread)"), "invalid"
	}
	key := createdThread{e.platform, e.bot, a.MessageID}
	c.threadsMu.Lock()
	current, created := c.threads[key]
	c.threadsMu.Unlock()
	if a.OnlyIfConnectorCreated && !created {
		return relay.Failure("relay: thread was not created by this connector; not renamed"), "not_created_here"
	}
	if a.OnlyIfCurrentName != "" && (!created || current != a.OnlyIfCurrentName) {
		return relay.Failure("relay: thread's current name is not " + strconv.Quote(a.OnlyIfCurrentName) + "; not renamed"), "name_changed"
	}
	if err := e.renameThread(ctx, a.ChatID, a.MessageID, name); err != nil {
		return relay.Failure(err.Error()), ""
	}
	if created {
		c.threadsMu.Lock()
		c.threads[key] = name
		c.threadsMu.Unlock()
	}
	return relay.Result{Success: true, MessageID: a.MessageID}, ""
}

// promptOptionID is the gateway's rule for an option id.
var promptOptionID = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// prompt posts a prompt's content with one button per option whose
// callback token is hp1:<prompt_id>:<option_id>; a press comes back as an
// inbound event with prompt_response. Content longer than the platform's
// limit goes first as plain messages, the buttons on the last.
func (c *Connector) prompt(ctx context.Context, e *edge, a *relay.Action, d *delivery) (relay.Result, string) {
	if a.PromptID == "" || len(a.Options) == 0 || len(a.Options) > 25 {
		return relay.Failure("relay: prompt needs prompt_id and 1 to 25 options"), "invalid"
	}
	limit := 100 // Discord custom_id
	if e.platform == telegram.Platform {
		limit = 64 // Telegram callback_data
	}
	buttons := make([]discord.Button, 0, len(a.Options))
	for _, o := range a.Options {
		token := "hp1:" + a.PromptID + ":" + o.ID
		if !promptOptionID.MatchString(o.ID) || len(token) > limit {
			return relay.Failure("relay: prompt option id " + strconv.Quote(o.ID) + " is not usable as a button"), "invalid"
		}
		label := o.Label
		if r := []rune(label); len(r) > 80 {
			label = string(r[:80])
		}
		if label == "" {
			label = o.ID
		}
		buttons = append(buttons, discord.Button{Label: label, CustomID: token, Style: o.Style})
	}
	chunks := relay.Split(a.Content, e.desc.MaxMessageLength, e.desc.LenUnit)
	if len(chunks) == 0 {
		chunks = []string{a.Content}
	}
	d.Chunks = len(chunks)
	for i, chunk := range chunks[:len(chunks)-1] {
		if _, err := e.send(ctx, a.ChatID, chunk, "", a.Metadata); err != nil {
			return relay.Failure(failText(err, i, len(chunks))), ""
		}
	}
	id, err := e.sendPrompt(ctx, a.ChatID, chunks[len(chunks)-1], a.ReplyTo, buttons, a.Metadata)
	if err != nil {
		return relay.Failure(err.Error()), ""
	}
	return relay.Result{Success: true, MessageID: id}, ""
}

// draftKey names one streamed draft of a connection.
type draftKey struct {
	platform, bot, chatID string
	id                    int64
}

// draftState is the message a draft is streamed into.
type draftState struct {
	mu        sync.Mutex
	messageID string
	sealed    bool
	last      string // content of the last edit, to skip identical ones
}

// draft streams a draft as one message: the first frame sends it, later
// ones edit it (content cut to the platform's limit while streaming), and
// final:true seals it — the last edit, then any overflow as further
// messages — returning the message id. A seal repeated (the gateway retries
// one whose outcome it did not see) answers the same id and sends nothing.
func (c *Connector) draft(ctx context.Context, k *conn, e *edge, a *relay.Action, d *delivery) (relay.Result, string) {
	key := draftKey{e.platform, e.bot, a.ChatID, *a.DraftID}
	k.mu.Lock()
	if k.drafts == nil {
		k.drafts = map[draftKey]*draftState{}
	}
	st := k.drafts[key]
	if st == nil {
		st = &draftState{}
		k.drafts[key] = st
	}
	k.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.sealed {
		return relay.Result{Success: true, MessageID: st.messageID}, ""
	}
	chunks := relay.Split(a.Content, e.desc.MaxMessageLength, e.desc.LenUnit)
	if len(chunks) == 0 {
		chunks = []string{a.Content}
	}
	head := chunks[0]
	if !a.Final && len(chunks) > 1 {
		head = relay.Truncate(a.Content, e.desc.MaxMessageLength, e.desc.LenUnit)
	}
	d.Chunks = len(chunks)
	if st.messageID == "" {
		id, err := e.send(ctx, a.ChatID, head, "", a.Metadata)
		if err != nil {
			return relay.Failure(err.Error()), ""
		}
		st.messageID, st.last = id, head
	} else if head != st.last && head != "" {
		if err := e.edit(ctx, a.ChatID, st.messageID, head); err != nil {
			return relay.Failure(err.Error()), ""
		}
		st.last = head
	}
	if !a.Final {
		return relay.Result{Success: true, MessageID: st.messageID}, ""
	}
	for i, chunk := range chunks[1:] {
		if _, err := e.send(ctx, a.ChatID, chunk, "", a.Metadata); err != nil {
			return relay.Failure(failText(err, i+1, len(chunks))), ""
		}
	}
	st.sealed = true
	return relay.Result{Success: true, MessageID: st.messageID}, ""
}

func failText(err error, i, n int) string {
	msg := err.Error()
	if n > 1 {
		msg = fmt.Sprintf("%s (chunk %d of %d)", msg, i+1, n)
	}
	return strings.TrimSpace(msg)
}

// interruptFromGateway forwards a gateway's interrupt to the connection
// owning the session, within the sender's tenant.
func (c *Connector) interruptFromGateway(ctx context.Context, k *conn, f relay.Frame) {
	if f.SessionKey == "" {
		return
	}
	c.interrupt(ctx, k.tenant, f.SessionKey, "gateway", "gateway:"+k.gatewayID)
}

// Interrupt sends interrupt_inbound for (tenant, sessionKey) down the
// connection that owns the session. It reports whether one did; a session
// with no owner is recorded as a refusal (not_found).
func (c *Connector) Interrupt(ctx context.Context, tenant contract.TenantSlot, sessionKey string) bool {
	return c.interrupt(ctx, tenant, sessionKey, "api", "api")
}

func (c *Connector) interrupt(ctx context.Context, tenant contract.TenantSlot, key, from, subjectOf string) bool {
	e := entry{tenant: tenant, action: "relay.interrupt", resource: "session:" + key, subjectOf: subjectOf,
		sessionKey: key, actor: contract.ActorUser}
	d := &delivery{Direction: "in", SessionKey: key, Op: "interrupt:" + from}
	e.payload = d
	o, chatID, ok := c.router.Owner(tenant, key)
	if !ok {
		e.outcome, e.reason = contract.OutcomeNotFound, "no_owner"
		c.record(ctx, e)
		return false
	}
	if parts := strings.SplitN(key, ":", 4); len(parts) >= 3 {
		e.platform = parts[2] // agent:main:<platform>:...
	}
	d.ChatID, d.Conn = chatID, o.ID()
	delivered := o.Deliver(relay.Frame{Type: relay.FrameInterruptInbound, SessionKey: key, ChatID: chatID})
	d.Success = delivered
	e.outcome, e.conn = contract.OutcomeAllow, o.ID()
	if !delivered {
		e.outcome, e.reason = contract.OutcomeDeny, "owner_gone"
	}
	c.record(ctx, e)
	return delivered
}
