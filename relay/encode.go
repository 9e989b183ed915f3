package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
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
	opt := func(k, v string) {
		if v != "" {
			dst = appendKey(dst, k, false)
			dst = appendString(dst, v)
		}
	}
	opt("user_id_alt", s.UserIDAlt)
	opt("chat_id_alt", s.ChatIDAlt)
	scope := s.Scope()
	opt("scope_id", scope)
	opt("guild_id", scope)
	opt("parent_chat_id", s.ParentChatID)
	opt("message_id", s.MessageID)
	opt("profile", s.Profile)
	if s.AutoThreadCreated {
		dst = append(dst, `,"auto_thread_created":true`...)
	}
	opt("auto_thread_initial_name", s.AutoThreadInitialName)
	opt("prospective_thread_id", s.ProspectiveThreadID)
	opt("user_display_name", s.UserDisplayName)
	opt("user_handle", s.UserHandle)
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
	dst = append(dst, ']')
	if r := e.ReplyTo; r != nil {
		dst = append(dst, `,"reply_to":{"text":`...)
		dst = appendString(dst, r.Text)
		dst = append(dst, `,"author":`...)
		dst = appendString(dst, r.Author)
		dst = append(dst, `,"is_own":`...)
		dst = strconv.AppendBool(dst, r.IsOwn)
		dst = append(dst, '}')
	}
	if len(e.Media) > 0 {
		dst = append(dst, `,"media":[`...)
		for i, m := range e.Media {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"url":`...)
			dst = appendString(dst, m.URL)
			dst = append(dst, `,"mime":`...)
			dst = appendString(dst, m.Mime)
			dst = append(dst, `,"kind":`...)
			dst = appendString(dst, m.Kind)
			dst = append(dst, `,"size":`...)
			dst = strconv.AppendInt(dst, m.Size, 10)
			dst = append(dst, `,"filename":`...)
			dst = appendString(dst, m.Filename)
			dst = append(dst, `,"caption":`...)
			dst = appendString(dst, m.Caption)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(e.Context) > 0 {
		dst = append(dst, `,"context":[`...)
		for i, c := range e.Context {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"text":`...)
			dst = appendString(dst, c.Text)
			dst = append(dst, `,"source":{"user_name":`...)
			dst = appendString(dst, c.Source.UserName)
			dst = append(dst, `,"user_id":`...)
			dst = appendString(dst, c.Source.UserID)
			dst = append(dst, '}', '}')
		}
		dst = append(dst, ']')
	}
	if p := e.PromptResponse; p != nil {
		dst = append(dst, `,"prompt_response":{"prompt_id":`...)
		dst = appendString(dst, p.PromptID)
		dst = append(dst, `,"option_id":`...)
		dst = appendString(dst, p.OptionID)
		opt := func(k, v string) {
			if v != "" {
				dst = appendKey(dst, k, false)
				dst = appendString(dst, v)
			}
		}
		opt("label", p.Label)
		opt("prompt_message_id", p.PromptMessageID)
		dst = append(dst, '}')
	}
	return append(dst, '}')
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
		if len(f.CommandManifest) > 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, f.CommandManifest); err != nil {
				return dst[:len(dst):len(dst)], fmt.Errorf("relay: hello: command_manifest: %w", err)
			}
			dst = append(dst, `,"command_manifest":`...)
			dst = append(dst, buf.Bytes()...)
		}
		return append(dst, '}'), nil
	case FrameGoingIdle, FrameGoingIdleAck:
		dst = append(dst, `{"type":`...)
		dst = appendString(dst, f.Type)
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
		if !f.Action.plain() {
			// Metadata is arbitrary JSON, the newer ops rare: leave them to encoding/json.
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
			{"code", r.Code}, {"thread_id", r.ThreadID},
		} {
			if o.v != "" {
				dst = appendKey(dst, o.k, false)
				dst = appendString(dst, o.v)
			}
		}
		if r.ChatInfo != nil {
			dst = append(dst, `,"chat_info":{"name":`...)
			dst = appendString(dst, r.ChatInfo.Name)
			dst = append(dst, `,"type":`...)
			dst = appendString(dst, r.ChatInfo.Type)
			dst = append(dst, '}')
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
