package relay

import (
	"encoding/json"
	"fmt"
)

// LenUnit says how a platform measures message length.
type LenUnit string

// Length units of the descriptor.
const (
	LenChars LenUnit = "chars" // Unicode code points
	LenUTF16 LenUnit = "utf16" // UTF-16 code units (Telegram)
)

// DefaultMaxMessageLength is what a max_message_length of 0 or less means.
const DefaultMaxMessageLength = 4096

// DefaultEmoji is the descriptor's emoji when none is sent (🔌).
const DefaultEmoji = "\U0001f50c"

// CapabilityDescriptor is the handshake payload: which platform a connector
// fronts and what it can do. Unknown fields are ignored when decoding;
// missing optional ones take their defaults (see Normalize).
type CapabilityDescriptor struct {
	ContractVersion              int     `json:"contract_version"`
	Platform                     string  `json:"platform"`
	Label                        string  `json:"label"`
	MaxMessageLength             int     `json:"max_message_length"`
	SupportsDraftStreaming       bool    `json:"supports_draft_streaming"`
	SupportsEdit                 bool    `json:"supports_edit"`
	SupportsThreads              bool    `json:"supports_threads"`
	MarkdownDialect              string  `json:"markdown_dialect"`
	LenUnit                      LenUnit `json:"len_unit"`
	Emoji                        string  `json:"emoji,omitempty"`
	PlatformHint                 string  `json:"platform_hint,omitempty"`
	PIISafe                      bool    `json:"pii_safe,omitempty"`
	SupportsContext              bool    `json:"supports_context,omitempty"`
	SupportsInchannelContinuable bool    `json:"supports_inchannel_continuable,omitempty"`
	SupportsBlockFormatting      bool    `json:"supports_block_formatting,omitempty"`
	// SupportedOps lists exactly the outbound ops the connector performs
	// for this platform; the current gateway sends no op beyond send,
	// edit, typing and follow_up unless it is listed.
	SupportedOps []string `json:"supported_ops"`
}

// Supports reports whether op is among d's SupportedOps.
func (d CapabilityDescriptor) Supports(op string) bool {
	for _, o := range d.SupportedOps {
		if o == op {
			return true
		}
	}
	return false
}

// Normalize fills defaults the way the gateway reads a descriptor: a
// max_message_length of 0 or less is 4096, an unknown len_unit is chars, a
// missing emoji is 🔌.
func (d CapabilityDescriptor) Normalize() CapabilityDescriptor {
	if d.MaxMessageLength <= 0 {
		d.MaxMessageLength = DefaultMaxMessageLength
	}
	if d.LenUnit != LenUTF16 {
		d.LenUnit = LenChars
	}
	if d.Emoji == "" {
		d.Emoji = DefaultEmoji
	}
	if d.MarkdownDialect == "" {
		d.MarkdownDialect = "plain"
	}
	if d.SupportedOps == nil {
		d.SupportedOps = []string{}
	}
	return d
}

// ParseDescriptor decodes a descriptor leniently (unknown keys ignored,
// missing ones defaulted, a non-integer max_message_length read as 4096). It
// returns an error only for bytes that are not a JSON object or whose
// platform is not a string.
func ParseDescriptor(b []byte) (CapabilityDescriptor, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return CapabilityDescriptor{}, fmt.Errorf("relay: descriptor: %w", err)
	}
	var d CapabilityDescriptor
	str := func(k string, dst *string) error {
		if v, ok := raw[k]; ok && string(v) != "null" {
			if err := json.Unmarshal(v, dst); err != nil {
				return fmt.Errorf("relay: descriptor: %s is not a string", k)
			}
		}
		return nil
	}
	boolean := func(k string, dst *bool) {
		if v, ok := raw[k]; ok {
			_ = json.Unmarshal(v, dst)
		}
	}
	integer := func(k string, dst *int) {
		if v, ok := raw[k]; ok {
			var f float64
			if json.Unmarshal(v, &f) == nil && f == float64(int(f)) {
				*dst = int(f)
			}
		}
	}
	if err := str("platform", &d.Platform); err != nil {
		return CapabilityDescriptor{}, err
	}
	_ = str("label", &d.Label)
	_ = str("markdown_dialect", &d.MarkdownDialect)
	var unit string
	_ = str("len_unit", &unit)
	d.LenUnit = LenUnit(unit)
	_ = str("emoji", &d.Emoji)
	_ = str("platform_hint", &d.PlatformHint)
	integer("contract_version", &d.ContractVersion)
	integer("max_message_length", &d.MaxMessageLength)
	boolean("supports_draft_streaming", &d.SupportsDraftStreaming)
	boolean("supports_edit", &d.SupportsEdit)
	boolean("supports_threads", &d.SupportsThreads)
	boolean("pii_safe", &d.PIISafe)
	boolean("supports_context", &d.SupportsContext)
	boolean("supports_inchannel_continuable", &d.SupportsInchannelContinuable)
	boolean("supports_block_formatting", &d.SupportsBlockFormatting)
	if v, ok := raw["supported_ops"]; ok {
		var ops []any
		if json.Unmarshal(v, &ops) == nil {
			for _, o := range ops {
				if s, ok := o.(string); ok && s != "" {
					d.SupportedOps = append(d.SupportedOps, s)
				}
			}
		}
	}
	return d.Normalize(), nil
}

// DiscordDescriptor is the descriptor the connector sends for Discord:
// 2000 code points, dialect discord.
// Its SupportedOps are the ops relay/connector performs on Discord.
func DiscordDescriptor() CapabilityDescriptor {
	return CapabilityDescriptor{
		ContractVersion:  ContractVersion,
		Platform:         "discord",
		Label:            "Discord",
		MaxMessageLength: 2000,
		SupportsEdit:     true,
		// Drafts stream as edits of one message.
		SupportsDraftStreaming: true,
		SupportsThreads:        true,
		MarkdownDialect:        "discord",
		LenUnit:                LenChars,
		Emoji:                  "\U0001f47e",
		PlatformHint:           "You are on Discord. Discord markdown works; keep messages under 2000 characters.",
		SupportedOps:           []string{OpSend, OpEdit, OpTyping, OpFollowUp, OpGetChatInfo, OpReact, OpDelete, OpDraft, OpPrompt, OpThreadMake, OpThreadName, OpSendMedia},
	}
}

// TelegramDescriptor is the descriptor the connector sends for Telegram:
// 4096 UTF-16 code units, dialect markdown_v2.
// Its SupportedOps are the ops relay/connector performs on Telegram
// (follow_up is Discord's: Telegram has no interaction tokens).
func TelegramDescriptor() CapabilityDescriptor {
	return CapabilityDescriptor{
		ContractVersion:  ContractVersion,
		Platform:         "telegram",
		Label:            "Telegram",
		MaxMessageLength: 4096,
		SupportsEdit:     true,
		// Drafts stream as edits of one message.
		SupportsDraftStreaming: true,
		SupportsThreads:        true,
		MarkdownDialect:        "markdown_v2",
		LenUnit:                LenUTF16,
		Emoji:                  "\u2708\ufe0f",
		PlatformHint:           "You are on Telegram. Use Telegram MarkdownV2.",
		SupportedOps:           []string{OpSend, OpEdit, OpTyping, OpGetChatInfo, OpReact, OpDelete, OpDraft, OpPrompt, OpThreadMake, OpThreadName, OpSendMedia},
	}
}
