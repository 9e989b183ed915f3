package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"
)

// The hand-written appenders below produce exactly the bytes encoding/json
// (with HTML escaping off) produced for the same values; encode_test.go
// proves it against the reflective encoders they replaced.

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does
// without HTML escaping: \" \\ \b \f \n \r \t, \u00XX for other control
// bytes, \ufffd for each invalid UTF-8 byte, \u2028 and \u2029 escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendKey appends "k": (k is a constant without characters to escape),
// preceded by a comma unless it opens the object.
func appendKey(dst []byte, k string, first bool) []byte {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, k...)
	return append(dst, '"', ':')
}

// appendNullable appends s as a string, or null when it is empty.
func appendNullable(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendString(dst, s)
}

// AppendJSON appends s's wire form (see MarshalJSON) to dst.
func (s SessionSource) AppendJSON(dst []byte) []byte {
	// platform and chat_type are never null: a null one cannot be keyed.
	dst = append(dst, `{"platform":`...)
	dst = appendString(dst, s.Platform)
	dst = append(dst, `,"chat_id":`...)
	dst = appendNullable(dst, s.ChatID)
	dst = append(dst, `,"chat_name":`...)
	dst = appendNullable(dst, s.ChatName)
	dst = append(dst, `,"chat_type":`...)
	dst = appendString(dst, s.ChatType)
	dst = append(dst, `,"user_id":`...)
	dst = appendNullable(dst, s.UserID)
	dst = append(dst, `,"user_name":`...)
	dst = appendNullable(dst, s.UserName)
	dst = append(dst, `,"thread_id":`...)
	dst = appendNullable(dst, s.ThreadID)
	dst = append(dst, `,"chat_topic":`...)
	dst = appendNullable(dst, s.ChatTopic)
	for _, o := range [...]struct{ k, v string }{
		{"user_id_alt", s.UserIDAlt}, {"chat_id_alt", s.ChatIDAlt}, {"scope_id", s.ScopeID}, {"guild_id", s.GuildID},
		{"parent_chat_id", s.ParentChatID}, {"message_id", s.MessageID},
	} {
		if o.v != "" {
			dst = appendKey(dst, o.k, false)
			dst = appendString(dst, o.v)
		}
	}
	return append(dst, '}')
}

// AppendJSON appends e's wire form (see MarshalJSON) to dst.
func (e MessageEvent) AppendJSON(dst []byte) []byte {
	dst = append(dst, `{"text":`...)
	dst = appendString(dst, e.Text)
	dst = append(dst, `,"message_type":`...)
	dst = appendString(dst, string(ParseMessageType(string(e.MessageType))))
	dst = append(dst, `,"source":`...)
	dst = e.Source.AppendJSON(dst)
	dst = append(dst, `,"message_id":`...)
	dst = appendNullable(dst, e.MessageID)
	dst = append(dst, `,"reply_to_message_id":`...)
	dst = appendNullable(dst, e.ReplyToMessageID)
	dst = append(dst, `,"media_urls":[`...)
	for i, u := range e.MediaURLs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, u)
	}
	return append(dst, ']', '}')
}

// appendJSON appends f's wire form (see MarshalJSON) to dst; on error dst
// is returned unchanged.
func (f Frame) appendJSON(dst []byte) ([]byte, error) {
	switch f.Type {
	case FrameHello:
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
		dst = append(dst, `,"platform":`...)
		dst = appendString(dst, f.Platform)
		dst = append(dst, `,"botId":`...)
		dst = appendString(dst, f.BotID)
		return append(dst, '}'), nil
	case FrameDescriptor:
		if f.Descriptor == nil {
			return dst, fmt.Errorf("relay: descriptor frame without descriptor")
		}
		return appendReflect(dst, struct {
			Type       string                `json:"type"`
			Descriptor *CapabilityDescriptor `json:"descriptor"`
		}{f.Type, f.Descriptor})
	case FrameOutbound:
		if f.Action == nil {
			return dst, fmt.Errorf("relay: outbound frame without action")
		}
		if f.Action.Metadata != nil {
			// Metadata is arbitrary JSON: leave it to encoding/json.
			return appendReflect(dst, struct {
				Type      string  `json:"type"`
				RequestID string  `json:"requestId"`
				Action    *Action `json:"action"`
				Platform  string  `json:"platform,omitempty"`
				BotID     string  `json:"botId,omitempty"`
			}{f.Type, f.RequestID, f.Action, f.Platform, f.BotID})
		}
		a := f.Action
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
		dst = append(dst, `,"requestId":`...)
		dst = appendString(dst, f.RequestID)
		dst = append(dst, `,"action":{"op":`...)
		dst = appendString(dst, a.Op)
		for _, o := range [...]struct{ k, v string }{
			{"chat_id", a.ChatID}, {"content", a.Content}, {"reply_to", a.ReplyTo}, {"message_id", a.MessageID},
			{"session_key", a.SessionKey}, {"kind", a.Kind},
		} {
			if o.v != "" {
				dst = appendKey(dst, o.k, false)
				dst = appendString(dst, o.v)
			}
		}
		dst = append(dst, '}')
		if f.Platform != "" {
			dst = append(dst, `,"platform":`...)
			dst = appendString(dst, f.Platform)
		}
		if f.BotID != "" {
			dst = append(dst, `,"botId":`...)
			dst = appendString(dst, f.BotID)
		}
		return append(dst, '}'), nil
	case FrameOutboundResult:
		r := Result{}
		if f.Result != nil {
			r = *f.Result
		}
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
		dst = append(dst, `,"requestId":`...)
		dst = appendString(dst, f.RequestID)
		if r.Success {
			dst = append(dst, `,"result":{"success":true`...)
		} else {
			dst = append(dst, `,"result":{"success":false`...)
		}
		for _, o := range [...]struct{ k, v string }{
			{"message_id", r.MessageID}, {"error", r.Error}, {"name", r.Name}, {"type", r.Type},
		} {
			if o.v != "" {
				dst = appendKey(dst, o.k, false)
				dst = appendString(dst, o.v)
			}
		}
		return append(dst, '}', '}'), nil
	case FrameInterrupt:
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
		dst = append(dst, `,"session_key":`...)
		dst = appendString(dst, f.SessionKey)
		dst = append(dst, `,"reason":`...)
		if f.Reason == nil {
			dst = append(dst, "null"...)
		} else {
			dst = appendString(dst, *f.Reason)
		}
		return append(dst, '}'), nil
	case FrameInterruptInbound:
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
		dst = append(dst, `,"session_key":`...)
		dst = appendString(dst, f.SessionKey)
		dst = append(dst, `,"chat_id":`...)
		dst = appendString(dst, f.ChatID)
		return append(dst, '}'), nil
	case FrameInbound:
		if f.Event == nil {
			return dst, fmt.Errorf("relay: inbound frame without event")
		}
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
		dst = append(dst, `,"event":`...)
		dst = f.Event.AppendJSON(dst)
		if f.BufferID != "" {
			dst = append(dst, `,"bufferId":`...)
			dst = appendString(dst, f.BufferID)
		}
		return append(dst, '}'), nil
	case FrameInboundAck:
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
		dst = append(dst, `,"bufferId":`...)
		dst = appendString(dst, f.BufferID)
		return append(dst, '}'), nil
	}
	return dst, fmt.Errorf("relay: unknown frame type %q", f.Type)
}

var encBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// appendReflect appends v's encoding/json form (HTML escaping off, no
// trailing newline) to dst, for the rare frames with arbitrary JSON.
func appendReflect(dst []byte, v any) ([]byte, error) {
	b := encBufs.Get().(*bytes.Buffer)
	defer func() {
		if b.Cap() <= 64<<10 {
			b.Reset()
			encBufs.Put(b)
		}
	}()
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return dst, err
	}
	return append(dst, bytes.TrimRight(b.Bytes(), "\n")...), nil
}
