package discord

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"

	"github.com/caduceus-dev/caduceus/relay"
)

// Gateway intents the message session identifies with.
const (
	IntentGuildMessages  = 1 << 9
	IntentDirectMessages = 1 << 12
	IntentMessageContent = 1 << 15
	// MessageIntents are GUILD_MESSAGES | DIRECT_MESSAGES | MESSAGE_CONTENT
	// (the last is privileged: enable it in the developer portal).
	MessageIntents = IntentGuildMessages | IntentDirectMessages | IntentMessageContent
)

// MaxPayloadBytes bounds one Gateway payload the session reads (Discord's
// own limit for payloads it sends is far below this).
const MaxPayloadBytes = 1 << 20

// Payload is one Gateway frame: op code, data, and for dispatches (op 0)
// the sequence number and event name.
type Payload struct {
	Op int             `json:"op"`
	D  json.RawMessage `json:"d"`
	S  *int64          `json:"s,omitempty"`
	T  string          `json:"t,omitempty"`
}

// Gateway op codes.
const (
	OpDispatch       = 0
	OpHeartbeat      = 1
	OpIdentify       = 2
	OpResume         = 6
	OpReconnect      = 7
	OpInvalidSession = 9
	OpHello          = 10
	OpHeartbeatAck   = 11
)

// ParsePayload decodes one Gateway frame. It refuses frames that are not a
// JSON object with an op code.
func ParsePayload(b []byte) (Payload, error) {
	var raw struct {
		Op *int            `json:"op"`
		D  json.RawMessage `json:"d"`
		S  *int64          `json:"s"`
		T  string          `json:"t"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Payload{}, fmt.Errorf("discord: gateway payload: %w", err)
	}
	if raw.Op == nil {
		return Payload{}, errors.New("discord: gateway payload has no op")
	}
	return Payload{Op: *raw.Op, D: raw.D, S: raw.S, T: raw.T}, nil
}

// Attachment is a file on a message.
type Attachment struct {
	ID          string `json:"id"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Size        int64  `json:"size"`
	URL         string `json:"url"`
}

// MessageCreate is the data of a MESSAGE_CREATE dispatch (the fields the
// relay reads).
type MessageCreate struct {
	ID          string       `json:"id"`
	ChannelID   string       `json:"channel_id"`
	GuildID     string       `json:"guild_id"`
	Author      User         `json:"author"`
	Member      *Member      `json:"member"`
	Content     string       `json:"content"`
	Mentions    []User       `json:"mentions"`
	Attachments []Attachment `json:"attachments"`
	// WebhookID is set on messages posted by a webhook (never a person).
	WebhookID        string `json:"webhook_id"`
	MessageReference *struct {
		MessageID string `json:"message_id"`
	} `json:"message_reference"`
	// EditedTimestamp is set on an edited message (MESSAGE_UPDATE); Edit
	// says the dispatch was a MESSAGE_UPDATE with it (set by Session).
	EditedTimestamp string `json:"edited_timestamp"`
	Edit            bool   `json:"-"`
	// Thread fields are not part of MESSAGE_CREATE; the session fills
	// ChannelType and ParentID from the channel (GET /channels/{id}) when
	// the message is in a guild.
}

// ParseMessageCreate decodes MESSAGE_CREATE data and checks that it names a
// message, a channel and an author.
func ParseMessageCreate(d []byte) (MessageCreate, error) {
	var m MessageCreate
	if err := json.Unmarshal(d, &m); err != nil {
		return MessageCreate{}, fmt.Errorf("discord: MESSAGE_CREATE: %w", err)
	}
	switch {
	case m.ID == "":
		return MessageCreate{}, errors.New("discord: MESSAGE_CREATE has no id")
	case m.ChannelID == "":
		return MessageCreate{}, errors.New("discord: MESSAGE_CREATE has no channel_id")
	case m.Author.ID == "":
		return MessageCreate{}, errors.New("discord: MESSAGE_CREATE has no author")
	}
	return m, nil
}

// ErrIgnored is what NormalizeMessage answers for a message the relay does
// not deliver: the bot's own, or one with neither text nor attachments.
var ErrIgnored = errors.New("discord: message ignored")

// ChannelKind says what a message's channel is: a thread (and its parent)
// or not. The zero value is an ordinary channel.
type ChannelKind struct {
	Thread   bool
	ParentID string
	Name     string
	Topic    string
}

// NormalizeMessage turns a MESSAGE_CREATE into the gateway's event
// (HERMES-RELAY.md §2.9, §3): chat_type dm without a guild, thread in a
// thread channel (thread_id = chat_id = the thread, parent_chat_id its
// channel), group otherwise; scope_id = guild_id; user name nick >
// global_name > username; the bot's own mention is taken out of the text;
// attachments are listed as media; is_bot for another bot's or a webhook's
// message (the connector decides whether it goes on), message_is_edit for
// an edit (m.Edit). botUserID is the session's own user (from READY).
func NormalizeMessage(m MessageCreate, botUserID string, ch ChannelKind) (relay.MessageEvent, error) {
	if m.Author.ID == botUserID {
		return relay.MessageEvent{}, ErrIgnored
	}
	text := m.Content
	if botUserID != "" {
		text = strings.ReplaceAll(text, "<@"+botUserID+">", "")
		text = strings.ReplaceAll(text, "<@!"+botUserID+">", "")
		text = strings.TrimSpace(text)
	}
	if text == "" && len(m.Attachments) == 0 {
		return relay.MessageEvent{}, ErrIgnored
	}
	name := ""
	if m.Member != nil {
		name = m.Member.Nick
	}
	if name == "" {
		name = m.Author.GlobalName
	}
	if name == "" {
		name = m.Author.Username
	}
	src := relay.SessionSource{
		Platform: Platform, ChatID: m.ChannelID, ChatType: relay.ChatDM,
		UserID: m.Author.ID, UserName: name, UserHandle: m.Author.Username,
		ScopeID: m.GuildID, GuildID: m.GuildID, MessageID: m.ID,
		ChatName: ch.Name, ChatTopic: ch.Topic,
		IsBot: m.Author.Bot || m.WebhookID != "", MessageIsEdit: m.Edit,
	}
	if m.GuildID != "" {
		src.ChatType = relay.ChatGroup
		if ch.Thread {
			src.ChatType = relay.ChatThread
			src.ThreadID = m.ChannelID
			src.ParentChatID = ch.ParentID
		}
	}
	ev := relay.MessageEvent{Text: text, MessageType: relay.MessageText, Source: src, MessageID: m.ID}
	if strings.HasPrefix(text, "/") {
		ev.MessageType = relay.MessageCommand
	}
	if m.MessageReference != nil {
		ev.ReplyToMessageID = m.MessageReference.MessageID
	}
	for _, a := range m.Attachments {
		if a.URL == "" {
			continue
		}
		ct := a.ContentType
		if ct == "" {
			ct = mime.TypeByExtension(path.Ext(a.Filename))
		}
		ev.MediaURLs = append(ev.MediaURLs, a.URL)
		ev.Media = append(ev.Media, relay.Media{URL: a.URL, Mime: ct, Kind: relay.MediaKind(ct), Size: a.Size, Filename: a.Filename})
	}
	return ev, nil
}
