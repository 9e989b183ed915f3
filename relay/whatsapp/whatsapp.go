// Package whatsapp is the WhatsApp Cloud API edge of the relay connector:
// the webhook's verification handshake (hub.challenge with the verify
// token), X-Hub-Signature-256 verification over the raw body (HMAC-SHA256
// with the app secret), messages normalized into relay MessageEvents on
// platform whatsapp_cloud, and a Graph API client for replies.
//
// Written by hand against Meta's published webhook and messages reference:
// one HMAC and one endpoint; no Go library is the one its users use.
package whatsapp

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/relay"
)

// Platform is the relay platform name (the gateway keys it verbatim, with
// no WhatsApp normalization).
const Platform = "whatsapp_cloud"

// SignatureHeader carries the body's signature.
const SignatureHeader = "X-Hub-Signature-256"

// MaxBodyBytes bounds a webhook body.
const MaxBodyBytes = 1 << 20

// Sign returns the X-Hub-Signature-256 of body: "sha256=" +
// hex(HMAC-SHA256(appSecret, body)).
func Sign(appSecret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(appSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// ErrForged is a body whose signature does not verify.
var ErrForged = errors.New("whatsapp: request signature does not verify")

// Verify checks signature over the exact raw body. An empty app secret
// refuses everything.
func Verify(appSecret, signature string, body []byte) error {
	h, ok := strings.CutPrefix(signature, "sha256=")
	got, err := hex.DecodeString(h)
	if appSecret == "" || !ok || err != nil || len(got) != sha256.Size {
		return ErrForged
	}
	want, _ := hex.DecodeString(Sign(appSecret, body)[len("sha256="):])
	if !hmac.Equal(got, want) {
		return ErrForged
	}
	return nil
}

// Challenge answers the subscription handshake: it returns hub.challenge
// when hub.mode is subscribe and hub.verify_token equals verifyToken.
func Challenge(q url.Values, verifyToken string) (string, bool) {
	if verifyToken == "" || q.Get("hub.mode") != "subscribe" || q.Get("hub.challenge") == "" {
		return "", false
	}
	if subtle.ConstantTimeCompare([]byte(q.Get("hub.verify_token")), []byte(verifyToken)) != 1 {
		return "", false
	}
	return q.Get("hub.challenge"), true
}

// Payload is a webhook body.
type Payload struct {
	Object string  `json:"object"`
	Entry  []Entry `json:"entry"`
}

// Entry is one business account's changes.
type Entry struct {
	ID      string   `json:"id"`
	Changes []Change `json:"changes"`
}

// Change is one change notification.
type Change struct {
	Field string `json:"field"`
	Value Value  `json:"value"`
}

// Value is a messages change.
type Value struct {
	MessagingProduct string `json:"messaging_product"`
	Metadata         struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		PhoneNumberID      string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts []struct {
		WaID    string `json:"wa_id"`
		Profile struct {
			Name string `json:"name"`
		} `json:"profile"`
	} `json:"contacts"`
	Messages []Message         `json:"messages"`
	Statuses []json.RawMessage `json:"statuses"`
}

// Media is an attached media object (its id is fetched with the access token).
type Media struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type"`
	Caption  string `json:"caption"`
	Filename string `json:"filename"`
}

// Message is one incoming message.
type Message struct {
	From      string `json:"from"`
	ID        string `json:"id"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Text      *struct {
		Body string `json:"body"`
	} `json:"text"`
	Image    *Media `json:"image"`
	Audio    *Media `json:"audio"`
	Video    *Media `json:"video"`
	Document *Media `json:"document"`
	Sticker  *Media `json:"sticker"`
	Location *struct {
		Latitude  float64 `json:"latitude"`
		Longitude float64 `json:"longitude"`
		Name      string  `json:"name"`
	} `json:"location"`
	Button *struct {
		Text    string `json:"text"`
		Payload string `json:"payload"`
	} `json:"button"`
	Interactive *struct {
		Type        string `json:"type"`
		ButtonReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"button_reply"`
		ListReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"list_reply"`
	} `json:"interactive"`
	Context *struct {
		From string `json:"from"`
		ID   string `json:"id"`
	} `json:"context"`
}

// ParsePayload decodes a webhook body; it refuses anything but a
// whatsapp_business_account notification.
func ParsePayload(body []byte) (Payload, error) {
	var p Payload
	if err := json.Unmarshal(body, &p); err != nil {
		return Payload{}, fmt.Errorf("whatsapp: payload: %w", err)
	}
	if p.Object != "whatsapp_business_account" {
		return Payload{}, fmt.Errorf("whatsapp: payload: object %q is not whatsapp_business_account", p.Object)
	}
	return p, nil
}

// Inbound is one normalized message.
type Inbound struct {
	Event         relay.MessageEvent
	PhoneNumberID string // the business number it was sent to
	SentAt        time.Time
	// MediaID is the attached media's id; downloading it needs the access
	// token, so it stays at the edge.
	MediaID string
	// MediaKind (image, voice, video, document, sticker), MediaMime and
	// MediaFilename describe it.
	MediaKind, MediaMime, MediaFilename string
}

// attachment is m's media object and its relay kind, nil when it has none.
func attachment(m Message) (*Media, string) {
	switch m.Type {
	case "image":
		return m.Image, "image"
	case "audio":
		return m.Audio, "voice"
	case "video":
		return m.Video, "video"
	case "document":
		return m.Document, "document"
	case "sticker":
		return m.Sticker, "sticker"
	}
	return nil, ""
}

// Normalize returns the messages of p, in order: platform whatsapp_cloud,
// always a dm whose chat_id and user_id are the sender's wa_id (verbatim:
// the gateway does not normalize whatsapp_cloud ids), user_name the
// contact's profile name, message_id the wamid, reply_to the quoted
// message. Status notifications, reactions and unsupported types are
// skipped; a message without a sender or id is an error.
func Normalize(p Payload) ([]Inbound, error) {
	var out []Inbound
	for _, e := range p.Entry {
		for _, ch := range e.Changes {
			if ch.Field != "messages" {
				continue
			}
			v := ch.Value
			names := map[string]string{}
			for _, c := range v.Contacts {
				names[c.WaID] = c.Profile.Name
			}
			for _, m := range v.Messages {
				if m.From == "" || m.ID == "" {
					return nil, fmt.Errorf("whatsapp: message without sender or id")
				}
				text, typ, media, ok := content(m)
				if !ok {
					continue
				}
				src := relay.SessionSource{Platform: Platform, ChatType: relay.ChatDM, ChatID: m.From, UserID: m.From,
					UserName: names[m.From], MessageID: m.ID}
				ev := relay.MessageEvent{Text: text, MessageType: typ, Source: src, MessageID: m.ID, MediaURLs: []string{}}
				if m.Context != nil {
					ev.ReplyToMessageID = m.Context.ID
				}
				in := Inbound{Event: ev, PhoneNumberID: v.Metadata.PhoneNumberID, MediaID: media}
				if x, kind := attachment(m); x != nil && media != "" {
					in.MediaKind, in.MediaMime, in.MediaFilename = kind, x.MimeType, x.Filename
				}
				if s, err := strconv.ParseInt(m.Timestamp, 10, 64); err == nil {
					in.SentAt = time.Unix(s, 0)
				}
				out = append(out, in)
			}
		}
	}
	return out, nil
}

func content(m Message) (string, relay.MessageType, string, bool) {
	media := func(x *Media, t relay.MessageType) (string, relay.MessageType, string, bool) {
		if x == nil {
			return "", t, "", false
		}
		return x.Caption, t, x.ID, true
	}
	switch m.Type {
	case "text":
		if m.Text == nil || m.Text.Body == "" {
			return "", "", "", false
		}
		return m.Text.Body, relay.MessageText, "", true
	case "image":
		return media(m.Image, relay.MessagePhoto)
	case "audio":
		if m.Audio == nil {
			return "", "", "", false
		}
		return "", relay.MessageVoice, m.Audio.ID, true
	case "video":
		return media(m.Video, relay.MessageVideo)
	case "document":
		return media(m.Document, relay.MessageDocument)
	case "sticker":
		return media(m.Sticker, relay.MessageSticker)
	case "location":
		if m.Location == nil {
			return "", "", "", false
		}
		return strconv.FormatFloat(m.Location.Latitude, 'f', -1, 64) + "," + strconv.FormatFloat(m.Location.Longitude, 'f', -1, 64), relay.MessageLocation, "", true
	case "button":
		if m.Button == nil {
			return "", "", "", false
		}
		return m.Button.Text, relay.MessageText, "", true
	case "interactive":
		if i := m.Interactive; i != nil && i.ButtonReply != nil {
			return i.ButtonReply.Title, relay.MessageText, "", true
		} else if i != nil && i.ListReply != nil {
			return i.ListReply.Title, relay.MessageText, "", true
		}
	}
	return "", "", "", false
}

// MaxMessageLength is the most characters of a text message body.
const MaxMessageLength = 4096

// SupportedOps are the outbound ops the connector answers for WhatsApp
// Cloud: sending (messages cannot be edited).
var SupportedOps = []string{"send"}

// Descriptor is the descriptor for WhatsApp Cloud.
func Descriptor() relay.CapabilityDescriptor {
	return relay.CapabilityDescriptor{
		ContractVersion:  relay.ContractVersion,
		Platform:         Platform,
		Label:            "WhatsApp",
		MaxMessageLength: MaxMessageLength,
		MarkdownDialect:  "whatsapp",
		LenUnit:          relay.LenChars,
		Emoji:            "\U0001f4de",
		PlatformHint:     "You are on WhatsApp. WhatsApp formatting works (*bold*, _italic_, ~strike~, ```code```).",
		SupportedOps:     append([]string(nil), SupportedOps...),
	}
}
