package relay

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Frame types of RELAY.md §1.
const (
	// gateway -> connector
	FrameHello      = "hello"
	FrameOutbound   = "outbound"
	FrameInterrupt  = "interrupt"
	FrameInboundAck = "inbound_ack"
	FrameGoingIdle  = "going_idle"
	// connector -> gateway
	FrameDescriptor       = "descriptor"
	FrameOutboundResult   = "outbound_result"
	FrameInbound          = "inbound"
	FrameInterruptInbound = "interrupt_inbound"
	FrameGoingIdleAck     = "going_idle_ack"
)

// Outbound ops.
const (
	OpSend        = "send"
	OpEdit        = "edit"
	OpTyping      = "typing"
	OpFollowUp    = "follow_up"
	OpGetChatInfo = "get_chat_info"
	OpReact       = "react"
	OpDelete      = "delete"
	OpDraft       = "draft"
	OpSendMedia   = "send_media"
	OpPrompt      = "prompt"
	OpThreadMake  = "thread_create"
	OpThreadName  = "thread_rename"
)

// CodeEgressDeclined is the result code of a refusal the gateway must not
// work around with another op (HERMES-RELAY.md §2.5).
const CodeEgressDeclined = "egress_declined"

// Declined returns the structured refusal the gateway recognises.
func Declined(platform string) Result {
	return Result{Success: false, Code: CodeEgressDeclined,
		Error: platform + " egress declined: target is not an approved destination for this connection"}
}

// PlatformRelay is the platform of a gateway's default identity (hello
// {"platform":"relay","botId":""}) and of sources whose platform the
// gateway does not know.
const PlatformRelay = "relay"

// KindDiscordInteractionToken is the capability kind of a Discord
// interaction token (the only kind so far).
const KindDiscordInteractionToken = "discord.interaction_token"

// Action is the body of an outbound frame (HERMES-RELAY.md §2.5). Which
// fields matter depends on Op: send {chat_id, content, reply_to, metadata},
// edit {chat_id, message_id, content}, typing {chat_id, content?},
// follow_up {session_key, kind, content}, get_chat_info {chat_id}, react
// {chat_id, message_id, emoji, remove}, delete {chat_id, message_id}, draft
// {chat_id, draft_id, content, final}, send_media {chat_id, media_kind,
// source_url, content, filename}, prompt {chat_id, content, prompt_kind,
// prompt_id, options}, thread_create {chat_id, thread_name}, thread_rename
// {chat_id, message_id, thread_name, only_if_*}.
type Action struct {
	Op         string         `json:"op"`
	ChatID     string         `json:"chat_id,omitempty"`
	Content    string         `json:"content,omitempty"`
	ReplyTo    string         `json:"reply_to,omitempty"`
	MessageID  string         `json:"message_id,omitempty"`
	SessionKey string         `json:"session_key,omitempty"`
	Kind       string         `json:"kind,omitempty"`
	Metadata   map[string]any `json:"metadata,omitempty"`

	Emoji                  string         `json:"emoji,omitempty"`
	Remove                 bool           `json:"remove,omitempty"`
	DraftID                *int64         `json:"draft_id,omitempty"`
	Final                  bool           `json:"final,omitempty"`
	MediaKind              string         `json:"media_kind,omitempty"`
	SourceURL              string         `json:"source_url,omitempty"`
	Filename               string         `json:"filename,omitempty"`
	PromptKind             string         `json:"prompt_kind,omitempty"`
	PromptID               string         `json:"prompt_id,omitempty"`
	Options                []PromptOption `json:"options,omitempty"`
	ThreadName             string         `json:"thread_name,omitempty"`
	OnlyIfConnectorCreated bool           `json:"only_if_connector_created,omitempty"`
	OnlyIfCurrentName      string         `json:"only_if_current_name,omitempty"`
}

// plain reports whether a has only the fields the hand-written encoder
// writes (op and the six strings of the first ops).
func (a *Action) plain() bool {
	return a.Metadata == nil && a.Emoji == "" && !a.Remove && a.DraftID == nil && !a.Final && a.MediaKind == "" &&
		a.SourceURL == "" && a.Filename == "" && a.PromptKind == "" && a.PromptID == "" && a.Options == nil &&
		a.ThreadName == "" && !a.OnlyIfConnectorCreated && a.OnlyIfCurrentName == ""
}

// PromptOption is one button of a prompt.
type PromptOption struct {
	ID    string `json:"id"`
	Label string `json:"label"`
	Style string `json:"style,omitempty"`
}

// Result is the body of an outbound_result frame. Name and Type (and
// ChatInfo, the same) are set by get_chat_info; Code by a structured refusal
// (CodeEgressDeclined); ThreadID by thread_create.
type Result struct {
	Success   bool      `json:"success"`
	MessageID string    `json:"message_id,omitempty"`
	Error     string    `json:"error,omitempty"`
	Name      string    `json:"name,omitempty"`
	Type      string    `json:"type,omitempty"`
	Code      string    `json:"code,omitempty"`
	ThreadID  string    `json:"thread_id,omitempty"`
	ChatInfo  *ChatInfo `json:"chat_info,omitempty"`
}

// ChatInfo is get_chat_info's answer.
type ChatInfo struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// The failure results the gateway produces itself (RELAY.md §1).
const (
	ErrTextTimeout      = "relay outbound timed out"
	ErrTextNotConnected = "relay transport not connected"
)

// Failure returns a failed Result with msg.
func Failure(msg string) Result { return Result{Success: false, Error: msg} }

// Frame is one relay frame. Type selects which fields are on the wire:
//
//	hello             platform, botId, command_manifest (Discord only)
//	going_idle        (nothing)
//	going_idle_ack    (nothing)
//	descriptor        descriptor
//	outbound          requestId, action (platform, botId optional: which hello it is for)
//	outbound_result   requestId, result
//	interrupt         session_key, reason (string or null)
//	interrupt_inbound session_key, chat_id
//	inbound           event, bufferId?, platform and botId (the identity that received it)
//	inbound_ack       bufferId
//
// Frames of other types decode with only Type set, so readers can ignore them.
type Frame struct {
	Type       string
	Platform   string
	BotID      string
	RequestID  string
	Action     *Action
	Result     *Result
	SessionKey string
	Reason     *string
	ChatID     string
	Descriptor *CapabilityDescriptor
	Event      *MessageEvent
	BufferID   string
	// CommandManifest is a Discord hello's slash commands, as sent.
	CommandManifest json.RawMessage
}

type frameWire struct {
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
	Event      *MessageEvent         `json:"event,omitempty"`
	BufferID   json.RawMessage       `json:"bufferId,omitempty"`

	CommandManifest json.RawMessage `json:"command_manifest,omitempty"`
}

// MarshalJSON writes exactly the keys of f's type.
func (f Frame) MarshalJSON() ([]byte, error) {
	return f.appendJSON(nil)
}

// UnmarshalJSON reads any frame; a frame of an unknown type keeps only Type.
func (f *Frame) UnmarshalJSON(b []byte) error {
	if g, ok := parseFrameFast(b); ok {
		*f = g
		return nil
	}
	return f.unmarshalReflect(b)
}

// unmarshalReflect is UnmarshalJSON through encoding/json, for every frame
// parseFrameFast declines.
func (f *Frame) unmarshalReflect(b []byte) error {
	var w frameWire
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("relay: frame: %w", err)
	}
	if w.Type == "" {
		return fmt.Errorf("relay: frame: no type")
	}
	*f = Frame{Type: w.Type}
	switch w.Type {
	case FrameHello:
		f.Platform, f.BotID = w.Platform, w.BotID
		if len(w.CommandManifest) > 0 && string(w.CommandManifest) != "null" {
			f.CommandManifest = w.CommandManifest
		}
	case FrameDescriptor:
		if w.Descriptor == nil {
			return fmt.Errorf("relay: frame: descriptor frame without descriptor")
		}
		d := w.Descriptor.Normalize()
		f.Descriptor = &d
	case FrameOutbound:
		if w.Action == nil || w.Action.Op == "" {
			return fmt.Errorf("relay: frame: outbound frame without action.op")
		}
		f.RequestID, f.Action, f.Platform, f.BotID = w.RequestID, w.Action, w.Platform, w.BotID
	case FrameOutboundResult:
		if w.Result == nil {
			return fmt.Errorf("relay: frame: outbound_result frame without result")
		}
		f.RequestID, f.Result = w.RequestID, w.Result
	case FrameInterrupt:
		f.SessionKey = w.SessionKey
		if len(w.Reason) > 0 && string(w.Reason) != "null" {
			var s string
			if err := json.Unmarshal(w.Reason, &s); err != nil {
				return fmt.Errorf("relay: frame: interrupt reason is not a string")
			}
			f.Reason = &s
		}
	case FrameInterruptInbound:
		f.SessionKey, f.ChatID = w.SessionKey, w.ChatID
	case FrameInbound:
		if w.Event == nil {
			return fmt.Errorf("relay: frame: inbound frame without event")
		}
		f.Event, f.Platform, f.BotID = w.Event, w.Platform, w.BotID
		f.BufferID = bufferID(w.BufferID)
	case FrameInboundAck:
		f.BufferID = bufferID(w.BufferID)
	}
	return nil
}

// bufferID reads a bufferId as the gateway acknowledges it: a string as
// is, any other JSON value (a number) as its text, null as "".
func bufferID(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Known reports whether f's type is one of RELAY.md §1.
func (f Frame) Known() bool {
	switch f.Type {
	case FrameHello, FrameOutbound, FrameInterrupt, FrameInboundAck,
		FrameDescriptor, FrameOutboundResult, FrameInbound, FrameInterruptInbound, FrameGoingIdle, FrameGoingIdleAck:
		return true
	}
	return false
}

// AppendFrame appends f's JSON and a newline to dst.
func AppendFrame(dst []byte, f Frame) ([]byte, error) {
	n := len(dst)
	dst, err := f.appendJSON(dst)
	if err != nil {
		return dst[:n], err
	}
	return append(dst, '\n'), nil
}

// JoinFrames encodes several frames into one newline-delimited message.
func JoinFrames(fs ...Frame) ([]byte, error) {
	var out []byte
	for _, f := range fs {
		var err error
		if out, err = AppendFrame(out, f); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ParseFrame decodes one frame (without its newline).
func ParseFrame(b []byte) (Frame, error) {
	var f Frame
	err := f.UnmarshalJSON(b)
	return f, err
}

// MaxFrameBytes bounds one frame; a longer line is dropped as malformed.
const MaxFrameBytes = 4 << 20

// Splitter reassembles frames from WebSocket messages: a message may hold
// part of a frame or several frames. Blank lines are ignored and malformed
// lines reported to OnMalformed and skipped. A Splitter is not safe for
// concurrent use.
type Splitter struct {
	// OnMalformed, if set, is called with each skipped line (truncated to
	// 200 bytes) and the reason.
	OnMalformed func(line []byte, err error)
	buf         []byte
	skipping    bool // dropping the rest of an over-long line
}

// Feed adds one message's bytes and calls fn with every complete frame, in
// order, including frames of unknown types (check Known).
func (s *Splitter) Feed(msg []byte, fn func(Frame)) {
	for len(msg) > 0 {
		i := bytes.IndexByte(msg, '\n')
		if i < 0 {
			if s.skipping {
				return
			}
			s.buf = append(s.buf, msg...)
			if len(s.buf) > MaxFrameBytes {
				s.malformed(s.buf, fmt.Errorf("relay: frame longer than %d bytes", MaxFrameBytes))
				s.buf = s.buf[:0]
				s.skipping = true
			}
			return
		}
		line := msg[:i]
		msg = msg[i+1:]
		if s.skipping {
			s.skipping = false
			continue
		}
		if len(s.buf) > 0 {
			s.buf = append(s.buf, line...)
			line = s.buf
		}
		s.line(line, fn)
		s.buf = s.buf[:0]
	}
}

// Pending reports how many bytes of an unfinished frame are buffered.
func (s *Splitter) Pending() int { return len(s.buf) }

func (s *Splitter) line(line []byte, fn func(Frame)) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	if len(line) > MaxFrameBytes {
		s.malformed(line, fmt.Errorf("relay: frame longer than %d bytes", MaxFrameBytes))
		return
	}
	f, err := ParseFrame(line)
	if err != nil {
		s.malformed(line, err)
		return
	}
	fn(f)
}

func (s *Splitter) malformed(line []byte, err error) {
	if s.OnMalformed == nil {
		return
	}
	if len(line) > 200 {
		line = line[:200]
	}
	s.OnMalformed(line, err)
}
