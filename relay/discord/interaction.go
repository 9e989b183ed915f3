// Package discord is the Discord edge of the relay connector: the
// interactions webhook (Ed25519 verification, PING, slash commands and
// message components normalized into relay MessageEvents with the
// interaction token taken out) and a REST client for outbound actions.
package discord

import (
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/relay"
)

// Platform is the relay platform name.
const Platform = "discord"

// TokenTTL is how long an interaction token may be used (Discord: 15 minutes).
const TokenTTL = 15 * time.Minute

// MaxClockSkew is how far a request's X-Signature-Timestamp may be from the
// connector's clock; an older, validly signed request is a replay.
const MaxClockSkew = 5 * time.Minute

// MaxBodyBytes bounds a webhook body.
const MaxBodyBytes = 1 << 20

// Interaction types.
const (
	TypePing         = 1
	TypeCommand      = 2
	TypeComponent    = 3
	TypeAutocomplete = 4
	TypeModalSubmit  = 5
)

// Verify reports whether sigHex (X-Signature-Ed25519) is pub's Ed25519
// signature of timestamp (X-Signature-Timestamp) followed by the raw body.
func Verify(pub ed25519.PublicKey, sigHex, timestamp string, body []byte) bool {
	if timestamp == "" {
		return false
	}
	msg := make([]byte, 0, len(timestamp)+len(body))
	msg = append(msg, timestamp...)
	msg = append(msg, body...)
	return verify(pub, sigHex, msg)
}

func verify(pub ed25519.PublicKey, sigHex string, msg []byte) bool {
	if len(pub) != ed25519.PublicKeySize {
		return false
	}
	sig, err := hex.DecodeString(sigHex)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return false
	}
	return ed25519.Verify(pub, msg, sig)
}

// ParsePublicKey decodes an application's hex public key.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("discord: public key must be %d hex-encoded bytes", ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(b), nil
}

// User is a Discord user.
type User struct {
	ID         string `json:"id"`
	Username   string `json:"username"`
	GlobalName string `json:"global_name"`
	Bot        bool   `json:"bot"`
}

// Member is a guild member.
type Member struct {
	User *User  `json:"user"`
	Nick string `json:"nick"`
}

// Channel is the partial channel of an interaction.
type Channel struct {
	ID       string `json:"id"`
	Type     int    `json:"type"`
	Name     string `json:"name"`
	Topic    string `json:"topic"`
	ParentID string `json:"parent_id"`
}

// Option is an application command option (possibly nested).
type Option struct {
	Name    string          `json:"name"`
	Type    int             `json:"type"`
	Value   json.RawMessage `json:"value"`
	Options []Option        `json:"options"`
}

// Data is an interaction's data.
type Data struct {
	ID            string          `json:"id"`
	Name          string          `json:"name"`
	Type          int             `json:"type"`
	Options       []Option        `json:"options"`
	CustomID      string          `json:"custom_id"`
	ComponentType int             `json:"component_type"`
	Values        []string        `json:"values"`
	Components    []ActionRow     `json:"components"`
	TargetID      string          `json:"target_id"`
	Resolved      json.RawMessage `json:"resolved"`
}

// ActionRow is a modal submit's row of inputs.
type ActionRow struct {
	Components []struct {
		CustomID string `json:"custom_id"`
		Value    string `json:"value"`
	} `json:"components"`
}

// Message is the message a component belongs to.
type Message struct {
	ID string `json:"id"`
}

// Interaction is an incoming interaction as Discord posts it.
type Interaction struct {
	ID            string   `json:"id"`
	ApplicationID string   `json:"application_id"`
	Type          int      `json:"type"`
	Token         string   `json:"token"`
	Version       int      `json:"version"`
	GuildID       string   `json:"guild_id"`
	ChannelID     string   `json:"channel_id"`
	Channel       *Channel `json:"channel"`
	Member        *Member  `json:"member"`
	User          *User    `json:"user"`
	Data          *Data    `json:"data"`
	Message       *Message `json:"message"`
}

// ParseInteraction decodes a webhook body. It refuses bodies that are not
// JSON objects or lack an id or a type.
func ParseInteraction(body []byte) (Interaction, error) {
	var i Interaction
	if err := json.Unmarshal(body, &i); err != nil {
		return Interaction{}, fmt.Errorf("discord: interaction: %w", err)
	}
	if i.Type == 0 {
		return Interaction{}, fmt.Errorf("discord: interaction: no type")
	}
	if i.Type != TypePing && i.ID == "" {
		return Interaction{}, fmt.Errorf("discord: interaction: no id")
	}
	return i, nil
}

// Inbound is a normalized interaction: the event for the gateway, and what
// stays at the edge.
type Inbound struct {
	Event relay.MessageEvent
	// Token is the interaction token. It goes into the connector's vault
	// and never into a frame, a log line or an audit record.
	Token         string
	ApplicationID string
	GuildID       string
	UserID        string
}

// Author returns the interaction's user (the member's in a guild).
func (i Interaction) Author() (User, string) {
	if i.Member != nil && i.Member.User != nil {
		return *i.Member.User, i.Member.Nick
	}
	if i.User != nil {
		return *i.User, ""
	}
	return User{}, ""
}

// Normalize turns a command, component or modal interaction into an
// Inbound, following the gateway's conventions: chat_type group when the
// interaction has a guild, else dm; chat_id the channel; guild_id the guild.
// Slash commands become "/name option values…" of type command; components
// their custom_id (and selected values); modal submits their input values.
// It refuses PING and autocomplete interactions and ones without a channel.
func Normalize(i Interaction) (Inbound, error) {
	if i.Type != TypeCommand && i.Type != TypeComponent && i.Type != TypeModalSubmit {
		return Inbound{}, fmt.Errorf("discord: interaction type %d carries no message", i.Type)
	}
	channelID := i.ChannelID
	if channelID == "" && i.Channel != nil {
		channelID = i.Channel.ID
	}
	if channelID == "" {
		return Inbound{}, fmt.Errorf("discord: interaction has no channel")
	}
	user, nick := i.Author()
	if user.ID == "" {
		return Inbound{}, fmt.Errorf("discord: interaction has no user")
	}
	name := nick
	if name == "" {
		name = user.GlobalName
	}
	if name == "" {
		name = user.Username
	}
	src := relay.SessionSource{
		Platform: Platform,
		ChatID:   channelID,
		ChatType: relay.ChatDM,
		UserID:   user.ID,
		UserName: name,
		ScopeID:  i.GuildID,
		GuildID:  i.GuildID,
	}
	if i.GuildID != "" {
		src.ChatType = relay.ChatGroup
		// In a thread the interaction is keyed as the gateway keys the
		// thread's messages (HERMES-RELAY.md §2.9): chat = thread = the
		// thread channel, parent = the channel it hangs off.
		if i.Channel != nil && isThreadChannel(i.Channel.Type) {
			src.ChatType = relay.ChatThread
			src.ThreadID = channelID
			src.ParentChatID = i.Channel.ParentID
		}
	}
	if i.Channel != nil {
		src.ChatName = i.Channel.Name
		src.ChatTopic = i.Channel.Topic
	}
	ev := relay.MessageEvent{Source: src, MessageID: i.ID, MessageType: relay.MessageText}
	if i.Data == nil {
		return Inbound{}, fmt.Errorf("discord: interaction has no data")
	}
	switch i.Type {
	case TypeCommand:
		ev.MessageType = relay.MessageCommand
		ev.Text = commandText(i.Data)
	case TypeComponent:
		ev.Text = i.Data.CustomID
		if len(i.Data.Values) > 0 {
			ev.Text += " " + strings.Join(i.Data.Values, ",")
		}
		if i.Message != nil {
			ev.Source.MessageID = i.Message.ID
			ev.ReplyToMessageID = i.Message.ID
		}
		if pr, ok := ParsePromptToken(i.Data.CustomID); ok {
			// A prompt button: the structured answer, and "/<option>" for
			// gateways that predate prompt_response.
			if i.Message != nil {
				pr.PromptMessageID = i.Message.ID
			}
			ev.PromptResponse = &pr
			ev.Text, ev.MessageType = "/"+pr.OptionID, relay.MessageCommand
		}
	case TypeModalSubmit:
		var parts []string
		for _, row := range i.Data.Components {
			for _, c := range row.Components {
				if c.Value != "" {
					parts = append(parts, c.Value)
				}
			}
		}
		ev.Text = strings.Join(parts, "\n")
	}
	return Inbound{Event: ev, Token: i.Token, ApplicationID: i.ApplicationID, GuildID: i.GuildID, UserID: user.ID}, nil
}

// commandText renders a slash command as the gateway reads typed commands:
// "/name", then subcommand names and option values in order.
func commandText(d *Data) string {
	parts := []string{"/" + d.Name}
	var walk func([]Option)
	walk = func(opts []Option) {
		for _, o := range opts {
			if o.Type == 1 || o.Type == 2 { // SUB_COMMAND, SUB_COMMAND_GROUP
				parts = append(parts, o.Name)
				walk(o.Options)
				continue
			}
			if v := optionValue(o.Value); v != "" {
				parts = append(parts, v)
			}
		}
	}
	walk(d.Options)
	return strings.Join(parts, " ")
}

func optionValue(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return strconv.FormatBool(b)
	}
	return string(raw)
}

// Response types of the interaction callback.
const (
	ResponsePong                   = 1
	ResponseChannelMessage         = 4
	ResponseDeferredChannelMessage = 5
	ResponseDeferredUpdateMessage  = 6
)

// Ack returns the immediate webhook answer for i: PONG for a PING, a
// deferred message ("thinking…") for commands and modals, a deferred update
// for components, no choices for autocomplete. The gateway's reply then arrives as a follow_up.
func Ack(i Interaction) []byte {
	switch i.Type {
	case TypePing:
		return []byte(`{"type":1}`)
	case TypeComponent:
		return []byte(`{"type":6}`)
	case TypeAutocomplete:
		return []byte(`{"type":8,"data":{"choices":[]}}`)
	default:
		return []byte(`{"type":5}`)
	}
}

// isThreadChannel reports Discord's thread channel types (announcement,
// public and private threads).
func isThreadChannel(t int) bool { return t == 10 || t == 11 || t == 12 }

// ParsePromptToken is relay.ParsePromptToken.
func ParsePromptToken(s string) (relay.PromptResponse, bool) { return relay.ParsePromptToken(s) }
