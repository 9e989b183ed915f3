package wecom

import (
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/caduceus-dev/caduceus/relay"
)

// Platform is the relay platform name.
const Platform = "wecom"

// MaxBodyBytes bounds a callback body.
const MaxBodyBytes = 256 << 10

// MaxClockSkew is how far a callback's signed timestamp may be from the
// connector's clock; an older, validly signed callback is a replay.
const MaxClockSkew = 5 * time.Minute

// Envelope is the encrypted callback body.
type Envelope struct {
	ToUserName string `xml:"ToUserName"`
	AgentID    string `xml:"AgentID"`
	Encrypt    string `xml:"Encrypt"`
}

// ParseEnvelope decodes a callback body; it refuses one without Encrypt.
func ParseEnvelope(body []byte) (Envelope, error) {
	var e Envelope
	if err := xml.Unmarshal(body, &e); err != nil {
		return Envelope{}, fmt.Errorf("wecom: envelope: %w", err)
	}
	if e.Encrypt == "" {
		return Envelope{}, fmt.Errorf("wecom: envelope: no Encrypt")
	}
	return e, nil
}

// Message is a decrypted callback message.
type Message struct {
	ToUserName   string  `xml:"ToUserName"`
	FromUserName string  `xml:"FromUserName"`
	CreateTime   int64   `xml:"CreateTime"`
	MsgType      string  `xml:"MsgType"`
	Content      string  `xml:"Content"`
	MsgID        string  `xml:"MsgId"`
	AgentID      string  `xml:"AgentID"`
	PicURL       string  `xml:"PicUrl"`
	MediaID      string  `xml:"MediaId"`
	LocationX    float64 `xml:"Location_X"`
	LocationY    float64 `xml:"Location_Y"`
	Label        string  `xml:"Label"`
	Event        string  `xml:"Event"`
}

// ParseMessage decodes a decrypted message.
func ParseMessage(plain []byte) (Message, error) {
	var m Message
	if err := xml.Unmarshal(plain, &m); err != nil {
		return Message{}, fmt.Errorf("wecom: message: %w", err)
	}
	return m, nil
}

// ErrIgnored is a callback that carries no message the gateway wants
// (events such as enter_agent or subscribe).
var ErrIgnored = errors.New("wecom: callback carries no message")

// Normalize turns a message into a MessageEvent: always a dm (an app's
// callback carries one user's messages) whose chat_id and user_id are the
// sender's userid, message_id the MsgId.
func Normalize(m Message) (relay.MessageEvent, error) {
	if m.MsgType == "event" {
		return relay.MessageEvent{}, ErrIgnored
	}
	if m.FromUserName == "" || m.MsgID == "" {
		return relay.MessageEvent{}, fmt.Errorf("wecom: message without FromUserName or MsgId")
	}
	typ, text := relay.MessageText, m.Content
	switch m.MsgType {
	case "text":
		if text == "" {
			return relay.MessageEvent{}, ErrIgnored
		}
	case "image":
		typ = relay.MessagePhoto
	case "voice":
		typ = relay.MessageVoice
	case "video":
		typ = relay.MessageVideo
	case "location":
		typ = relay.MessageLocation
		text = strconv.FormatFloat(m.LocationX, 'f', -1, 64) + "," + strconv.FormatFloat(m.LocationY, 'f', -1, 64)
		if m.Label != "" {
			text += " " + m.Label
		}
	case "link":
		typ = relay.MessageText
	default:
		return relay.MessageEvent{}, ErrIgnored
	}
	src := relay.SessionSource{Platform: Platform, ChatType: relay.ChatDM, ChatID: m.FromUserName, UserID: m.FromUserName, MessageID: m.MsgID}
	return relay.MessageEvent{Text: text, MessageType: typ, Source: src, MessageID: m.MsgID, MediaURLs: []string{}}, nil
}

// MaxContentBytes is the most bytes of a text message's content (WeCom
// truncates beyond 2048).
const MaxContentBytes = 2048

// MaxMessageLength is what the descriptor advertises: 2048 bytes hold at
// least 682 characters of CJK text; the client splits anything longer in
// bytes (emoji) into further messages.
const MaxMessageLength = 680

// SupportedOps are the outbound ops the connector answers for WeCom.
var SupportedOps = []string{"send"}

// Descriptor is the descriptor for WeCom.
func Descriptor() relay.CapabilityDescriptor {
	return relay.CapabilityDescriptor{
		ContractVersion:  relay.ContractVersion,
		Platform:         Platform,
		Label:            "WeCom",
		MaxMessageLength: MaxMessageLength,
		MarkdownDialect:  "plain",
		LenUnit:          relay.LenChars,
		Emoji:            "\U0001f3e2",
		PlatformHint:     "You are on WeCom (企业微信). Plain text only.",
		SupportedOps:     append([]string(nil), SupportedOps...),
	}
}
