package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// SessionSource says where a message came from. Its JSON is the gateway's
// SessionSource.to_dict() (HERMES-RELAY.md §3.1): the eight keys platform,
// chat_id, chat_name, chat_type, user_id, user_name, thread_id and
// chat_topic are always present (null when empty, except platform and
// chat_type, which are always strings), and so are the booleans is_bot and
// message_is_edit (HERMES-RELAY.md §9: explicit false for a person's new
// message); one_to_one_verified only when true; then, only when non-empty,
// user_id_alt, chat_id_alt, scope_id and guild_id (the same value: the
// scope, ScopeID else GuildID), parent_chat_id, message_id, profile,
// auto_thread_created (only when true), auto_thread_initial_name,
// prospective_thread_id, user_display_name and user_handle. Every id is a
// string.
type SessionSource struct {
	Platform  string
	ChatID    string
	ChatType  string
	ChatName  string
	UserID    string
	UserName  string
	ThreadID  string
	ChatTopic string
	UserIDAlt string
	ChatIDAlt string
	// ScopeID is the chat's enclosing scope: the Discord guild, the Slack
	// team. The gateway reads only scope_id; GuildID is its deprecated
	// alias (see Scope).
	ScopeID      string
	GuildID      string
	ParentChatID string
	MessageID    string
	// Profile names the gateway profile the message is for (multiplexed
	// gateways key sessions by it).
	Profile string
	// ProspectiveThreadID is the thread a channel message will be answered
	// in (Discord auto-threads); a non-DM source is keyed on it.
	ProspectiveThreadID   string
	AutoThreadCreated     bool
	AutoThreadInitialName string
	// UserDisplayName and UserHandle are presentation names; the gateway
	// shows the first non-empty of UserDisplayName, UserName, UserHandle.
	UserDisplayName string
	UserHandle      string
	// IsBot says the author is a bot or a webhook, not a person.
	IsBot bool
	// MessageIsEdit says the message is an edit of one delivered before
	// (Telegram edited_message, Slack message_changed, Discord
	// MESSAGE_UPDATE), carrying its new text.
	MessageIsEdit bool
	// OneToOneVerified says the platform itself reports the chat as a
	// one-to-one DM (Slack channel_type im); the gateway needs it where it
	// does not infer that from chat_type dm (Slack, Matrix).
	OneToOneVerified bool
}

// Scope is the source's scope: ScopeID, else its alias GuildID.
func (s SessionSource) Scope() string {
	if s.ScopeID != "" {
		return s.ScopeID
	}
	return s.GuildID
}

// mirrorScope makes ScopeID and GuildID the same value, scope_id winning
// (the gateway's dataclass mirrors the alias both ways).
func (s *SessionSource) mirrorScope() {
	if s.ScopeID == "" {
		s.ScopeID = s.GuildID
	}
	s.GuildID = s.ScopeID
}

// Chat types the connectors produce.
const (
	ChatDM      = "dm"
	ChatGroup   = "group"
	ChatChannel = "channel"
	ChatThread  = "thread"
	ChatForum   = "forum"
)

// ChatTypeNull is what an explicit null chat_type reads as: the gateway
// keeps the null and its key builder writes it as Python's "None".
const ChatTypeNull = "None"

// MarshalJSON implements the wire presence rules.
func (s SessionSource) MarshalJSON() ([]byte, error) {
	return s.AppendJSON(nil), nil
}

// UnmarshalJSON reads a source the way the session-key oracle does (see
// ParseSource).
func (s *SessionSource) UnmarshalJSON(b []byte) error {
	v, err := ParseSource(b)
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// sourceStringKeys are the string keys of a source, in wire order.
var sourceStringKeys = [...]string{"platform", "chat_id", "chat_type", "chat_name", "user_id", "user_name",
	"thread_id", "chat_topic", "user_id_alt", "chat_id_alt", "scope_id", "guild_id", "parent_chat_id",
	"message_id", "profile", "auto_thread_initial_name", "prospective_thread_id", "user_display_name",
	"user_handle"}

// sourceBoolKeys are the boolean keys of a source.
var sourceBoolKeys = [...]string{"auto_thread_created", "is_bot", "message_is_edit", "one_to_one_verified"}

// boolField returns the field of s a boolean key names (nil for none).
func (s *SessionSource) boolField(key string) *bool {
	switch key {
	case "auto_thread_created":
		return &s.AutoThreadCreated
	case "is_bot":
		return &s.IsBot
	case "message_is_edit":
		return &s.MessageIsEdit
	case "one_to_one_verified":
		return &s.OneToOneVerified
	}
	return nil
}

// stringField returns the field of s a string key names (nil for none).
func (s *SessionSource) stringField(key string) *string {
	switch key {
	case "platform":
		return &s.Platform
	case "chat_id":
		return &s.ChatID
	case "chat_type":
		return &s.ChatType
	case "chat_name":
		return &s.ChatName
	case "user_id":
		return &s.UserID
	case "user_name":
		return &s.UserName
	case "thread_id":
		return &s.ThreadID
	case "chat_topic":
		return &s.ChatTopic
	case "user_id_alt":
		return &s.UserIDAlt
	case "chat_id_alt":
		return &s.ChatIDAlt
	case "scope_id":
		return &s.ScopeID
	case "guild_id":
		return &s.GuildID
	case "parent_chat_id":
		return &s.ParentChatID
	case "message_id":
		return &s.MessageID
	case "profile":
		return &s.Profile
	case "auto_thread_initial_name":
		return &s.AutoThreadInitialName
	case "prospective_thread_id":
		return &s.ProspectiveThreadID
	case "user_display_name":
		return &s.UserDisplayName
	case "user_handle":
		return &s.UserHandle
	}
	return nil
}

// ParseSource decodes one SessionSource object the way the gateway reads
// it. Unknown keys are ignored. A missing, null, blank
// or unknown platform keys as "relay" (see KeyPlatform); a missing
// chat_type reads as "dm" and a null one as ChatTypeNull. It refuses bytes
// that are not one JSON object, a value of a known string key that is
// neither a string nor null (ids are never numbers), and a boolean key
// (auto_thread_created, is_bot, message_is_edit, one_to_one_verified)
// that is not a boolean or null.
func ParseSource(b []byte) (SessionSource, error) {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return SessionSource{}, fmt.Errorf("relay: source: not a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return SessionSource{}, fmt.Errorf("relay: source: not a JSON object: %w", err)
	}
	var s SessionSource
	for _, key := range sourceStringKeys {
		v, ok := raw[key]
		if !ok || string(v) == "null" {
			continue
		}
		if v[0] != '"' {
			return SessionSource{}, fmt.Errorf("relay: source: %s is not a string", key)
		}
		dst := s.stringField(key)
		if str, ok := plainString(v); ok {
			*dst = str
		} else if err := json.Unmarshal(v, dst); err != nil {
			return SessionSource{}, fmt.Errorf("relay: source: %s: %w", key, err)
		}
	}
	for _, key := range sourceBoolKeys {
		v, ok := raw[key]
		if !ok {
			continue
		}
		switch string(v) {
		case "true":
			*s.boolField(key) = true
		case "false", "null":
		default:
			return SessionSource{}, fmt.Errorf("relay: source: %s is not a boolean", key)
		}
	}
	s.mirrorScope()
	if v, ok := raw["chat_type"]; !ok {
		s.ChatType = ChatDM
	} else if string(v) == "null" {
		s.ChatType = ChatTypeNull
	}
	return s, nil
}

// plainString decodes a JSON string without escapes directly.
func plainString(v json.RawMessage) (string, bool) {
	if len(v) < 2 || v[len(v)-1] != '"' {
		return "", false
	}
	body := v[1 : len(v)-1]
	for _, c := range body {
		if c == '\\' || c == '"' || c < 0x20 || c >= 0x80 {
			return "", false
		}
	}
	return string(body), true
}

// MessageType is the kind of an inbound message.
type MessageType string

// Message types of the wire; anything else reads as text.
const (
	MessageText     MessageType = "text"
	MessageLocation MessageType = "location"
	MessagePhoto    MessageType = "photo"
	MessageVideo    MessageType = "video"
	MessageAudio    MessageType = "audio"
	MessageVoice    MessageType = "voice"
	MessageDocument MessageType = "document"
	MessageSticker  MessageType = "sticker"
	MessageCommand  MessageType = "command"
)

// ParseMessageType maps a wire value to a MessageType (unknown -> text).
func ParseMessageType(s string) MessageType {
	switch t := MessageType(s); t {
	case MessageText, MessageLocation, MessagePhoto, MessageVideo, MessageAudio,
		MessageVoice, MessageDocument, MessageSticker, MessageCommand:
		return t
	}
	return MessageText
}

// MessageEvent is one normalized inbound message. message_id and
// reply_to_message_id are null when empty; media_urls is always a list;
// reply_to, media, context and prompt_response are present only when set
// (an object or a list of objects, never anything else: the gateway drops
// its socket on a non-object where it expects one).
type MessageEvent struct {
	Text             string        `json:"text"`
	MessageType      MessageType   `json:"message_type"`
	Source           SessionSource `json:"source"`
	MessageID        string        `json:"-"`
	ReplyToMessageID string        `json:"-"`
	MediaURLs        []string      `json:"media_urls"`
	// ReplyTo describes the message this one answers.
	ReplyTo *ReplyContext `json:"-"`
	// Media describes the attachments of MediaURLs (matched by URL).
	Media []Media `json:"-"`
	// Context holds recent channel messages the gateway shows the agent
	// read-only.
	Context []ContextMessage `json:"-"`
	// PromptResponse is a button press answering a prompt op.
	PromptResponse *PromptResponse `json:"-"`
}

// ReplyContext is the wire's reply_to object.
type ReplyContext struct {
	Text   string `json:"text"`
	Author string `json:"author"`
	IsOwn  bool   `json:"is_own"`
}

// Media is one attachment of the wire's media list. URL is one of the
// event's media_urls; Size is in bytes (0: unknown).
type Media struct {
	URL      string `json:"url"`
	Mime     string `json:"mime"`
	Kind     string `json:"kind"`
	Size     int64  `json:"size"`
	Filename string `json:"filename"`
	Caption  string `json:"caption"`
}

// MediaKind is the wire's media kind of a MIME type: image, video, audio or
// document.
func MediaKind(mime string) string {
	switch {
	case strings.HasPrefix(mime, "image/"):
		return "image"
	case strings.HasPrefix(mime, "video/"):
		return "video"
	case strings.HasPrefix(mime, "audio/"):
		return "audio"
	}
	return "document"
}

// MediaMessageType is the message type of a message whose (first)
// attachment has this MIME type; audio reads as audio (a platform whose
// audio messages are voice notes says so itself).
func MediaMessageType(mime string) MessageType {
	switch MediaKind(mime) {
	case "image":
		return MessagePhoto
	case "video":
		return MessageVideo
	case "audio":
		return MessageAudio
	}
	return MessageDocument
}

// ContextMessage is one entry of the wire's context list.
type ContextMessage struct {
	Text   string        `json:"text"`
	Source ContextAuthor `json:"source"`
}

// ContextAuthor is who wrote a ContextMessage.
type ContextAuthor struct {
	UserName string `json:"user_name"`
	UserID   string `json:"user_id"`
}

// PromptResponse is the wire's prompt_response object: which option of
// which prompt a user chose.
type PromptResponse struct {
	PromptID        string `json:"prompt_id"`
	OptionID        string `json:"option_id"`
	Label           string `json:"label,omitempty"`
	PromptMessageID string `json:"prompt_message_id,omitempty"`
}

type eventWire struct {
	Text             string           `json:"text"`
	MessageType      MessageType      `json:"message_type"`
	Source           *SessionSource   `json:"source"`
	MessageID        *string          `json:"message_id"`
	ReplyToMessageID *string          `json:"reply_to_message_id"`
	MediaURLs        []string         `json:"media_urls"`
	ReplyTo          *ReplyContext    `json:"reply_to"`
	Media            []Media          `json:"media"`
	Context          []ContextMessage `json:"context"`
	PromptResponse   *PromptResponse  `json:"prompt_response"`
}

// MarshalJSON implements the wire form.
func (e MessageEvent) MarshalJSON() ([]byte, error) {
	return e.AppendJSON(nil), nil
}

// UnmarshalJSON reads the wire form; an unknown message_type reads as text.
// An event without a source (or with one ParseSource refuses) is an error:
// it cannot be keyed.
func (e *MessageEvent) UnmarshalJSON(b []byte) error {
	sc := newScanner(b)
	var fast MessageEvent
	if sc.event(&fast) && sc.end() {
		*e = fast
		return nil
	}
	return e.unmarshalReflect(b)
}

// unmarshalReflect is UnmarshalJSON through encoding/json, for every event
// the scanner declines.
func (e *MessageEvent) unmarshalReflect(b []byte) error {
	var w eventWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("relay: event: %w", err)
	}
	if w.Source == nil {
		return fmt.Errorf("relay: event: source is missing")
	}
	*e = MessageEvent{Text: w.Text, MessageType: ParseMessageType(string(w.MessageType)), Source: *w.Source, MediaURLs: w.MediaURLs,
		ReplyTo: w.ReplyTo, PromptResponse: w.PromptResponse}
	if len(w.Media) > 0 {
		e.Media = w.Media
	}
	if len(w.Context) > 0 {
		e.Context = w.Context
	}
	if w.MessageID != nil {
		e.MessageID = *w.MessageID
	}
	if w.ReplyToMessageID != nil {
		e.ReplyToMessageID = *w.ReplyToMessageID
	}
	return nil
}

// ParsePromptToken reads a prompt button's callback token
// "hp1:<prompt_id>:<option_id>" (HERMES-RELAY.md §2.5) into a
// PromptResponse (without label or message id).
func ParsePromptToken(s string) (PromptResponse, bool) {
	rest, ok := strings.CutPrefix(s, "hp1:")
	if !ok {
		return PromptResponse{}, false
	}
	i := strings.LastIndexByte(rest, ':')
	if i <= 0 || i == len(rest)-1 {
		return PromptResponse{}, false
	}
	return PromptResponse{PromptID: rest[:i], OptionID: rest[i+1:]}, true
}
