package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
)

// The hand-written appenders below produce exactly the bytes encoding/json
// (with HTML escaping off) produced for the same values; encode_test.go
// proves it against the reflective encoders they replaced.

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

// appendMember appends a member's opening (`{"k":` or `,"k":`, written out
// by the caller) and v as a JSON string.
func appendMember(dst []byte, opening, v string) []byte {
	return contract.AppendJSONString(append(dst, opening...), v)
}

// appendNullableMember is appendMember with null for an empty v.
func appendNullableMember(dst []byte, opening, v string) []byte {
	dst = append(dst, opening...)
	if v == "" {
		return append(dst, "null"...)
	}
	return contract.AppendJSONString(dst, v)
}

// optional is a string member written only when its value is not empty.
type optional struct{ k, v string }

// appendOptional appends ,"k":v for each of ms whose value is not empty,
// in order.
func appendOptional(dst []byte, ms ...optional) []byte {
	for _, m := range ms {
		if m.v != "" {
			dst = appendKey(dst, m.k, false)
			dst = contract.AppendJSONString(dst, m.v)
		}
	}
	return dst
}

// appendArray appends opening (`,"k":[`, written out by the caller), the
// items comma-separated, each by appendItem, and the closing bracket.
func appendArray[T any](dst []byte, opening string, items []T, appendItem func([]byte, T) []byte) []byte {
	dst = append(dst, opening...)
	for i, item := range items {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendItem(dst, item)
	}
	return append(dst, ']')
}

// AppendJSON appends s's wire form (see MarshalJSON) to dst.
func (s SessionSource) AppendJSON(dst []byte) []byte {
	// platform and chat_type are never null: a null one cannot be keyed.
	dst = appendMember(dst, `{"platform":`, s.Platform)
	dst = appendNullableMember(dst, `,"chat_id":`, s.ChatID)
	dst = appendNullableMember(dst, `,"chat_name":`, s.ChatName)
	dst = appendMember(dst, `,"chat_type":`, s.ChatType)
	dst = appendNullableMember(dst, `,"user_id":`, s.UserID)
	dst = appendNullableMember(dst, `,"user_name":`, s.UserName)
	dst = appendNullableMember(dst, `,"thread_id":`, s.ThreadID)
	dst = appendNullableMember(dst, `,"chat_topic":`, s.ChatTopic)
	dst = append(dst, `,"is_bot":`...)
	dst = strconv.AppendBool(dst, s.IsBot)
	dst = append(dst, `,"message_is_edit":`...)
	dst = strconv.AppendBool(dst, s.MessageIsEdit)
	if s.OneToOneVerified {
		dst = append(dst, `,"one_to_one_verified":true`...)
	}
	scope := s.Scope()
	dst = appendOptional(dst,
		optional{"user_id_alt", s.UserIDAlt},
		optional{"chat_id_alt", s.ChatIDAlt},
		optional{"scope_id", scope},
		optional{"guild_id", scope},
		optional{"parent_chat_id", s.ParentChatID},
		optional{"message_id", s.MessageID},
		optional{"profile", s.Profile})
	if s.AutoThreadCreated {
		dst = append(dst, `,"auto_thread_created":true`...)
	}
	dst = appendOptional(dst,
		optional{"auto_thread_initial_name", s.AutoThreadInitialName},
		optional{"prospective_thread_id", s.ProspectiveThreadID},
		optional{"user_display_name", s.UserDisplayName},
		optional{"user_handle", s.UserHandle})
	return append(dst, '}')
}

// AppendJSON appends e's wire form (see MarshalJSON) to dst.
func (e MessageEvent) AppendJSON(dst []byte) []byte {
	dst = appendMember(dst, `{"text":`, e.Text)
	dst = appendMember(dst, `,"message_type":`, string(ParseMessageType(string(e.MessageType))))
	dst = append(dst, `,"source":`...)
	dst = e.Source.AppendJSON(dst)
	dst = appendNullableMember(dst, `,"message_id":`, e.MessageID)
	dst = appendNullableMember(dst, `,"reply_to_message_id":`, e.ReplyToMessageID)
	dst = appendArray(dst, `,"media_urls":[`, e.MediaURLs, contract.AppendJSONString)
	if r := e.ReplyTo; r != nil {
		dst = appendMember(dst, `,"reply_to":{"text":`, r.Text)
		dst = appendMember(dst, `,"author":`, r.Author)
		dst = append(dst, `,"is_own":`...)
		dst = strconv.AppendBool(dst, r.IsOwn)
		dst = append(dst, '}')
	}
	if len(e.Media) > 0 {
		dst = appendArray(dst, `,"media":[`, e.Media, appendMedia)
	}
	if len(e.Context) > 0 {
		dst = appendArray(dst, `,"context":[`, e.Context, appendContextMessage)
	}
	if p := e.PromptResponse; p != nil {
		dst = appendMember(dst, `,"prompt_response":{"prompt_id":`, p.PromptID)
		dst = appendMember(dst, `,"option_id":`, p.OptionID)
		dst = appendOptional(dst, optional{"label", p.Label}, optional{"prompt_message_id", p.PromptMessageID})
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendMedia appends m's wire form to dst.
func appendMedia(dst []byte, m Media) []byte {
	dst = appendMember(dst, `{"url":`, m.URL)
	dst = appendMember(dst, `,"mime":`, m.Mime)
	dst = appendMember(dst, `,"kind":`, m.Kind)
	dst = append(dst, `,"size":`...)
	dst = strconv.AppendInt(dst, m.Size, 10)
	dst = appendMember(dst, `,"filename":`, m.Filename)
	dst = appendMember(dst, `,"caption":`, m.Caption)
	return append(dst, '}')
}

// appendContextMessage appends c's wire form to dst.
func appendContextMessage(dst []byte, c ContextMessage) []byte {
	dst = appendMember(dst, `{"text":`, c.Text)
	dst = appendMember(dst, `,"source":{"user_name":`, c.Source.UserName)
	dst = appendMember(dst, `,"user_id":`, c.Source.UserID)
	return append(dst, '}', '}')
}

// appendJSON appends f's wire form (see MarshalJSON) to dst; on error dst
// is returned unchanged.
func (f Frame) appendJSON(dst []byte) ([]byte, error) {
	switch f.Type {
	case FrameHello:
		dst = appendMember(dst, `{"type":`, f.Type)
		dst = appendMember(dst, `,"platform":`, f.Platform)
		dst = appendMember(dst, `,"botId":`, f.BotID)
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
		dst = appendMember(dst, `{"type":`, f.Type)
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
		dst = appendMember(dst, `{"type":`, f.Type)
		dst = appendMember(dst, `,"requestId":`, f.RequestID)
		dst = appendMember(dst, `,"action":{"op":`, a.Op)
		dst = appendOptional(dst,
			optional{"chat_id", a.ChatID}, optional{"content", a.Content}, optional{"reply_to", a.ReplyTo},
			optional{"message_id", a.MessageID}, optional{"session_key", a.SessionKey}, optional{"kind", a.Kind})
		dst = append(dst, '}')
		dst = appendOptional(dst, optional{"platform", f.Platform}, optional{"botId", f.BotID})
		return append(dst, '}'), nil
	case FrameOutboundResult:
		r := Result{}
		if f.Result != nil {
			r = *f.Result
		}
		dst = appendMember(dst, `{"type":`, f.Type)
		dst = appendMember(dst, `,"requestId":`, f.RequestID)
		if r.Success {
			dst = append(dst, `,"result":{"success":true`...)
		} else {
			dst = append(dst, `,"result":{"success":false`...)
		}
		dst = appendOptional(dst,
			optional{"message_id", r.MessageID}, optional{"error", r.Error}, optional{"name", r.Name},
			optional{"type", r.Type}, optional{"code", r.Code}, optional{"thread_id", r.ThreadID})
		if r.ChatInfo != nil {
			dst = appendMember(dst, `,"chat_info":{"name":`, r.ChatInfo.Name)
			dst = appendMember(dst, `,"type":`, r.ChatInfo.Type)
			dst = append(dst, '}')
		}
		return append(dst, '}', '}'), nil
	case FrameInterrupt:
		dst = appendMember(dst, `{"type":`, f.Type)
		dst = appendMember(dst, `,"session_key":`, f.SessionKey)
		dst = append(dst, `,"reason":`...)
		if f.Reason == nil {
			dst = append(dst, "null"...)
		} else {
			dst = contract.AppendJSONString(dst, *f.Reason)
		}
		return append(dst, '}'), nil
	case FrameInterruptInbound:
		dst = appendMember(dst, `{"type":`, f.Type)
		dst = appendMember(dst, `,"session_key":`, f.SessionKey)
		dst = appendMember(dst, `,"chat_id":`, f.ChatID)
		return append(dst, '}'), nil
	case FrameInbound:
		if f.Event == nil {
			return dst, fmt.Errorf("relay: inbound frame without event")
		}
		dst = appendMember(dst, `{"type":`, f.Type)
		dst = appendOptional(dst, optional{"platform", f.Platform}, optional{"botId", f.BotID})
		dst = append(dst, `,"event":`...)
		dst = f.Event.AppendJSON(dst)
		dst = appendOptional(dst, optional{"bufferId", f.BufferID})
		return append(dst, '}'), nil
	case FrameInboundAck:
		dst = appendMember(dst, `{"type":`, f.Type)
		dst = appendMember(dst, `,"bufferId":`, f.BufferID)
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
