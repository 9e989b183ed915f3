package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// SessionSource says where a message came from. Its JSON is exactly the
// gateway's SessionSource.to_dict(): the eight keys platform, chat_id,
// chat_type, chat_name, user_id, user_name, thread_id and chat_topic are always
// present (null when empty, except platform and chat_type, which are always
// strings); user_id_alt, chat_id_alt, guild_id,
// parent_chat_id and message_id only when non-empty. Every id is a string.
type SessionSource struct {
	Platform     string
	ChatID       string
	ChatType     string
	ChatName     string
	UserID       string
	UserName     string
	ThreadID     string
	ChatTopic    string
	UserIDAlt    string
	ChatIDAlt    string
	GuildID      string
	ParentChatID string
	MessageID    string
	// ScopeID is the workspace the chat belongs to (Slack team id; a
	// Discord guild id mirrors GuildID). It is sent as scope_id when set,
	// and it is part of the key for Slack (HERMES-RELAY §3.2).
	ScopeID string
}

// Chat types the connectors produce.
const (
	ChatDM      = "dm"
	ChatGroup   = "group"
	ChatChannel = "channel"
	ChatThread  = "thread"
	ChatForum   = "forum"
)

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

// ParseSource decodes one SessionSource object. Unknown keys are ignored
// (is_bot among them). It refuses what the gateway cannot key: a value of a
// known key that is neither a string nor null (ids are never numbers), a
// missing, null or blank platform, and an explicit null chat_type. A missing
// chat_type reads as "dm".
func ParseSource(b []byte) (SessionSource, error) {
	var w struct {
		Platform     json.RawMessage `json:"platform"`
		ChatID       json.RawMessage `json:"chat_id"`
		ChatType     json.RawMessage `json:"chat_type"`
		ChatName     json.RawMessage `json:"chat_name"`
		UserID       json.RawMessage `json:"user_id"`
		UserName     json.RawMessage `json:"user_name"`
		ThreadID     json.RawMessage `json:"thread_id"`
		ChatTopic    json.RawMessage `json:"chat_topic"`
		UserIDAlt    json.RawMessage `json:"user_id_alt"`
		ChatIDAlt    json.RawMessage `json:"chat_id_alt"`
		GuildID      json.RawMessage `json:"guild_id"`
		ParentChatID json.RawMessage `json:"parent_chat_id"`
		MessageID    json.RawMessage `json:"message_id"`
		ScopeID      json.RawMessage `json:"scope_id"`
	}
	if len(bytes.TrimSpace(b)) == 0 || bytes.TrimSpace(b)[0] != '{' {
		return SessionSource{}, fmt.Errorf("relay: source: not a JSON object")
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return SessionSource{}, fmt.Errorf("relay: source: not a JSON object: %w", err)
	}
	var s SessionSource
	fields := [...]struct {
		key string
		raw json.RawMessage
		dst *string
	}{
		{"platform", w.Platform, &s.Platform}, {"chat_id", w.ChatID, &s.ChatID}, {"chat_type", w.ChatType, &s.ChatType},
		{"chat_name", w.ChatName, &s.ChatName}, {"user_id", w.UserID, &s.UserID}, {"user_name", w.UserName, &s.UserName},
		{"thread_id", w.ThreadID, &s.ThreadID}, {"chat_topic", w.ChatTopic, &s.ChatTopic}, {"user_id_alt", w.UserIDAlt, &s.UserIDAlt},
		{"chat_id_alt", w.ChatIDAlt, &s.ChatIDAlt}, {"guild_id", w.GuildID, &s.GuildID}, {"parent_chat_id", w.ParentChatID, &s.ParentChatID},
		{"message_id", w.MessageID, &s.MessageID}, {"scope_id", w.ScopeID, &s.ScopeID},
	}
	for _, f := range fields {
		v := f.raw
		if len(v) == 0 || string(v) == "null" {
			continue
		}
		if v[0] != '"' {
			return SessionSource{}, fmt.Errorf("relay: source: %s is not a string", f.key)
		}
		if str, ok := plainString(v); ok {
			*f.dst = str
		} else if err := json.Unmarshal(v, f.dst); err != nil {
			return SessionSource{}, fmt.Errorf("relay: source: %s: %w", f.key, err)
		}
	}
	if len(w.Platform) == 0 || string(w.Platform) == "null" {
		return SessionSource{}, fmt.Errorf("relay: source: platform is missing")
	}
	if len(w.ChatType) == 0 {
		s.ChatType = ChatDM
	} else if string(w.ChatType) == "null" {
		return SessionSource{}, fmt.Errorf("relay: source: chat_type is null")
	}
	if normalizePlatform(s.Platform) == "" {
		return SessionSource{}, fmt.Errorf("relay: source: platform is blank")
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
// reply_to_message_id are null when empty; media_urls is always a list.
type MessageEvent struct {
	Text             string        `json:"text"`
	MessageType      MessageType   `json:"message_type"`
	Source           SessionSource `json:"source"`
	MessageID        string        `json:"-"`
	ReplyToMessageID string        `json:"-"`
	MediaURLs        []string      `json:"media_urls"`
}

type eventWire struct {
	Text             string         `json:"text"`
	MessageType      MessageType    `json:"message_type"`
	Source           *SessionSource `json:"source"`
	MessageID        *string        `json:"message_id"`
	ReplyToMessageID *string        `json:"reply_to_message_id"`
	MediaURLs        []string       `json:"media_urls"`
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
	*e = MessageEvent{Text: w.Text, MessageType: ParseMessageType(string(w.MessageType)), Source: *w.Source, MediaURLs: w.MediaURLs}
	if w.MessageID != nil {
		e.MessageID = *w.MessageID
	}
	if w.ReplyToMessageID != nil {
		e.ReplyToMessageID = *w.ReplyToMessageID
	}
	return nil
}
