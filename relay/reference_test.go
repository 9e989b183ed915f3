package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The reflective encoders the hand-written appenders replaced, kept
// verbatim (but for their names) as the reference the differential tests
// compare against.

type refSource SessionSource

func (s refSource) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	put := func(k, v string, always bool) {
		if v == "" && !always {
			return
		}
		str := k == "platform" || k == "chat_type" // never null: a null one cannot be keyed
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.WriteByte('"')
		b.WriteString(k)
		b.WriteString(`":`)
		if v == "" && !str {
			b.WriteString("null")
			return
		}
		refWriteString(&b, v)
	}
	put("platform", s.Platform, true)
	put("chat_id", s.ChatID, true)
	put("chat_name", s.ChatName, true)
	put("chat_type", s.ChatType, true)
	put("user_id", s.UserID, true)
	put("user_name", s.UserName, true)
	put("thread_id", s.ThreadID, true)
	put("chat_topic", s.ChatTopic, true)
	fmt.Fprintf(&b, `,"is_bot":%v,"message_is_edit":%v`, s.IsBot, s.MessageIsEdit)
	if s.OneToOneVerified {
		b.WriteString(`,"one_to_one_verified":true`)
	}
	put("user_id_alt", s.UserIDAlt, false)
	put("chat_id_alt", s.ChatIDAlt, false)
	scope := s.ScopeID
	if scope == "" {
		scope = s.GuildID
	}
	put("scope_id", scope, false)
	put("guild_id", scope, false)
	put("parent_chat_id", s.ParentChatID, false)
	put("message_id", s.MessageID, false)
	put("profile", s.Profile, false)
	if s.AutoThreadCreated {
		b.WriteString(`,"auto_thread_created":true`)
	}
	put("auto_thread_initial_name", s.AutoThreadInitialName, false)
	put("prospective_thread_id", s.ProspectiveThreadID, false)
	put("user_display_name", s.UserDisplayName, false)
	put("user_handle", s.UserHandle, false)
	b.WriteByte('}')
	return b.Bytes(), nil
}

func refWriteString(b *bytes.Buffer, s string) {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Write(bytes.TrimRight(tmp.Bytes(), "\n"))
}

type refEvent MessageEvent

type refEventWire struct {
	Text             string           `json:"text"`
	MessageType      MessageType      `json:"message_type"`
	Source           *refSource       `json:"source"`
	MessageID        *string          `json:"message_id"`
	ReplyToMessageID *string          `json:"reply_to_message_id"`
	MediaURLs        []string         `json:"media_urls"`
	ReplyTo          *ReplyContext    `json:"reply_to,omitempty"`
	Media            []Media          `json:"media,omitempty"`
	Context          []ContextMessage `json:"context,omitempty"`
	PromptResponse   *PromptResponse  `json:"prompt_response,omitempty"`
}

func refStrPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (e refEvent) MarshalJSON() ([]byte, error) {
	src := refSource(e.Source)
	w := refEventWire{
		Text: e.Text, MessageType: ParseMessageType(string(e.MessageType)), Source: &src,
		MessageID: refStrPtr(e.MessageID), ReplyToMessageID: refStrPtr(e.ReplyToMessageID),
		MediaURLs: e.MediaURLs, ReplyTo: e.ReplyTo, Media: e.Media, Context: e.Context, PromptResponse: e.PromptResponse,
	}
	if w.MediaURLs == nil {
		w.MediaURLs = []string{}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

func refFrameJSON(f Frame) ([]byte, error) {
	var v any
	switch f.Type {
	case FrameHello:
		v = struct {
			Type            string          `json:"type"`
			Platform        string          `json:"platform"`
			BotID           string          `json:"botId"`
			CommandManifest json.RawMessage `json:"command_manifest,omitempty"`
		}{f.Type, f.Platform, f.BotID, f.CommandManifest}
	case FrameGoingIdle, FrameGoingIdleAck:
		v = struct {
			Type string `json:"type"`
		}{f.Type}
	case FrameDescriptor:
		if f.Descriptor == nil {
			return nil, fmt.Errorf("relay: descriptor frame without descriptor")
		}
		v = struct {
			Type       string                `json:"type"`
			Descriptor *CapabilityDescriptor `json:"descriptor"`
		}{f.Type, f.Descriptor}
	case FrameOutbound:
		if f.Action == nil {
			return nil, fmt.Errorf("relay: outbound frame without action")
		}
		v = struct {
			Type      string  `json:"type"`
			RequestID string  `json:"requestId"`
			Action    *Action `json:"action"`
			Platform  string  `json:"platform,omitempty"`
			BotID     string  `json:"botId,omitempty"`
		}{f.Type, f.RequestID, f.Action, f.Platform, f.BotID}
	case FrameOutboundResult:
		r := Result{}
		if f.Result != nil {
			r = *f.Result
		}
		v = struct {
			Type      string `json:"type"`
			RequestID string `json:"requestId"`
			Result    Result `json:"result"`
		}{f.Type, f.RequestID, r}
	case FrameInterrupt:
		v = struct {
			Type       string  `json:"type"`
			SessionKey string  `json:"session_key"`
			Reason     *string `json:"reason"`
		}{f.Type, f.SessionKey, f.Reason}
	case FrameInterruptInbound:
		v = struct {
			Type       string `json:"type"`
			SessionKey string `json:"session_key"`
			ChatID     string `json:"chat_id"`
		}{f.Type, f.SessionKey, f.ChatID}
	case FrameInbound:
		if f.Event == nil {
			return nil, fmt.Errorf("relay: inbound frame without event")
		}
		ev := refEvent(*f.Event)
		v = struct {
			Type     string    `json:"type"`
			Platform string    `json:"platform,omitempty"`
			BotID    string    `json:"botId,omitempty"`
			Event    *refEvent `json:"event"`
			BufferID string    `json:"bufferId,omitempty"`
		}{f.Type, f.Platform, f.BotID, &ev, f.BufferID}
	case FrameInboundAck:
		v = struct {
			Type     string `json:"type"`
			BufferID string `json:"bufferId"`
		}{f.Type, f.BufferID}
	default:
		return nil, fmt.Errorf("relay: unknown frame type %q", f.Type)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// refEventIn decodes through the reflective event decoder only.
type refEventIn MessageEvent

func (e *refEventIn) UnmarshalJSON(b []byte) error {
	return (*MessageEvent)(e).unmarshalReflect(b)
}

// refFrameWire is frameWire with the reflective event decoder.
type refFrameWire struct {
	Type       string                `json:"type"`
	Platform   string                `json:"platform,omitempty"`
	BotID      string                `json:"botId,omitempty"`
	RequestID  string                `json:"requestId,omitempty"`
	Action     *Action               `json:"action,omitempty"`
	Result     *Result               `json:"result,omitempty"`
	SessionKey string                `json:"session_key,omitempty"`
	Reason     json.RawMessage       `json:"reason,omitempty"`
	ChatID     string                `json:"chat_id,omitempty"`
	Descriptor *CapabilityDescriptor `json:"descriptor,omitempty"`
	Event      *refEventIn           `json:"event,omitempty"`
	BufferID   json.RawMessage       `json:"bufferId,omitempty"`

	CommandManifest json.RawMessage `json:"command_manifest,omitempty"`
}

// refParseFrame is ParseFrame as it was before parseFrameFast: encoding/json
// all the way down.
func refParseFrame(b []byte) (Frame, error) {
	var w refFrameWire
	var f Frame
	if err := json.Unmarshal(b, &w); err != nil {
		return f, fmt.Errorf("relay: frame: %w", err)
	}
	if w.Type == "" {
		return f, fmt.Errorf("relay: frame: no type")
	}
	f = Frame{Type: w.Type}
	switch w.Type {
	case FrameHello:
		f.Platform, f.BotID = w.Platform, w.BotID
		if len(w.CommandManifest) > 0 && string(w.CommandManifest) != "null" {
			f.CommandManifest = w.CommandManifest
		}
	case FrameDescriptor:
		if w.Descriptor == nil {
			return f, fmt.Errorf("relay: frame: descriptor frame without descriptor")
		}
		d := w.Descriptor.Normalize()
		f.Descriptor = &d
	case FrameOutbound:
		if w.Action == nil || w.Action.Op == "" {
			return f, fmt.Errorf("relay: frame: outbound frame without action.op")
		}
		f.RequestID, f.Action, f.Platform, f.BotID = w.RequestID, w.Action, w.Platform, w.BotID
	case FrameOutboundResult:
		if w.Result == nil {
			return f, fmt.Errorf("relay: frame: outbound_result frame without result")
		}
		f.RequestID, f.Result = w.RequestID, w.Result
	case FrameInterrupt:
		f.SessionKey = w.SessionKey
		if len(w.Reason) > 0 && string(w.Reason) != "null" {
			var s string
			if err := json.Unmarshal(w.Reason, &s); err != nil {
				return f, fmt.Errorf("relay: frame: interrupt reason is not a string")
			}
			f.Reason = &s
		}
	case FrameInterruptInbound:
		f.SessionKey, f.ChatID = w.SessionKey, w.ChatID
	case FrameInbound:
		if w.Event == nil {
			return f, fmt.Errorf("relay: frame: inbound frame without event")
		}
		f.Event, f.BufferID = (*MessageEvent)(w.Event), bufferID(w.BufferID)
		f.Platform, f.BotID = w.Platform, w.BotID
	case FrameInboundAck:
		f.BufferID = bufferID(w.BufferID)
	}
	return f, nil
}
