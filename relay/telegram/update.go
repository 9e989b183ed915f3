// Package telegram is the Telegram edge of the relay connector: the Bot API
// webhook (secret-token check; messages, edited messages, forum topics and
// channel posts normalized into relay MessageEvents) and a Bot API client
// for outbound actions.
package telegram

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/relay"
)

// Platform is the relay platform name.
const Platform = "telegram"

// SecretHeader carries the webhook's secret token.
const SecretHeader = "X-Telegram-Bot-Api-Secret-Token"

// MaxBodyBytes bounds a webhook body.
const MaxBodyBytes = 1 << 20

// GeneralTopic is the thread id of a forum's General topic.
const GeneralTopic = "1"

// CheckSecret compares the webhook's secret-token header with the configured
// secret in constant time. An empty configured secret refuses everything.
func CheckSecret(header, secret string) bool {
	if secret == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(header), []byte(secret)) == 1
}

// ID is a Telegram integer id kept exactly as sent (chat ids exceed 2^53).
type ID string

// UnmarshalJSON accepts a JSON integer (or a string of digits).
func (id *ID) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" {
		*id = ""
		return nil
	}
	if s == "" || strings.ContainsAny(s, ".eE+") {
		return fmt.Errorf("telegram: id %s is not an integer", b)
	}
	for i, r := range s {
		if (r < '0' || r > '9') && !(i == 0 && r == '-') {
			return fmt.Errorf("telegram: id %s is not an integer", b)
		}
	}
	*id = ID(s)
	return nil
}

// User is a Telegram user.
type User struct {
	ID        ID     `json:"id"`
	IsBot     bool   `json:"is_bot"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	Username  string `json:"username"`
}

// Chat is a Telegram chat.
type Chat struct {
	ID        ID     `json:"id"`
	Type      string `json:"type"` // private, group, supergroup, channel
	Title     string `json:"title"`
	Username  string `json:"username"`
	FirstName string `json:"first_name"`
	LastName  string `json:"last_name"`
	IsForum   bool   `json:"is_forum"`
}

// Entity is a message entity.
type Entity struct {
	Type   string `json:"type"`
	Offset int    `json:"offset"`
	Length int    `json:"length"`
}

// Message is a Telegram message or channel post.
type Message struct {
	MessageID         ID              `json:"message_id"`
	MessageThreadID   ID              `json:"message_thread_id"`
	IsTopicMessage    bool            `json:"is_topic_message"`
	From              *User           `json:"from"`
	SenderChat        *Chat           `json:"sender_chat"`
	Chat              Chat            `json:"chat"`
	Date              int64           `json:"date"`
	EditDate          int64           `json:"edit_date"`
	Text              string          `json:"text"`
	Caption           string          `json:"caption"`
	Entities          []Entity        `json:"entities"`
	ReplyTo           *Message        `json:"reply_to_message"`
	Photo             json.RawMessage `json:"photo"`
	Video             json.RawMessage `json:"video"`
	Audio             json.RawMessage `json:"audio"`
	Voice             json.RawMessage `json:"voice"`
	Document          json.RawMessage `json:"document"`
	Sticker           json.RawMessage `json:"sticker"`
	Location          json.RawMessage `json:"location"`
	ForumTopicCreated json.RawMessage `json:"forum_topic_created"`
}

// Update is one webhook update.
type Update struct {
	UpdateID          int64          `json:"update_id"`
	Message           *Message       `json:"message"`
	EditedMessage     *Message       `json:"edited_message"`
	ChannelPost       *Message       `json:"channel_post"`
	EditedChannelPost *Message       `json:"edited_channel_post"`
	CallbackQuery     *CallbackQuery `json:"callback_query"`
}

// CallbackQuery is a press of an inline keyboard button.
type CallbackQuery struct {
	ID      string   `json:"id"`
	From    User     `json:"from"`
	Message *Message `json:"message"`
	Data    string   `json:"data"`
}

// ParseUpdate decodes a webhook body.
func ParseUpdate(body []byte) (Update, error) {
	var u Update
	if err := json.Unmarshal(body, &u); err != nil {
		return Update{}, fmt.Errorf("telegram: update: %w", err)
	}
	return u, nil
}

// Inbound is a normalized update.
type Inbound struct {
	Event  relay.MessageEvent
	ChatID string
	Edited bool
	// DedupeKey identifies the delivery: the message id, plus the edit
	// date for an edit (an edit keeps its message's id).
	DedupeKey string
	// CallbackQueryID is set for a button press, which must be answered
	// (answerCallbackQuery) so the client stops its progress indicator.
	CallbackQueryID string
	// Files are the message's attachments; downloading them needs the bot
	// token (getFile), so they stay at the edge until re-hosted.
	Files []File
}

// File is one attachment of a message: its file_id and what Telegram says
// of it. Kind is the relay media kind (image, video, voice, audio,
// document, sticker).
type File struct {
	FileID   string
	Kind     string
	Mime     string
	Filename string
	Size     int64
}

// fileObject is the common part of Telegram's Video, Audio, Voice,
// Document, Sticker and PhotoSize objects.
type fileObject struct {
	FileID   string `json:"file_id"`
	FileName string `json:"file_name"`
	MimeType string `json:"mime_type"`
	FileSize int64  `json:"file_size"`
}

// attachmentKind is what one attachment field of a Message holds.
type attachmentKind struct {
	typ  relay.MessageType
	kind string // the relay media kind
	mime string // the MIME type when Telegram names none
}

// attachment returns m's attachment field, the first present of photo,
// video, voice, audio, document and sticker, and its kind; ok is false
// when m carries none of them.
func attachment(m *Message) (raw json.RawMessage, k attachmentKind, ok bool) {
	for _, a := range [...]struct {
		raw json.RawMessage
		attachmentKind
	}{
		{m.Photo, attachmentKind{relay.MessagePhoto, "image", "image/jpeg"}},
		{m.Video, attachmentKind{relay.MessageVideo, "video", "video/mp4"}},
		{m.Voice, attachmentKind{relay.MessageVoice, "voice", "audio/ogg"}},
		{m.Audio, attachmentKind{relay.MessageAudio, "audio", "audio/mpeg"}},
		{m.Document, attachmentKind{relay.MessageDocument, "document", "application/octet-stream"}},
		{m.Sticker, attachmentKind{relay.MessageSticker, "sticker", "image/webp"}},
	} {
		if present(a.raw) {
			return a.raw, a.attachmentKind, true
		}
	}
	return nil, attachmentKind{}, false
}

// present reports whether an optional object field was sent.
func present(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }

// files lists m's attachments: the largest size of a photo, or the one
// video, voice note, audio, document or sticker. Malformed objects are
// skipped (the message still arrives, typed by what it carries).
func files(m *Message) []File {
	raw, k, ok := attachment(m)
	if !ok {
		return nil
	}
	if k.typ == relay.MessagePhoto {
		var sizes []fileObject
		if json.Unmarshal(raw, &sizes) != nil || len(sizes) == 0 || sizes[len(sizes)-1].FileID == "" {
			return nil
		}
		big := sizes[len(sizes)-1] // Telegram lists sizes smallest first
		return []File{{FileID: big.FileID, Kind: k.kind, Mime: k.mime, Size: big.FileSize}}
	}
	var o fileObject
	if json.Unmarshal(raw, &o) != nil || o.FileID == "" {
		return nil
	}
	mime := k.mime
	if o.MimeType != "" {
		mime = o.MimeType
	}
	return []File{{FileID: o.FileID, Kind: k.kind, Mime: mime, Filename: o.FileName, Size: o.FileSize}}
}

// ErrIgnored is returned for updates that carry no message the gateway
// wants (service messages, updates of other kinds, ...).
var ErrIgnored = fmt.Errorf("telegram: update carries no message")

// Normalize turns a message, edited message, channel post or edited
// channel post into an Inbound, following the gateway's Telegram
// conventions: private -> dm; group and supergroup -> group; a forum
// supergroup -> forum with thread_id the topic (the General topic is "1");
// channel -> channel; user_id from.id, or the chat id for channel posts;
// source.is_bot from.is_bot (the connector decides whether a bot's message
// goes on) and source.message_is_edit for an edited message or post.
// Service messages are ErrIgnored.
func Normalize(u Update) (Inbound, error) {
	if cq := u.CallbackQuery; cq != nil {
		return normalizeCallback(cq)
	}
	m, edited := u.Message, false
	switch {
	case m != nil:
	case u.EditedMessage != nil:
		m, edited = u.EditedMessage, true
	case u.ChannelPost != nil:
		m = u.ChannelPost
	case u.EditedChannelPost != nil:
		m, edited = u.EditedChannelPost, true
	default:
		return Inbound{}, ErrIgnored
	}
	if m.Chat.ID == "" || m.MessageID == "" {
		return Inbound{}, fmt.Errorf("telegram: message without chat or message id")
	}
	text := m.Text
	if text == "" {
		text = m.Caption
	}
	typ := messageType(m)
	if text == "" && typ == relay.MessageText {
		return Inbound{}, ErrIgnored // service message (joins, pins, topic edits, ...)
	}
	chat := string(m.Chat.ID)
	src := relay.SessionSource{Platform: Platform, ChatID: chat, MessageID: string(m.MessageID)}
	switch m.Chat.Type {
	case "private":
		src.ChatType = relay.ChatDM
		src.ChatName = fullName(m.Chat.FirstName, m.Chat.LastName, m.Chat.Username)
	case "channel":
		src.ChatType = relay.ChatChannel
		src.ChatName = m.Chat.Title
		src.ScopeID = chat
	default: // group, supergroup
		src.ChatType = relay.ChatGroup
		src.ChatName = m.Chat.Title
		// The group is the scope of its topics (and of its own chat).
		src.ScopeID = chat
		if m.Chat.IsForum {
			src.ChatType = relay.ChatForum
			src.ThreadID = GeneralTopic
			if m.IsTopicMessage && m.MessageThreadID != "" {
				src.ThreadID = string(m.MessageThreadID)
			}
		}
	}
	if m.From != nil && m.Chat.Type != "channel" {
		src.UserID = string(m.From.ID)
		src.UserName = fullName(m.From.FirstName, m.From.LastName, m.From.Username)
	} else {
		src.UserID = chat
		src.UserName = m.Chat.Title
		if m.SenderChat != nil && m.SenderChat.Title != "" {
			src.UserName = m.SenderChat.Title
		}
	}
	src.IsBot = m.From != nil && m.From.IsBot
	src.MessageIsEdit = edited
	ev := relay.MessageEvent{Text: text, MessageType: typ, Source: src, MessageID: string(m.MessageID)}
	if r := m.ReplyTo; r != nil && r.MessageID != "" {
		// In a forum every topic message replies to the topic's creation
		// message; that is not a reply.
		if !(src.ChatType == relay.ChatForum && (string(r.MessageID) == src.ThreadID || len(r.ForumTopicCreated) > 0)) {
			ev.ReplyToMessageID = string(r.MessageID)
			// The replied-to message as context. A bot author is taken to
			// be this bot (the only bot whose messages a bot sees replied
			// to in most chats).
			text := r.Text
			if text == "" {
				text = r.Caption
			}
			rc := relay.ReplyContext{Text: text}
			if r.From != nil {
				rc.Author = fullName(r.From.FirstName, r.From.LastName, r.From.Username)
				rc.IsOwn = r.From.IsBot
			}
			ev.ReplyTo = &rc
		}
	}
	key := string(m.MessageID)
	if edited {
		key = fmt.Sprintf("%s:edit:%d", m.MessageID, m.EditDate)
	}
	return Inbound{Event: ev, ChatID: chat, Edited: edited, DedupeKey: key, Files: files(m)}, nil
}

func messageType(m *Message) relay.MessageType {
	if len(m.Entities) > 0 && m.Entities[0].Type == "bot_command" && m.Entities[0].Offset == 0 {
		return relay.MessageCommand
	}
	if _, k, ok := attachment(m); ok {
		return k.typ
	}
	if present(m.Location) {
		return relay.MessageLocation
	}
	return relay.MessageText
}

func fullName(first, last, username string) string {
	n := strings.TrimSpace(first + " " + last)
	if n == "" {
		return username
	}
	return n
}

// normalizeCallback turns a press of a prompt button (callback data
// hp1:<prompt_id>:<option_id>) into an event with prompt_response, in the
// chat and topic of the prompt's message, from the user who pressed. Any
// other callback is ignored (but answered).
func normalizeCallback(cq *CallbackQuery) (Inbound, error) {
	pr, ok := relay.ParsePromptToken(cq.Data)
	if !ok || cq.Message == nil || cq.ID == "" {
		return Inbound{CallbackQueryID: cq.ID}, ErrIgnored
	}
	from := cq.From
	m := Message{MessageID: ID(cq.ID), MessageThreadID: cq.Message.MessageThreadID, IsTopicMessage: cq.Message.IsTopicMessage,
		From: &from, Chat: cq.Message.Chat, Date: cq.Message.Date, Text: "/" + pr.OptionID}
	in, err := Normalize(Update{Message: &m})
	if err != nil {
		return Inbound{CallbackQueryID: cq.ID}, err
	}
	pr.PromptMessageID = string(cq.Message.MessageID)
	in.Event.PromptResponse = &pr
	in.Event.MessageType = relay.MessageCommand
	in.Event.ReplyToMessageID = pr.PromptMessageID
	in.DedupeKey = "callback:" + cq.ID
	in.CallbackQueryID = cq.ID
	return in, nil
}
