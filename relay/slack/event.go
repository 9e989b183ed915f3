// Package slack is the Slack edge of the relay connector: the Events API
// over HTTP (v0 signing-secret verification over the raw body, the
// url_verification challenge, messages in channels, threads and DMs
// normalized into relay MessageEvents with scope_id = the team id) and a Web
// API client for outbound actions (chat.postMessage, chat.update,
// assistant.threads.setStatus, conversations.info).
//
// Verification and the client are written by hand against Slack's published
// scheme (https://api.slack.com/authentication/verifying-requests-from-slack):
// the scheme is one HMAC, the client four methods, and slack-go/slack would
// add a large dependency for them.
package slack

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caduceus-dev/caduceus/relay"
)

// Platform is the relay platform name.
const Platform = "slack"

// Headers Slack signs requests with.
const (
	SignatureHeader = "X-Slack-Signature"
	TimestampHeader = "X-Slack-Request-Timestamp"
)

// MaxClockSkew is how far X-Slack-Request-Timestamp may be from the
// connector's clock (Slack: five minutes); an older, validly signed request
// is a replay.
const MaxClockSkew = 5 * time.Minute

// MaxBodyBytes bounds a webhook body.
const MaxBodyBytes = 1 << 20

// Verification failures.
var (
	ErrForged = errors.New("slack: request signature does not verify")
	ErrStale  = errors.New("slack: request timestamp outside the five-minute window")
)

// Sign returns the X-Slack-Signature of body sent at timestamp:
// "v0=" + hex(HMAC-SHA256(secret, "v0:" + timestamp + ":" + body)).
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("v0:"))
	m.Write([]byte(timestamp))
	m.Write([]byte(":"))
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}

// Verify checks a request's signature over the exact raw body, then its
// timestamp against now. A signature that does not verify is ErrForged
// (checked first, so a forger learns nothing about the clock); a valid one
// whose timestamp is more than MaxClockSkew away is ErrStale. An empty
// secret refuses everything.
func Verify(secret, timestamp, signature string, body []byte, now time.Time) error {
	if secret == "" || timestamp == "" || !strings.HasPrefix(signature, "v0=") {
		return ErrForged
	}
	got, err := hex.DecodeString(signature[3:])
	if err != nil || len(got) != sha256.Size {
		return ErrForged
	}
	want, _ := hex.DecodeString(Sign(secret, timestamp, body)[3:])
	if !hmac.Equal(got, want) {
		return ErrForged
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		return ErrStale
	}
	d := now.Sub(time.Unix(ts, 0))
	if d > MaxClockSkew || d < -MaxClockSkew {
		return ErrStale
	}
	return nil
}

// Envelope is an Events API request body.
type Envelope struct {
	Type      string `json:"type"` // url_verification, event_callback, app_rate_limited
	Challenge string `json:"challenge"`
	TeamID    string `json:"team_id"`
	APIAppID  string `json:"api_app_id"`
	EventID   string `json:"event_id"`
	EventTime int64  `json:"event_time"`
	Event     *Event `json:"event"`
}

// Event is the inner event of an event_callback.
type Event struct {
	Type        string       `json:"type"` // message, app_mention, ...
	Subtype     string       `json:"subtype"`
	Channel     string       `json:"channel"`
	ChannelType string       `json:"channel_type"` // im, mpim, channel, group
	User        string       `json:"user"`
	BotID       string       `json:"bot_id"`
	Text        string       `json:"text"`
	TS          string       `json:"ts"`
	ThreadTS    string       `json:"thread_ts"`
	Team        string       `json:"team"`
	UserProfile *UserProfile `json:"user_profile"`
	Files       []File       `json:"files"`
	// AppID (and BotProfile.AppID) name the app that posted a bot's
	// message: the connector's own when it equals the envelope's
	// api_app_id.
	AppID      string `json:"app_id"`
	BotProfile *struct {
		AppID string `json:"app_id"`
	} `json:"bot_profile"`
	// Message is the edited message of a message_changed event, with
	// Edited set for a person's (or bot's) edit; Slack also sends
	// message_changed without Edited when it unfurls a link.
	Message *Event `json:"message"`
	Edited  *struct {
		User string `json:"user"`
		TS   string `json:"ts"`
	} `json:"edited"`
}

// appID is the app that posted e, if an app did.
func (e *Event) appID() string {
	if e.AppID != "" {
		return e.AppID
	}
	if e.BotProfile != nil {
		return e.BotProfile.AppID
	}
	return ""
}

// UserProfile is the author's profile some message events carry.
type UserProfile struct {
	DisplayName string `json:"display_name"`
	RealName    string `json:"real_name"`
	Name        string `json:"name"`
}

// File is an attached file.
type File struct {
	ID       string `json:"id"`
	Name     string `json:"name"`
	Mimetype string `json:"mimetype"`
	Size     int64  `json:"size"`
	// URLPrivate (and URLPrivateDownload) need the bot token as bearer.
	URLPrivate         string `json:"url_private"`
	URLPrivateDownload string `json:"url_private_download"`
}

// Envelope types.
const (
	TypeURLVerification = "url_verification"
	TypeEventCallback   = "event_callback"
)

// ParseEnvelope decodes a webhook body. It refuses bodies that are not JSON
// objects or have no type, a url_verification without a challenge and an
// event_callback without an event.
func ParseEnvelope(body []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(body, &e); err != nil {
		return Envelope{}, fmt.Errorf("slack: envelope: %w", err)
	}
	switch e.Type {
	case "":
		return Envelope{}, fmt.Errorf("slack: envelope: no type")
	case TypeURLVerification:
		if e.Challenge == "" {
			return Envelope{}, fmt.Errorf("slack: url_verification: no challenge")
		}
	case TypeEventCallback:
		if e.Event == nil {
			return Envelope{}, fmt.Errorf("slack: event_callback: no event")
		}
	}
	return e, nil
}

// ChallengeResponse is the answer to a url_verification request.
func ChallengeResponse(e Envelope) []byte {
	b, _ := json.Marshal(map[string]string{"challenge": e.Challenge})
	return b
}

// ErrIgnored is returned for events that carry no message the gateway wants
// (deletions, joins, unfurls, the app's own messages, and event types other
// than message and app_mention).
var ErrIgnored = errors.New("slack: event carries no message")

// Options are the normalization switches.
type Options struct {
	// StampTopLevel mirrors the gateway's Slack top-level stamping
	// (HERMES-RELAY §3.4, on by default there): a message that is not in a
	// thread gets thread_id = its own ts, so every top-level message starts
	// its own threaded session and the connector keys it as the gateway does.
	StampTopLevel bool
}

// Inbound is a normalized Slack message.
type Inbound struct {
	Event relay.MessageEvent
	Team  string
	// Files are the message's files; their URLs need the bot token, so
	// they stay at the edge until re-hosted.
	Files []File
	// DedupeID is the message ts: a message and the app_mention for it
	// (Slack sends both when subscribed to both) are one delivery.
	DedupeID string
}

// Normalize turns a message or app_mention event_callback into an Inbound,
// following the gateway's Slack conventions: a DM (channel_type im, or a D…
// channel) is dm and one_to_one_verified (Slack itself says im), anything
// else group; chat_id the channel; scope_id the team; thread_id the thread
// ts for a reply in a thread (and, with StampTopLevel, the message's own ts
// for a top-level message); message_id the ts. A message_changed event
// with an edit is the edited message, message_is_edit true, deduplicated
// on its ts and the edit's. A bot's message (bot_id, or subtype
// bot_message) is is_bot true, user_id the user or else the bot id; the
// app's own messages (app_id the envelope's api_app_id) are ErrIgnored.
// Files set the message type (the first file's MIME type) and are returned
// in Files; their URLs need the bot token, so they are not put in
// media_urls here.
func Normalize(e Envelope, o Options) (Inbound, error) {
	if e.Type != TypeEventCallback || e.Event == nil {
		return Inbound{}, ErrIgnored
	}
	ev := e.Event
	if ev.Type != "message" && ev.Type != "app_mention" {
		return Inbound{}, ErrIgnored
	}
	edit := ""
	switch ev.Subtype {
	case "", "file_share", "thread_broadcast", "bot_message":
	case "message_changed":
		m := ev.Message
		if m == nil || m.Edited == nil || m.Edited.TS == "" {
			return Inbound{}, ErrIgnored // an unfurl, not an edit
		}
		inner := *m
		inner.Type, inner.Channel, inner.ChannelType = ev.Type, ev.Channel, ev.ChannelType
		if inner.Team == "" {
			inner.Team = ev.Team
		}
		ev, edit = &inner, m.Edited.TS
	default:
		return Inbound{}, ErrIgnored
	}
	if a := ev.appID(); a != "" && a == e.APIAppID {
		return Inbound{}, ErrIgnored // the connector's own message
	}
	isBot := ev.BotID != "" || ev.Subtype == "bot_message"
	user := ev.User
	if user == "" && isBot {
		user = ev.BotID
	}
	if user == "" {
		return Inbound{}, ErrIgnored
	}
	if ev.Channel == "" || ev.TS == "" {
		return Inbound{}, fmt.Errorf("slack: message without channel or ts")
	}
	team := e.TeamID
	if team == "" {
		team = ev.Team
	}
	src := relay.SessionSource{Platform: Platform, ChatID: ev.Channel, ChatType: relay.ChatGroup,
		UserID: user, ScopeID: team, GuildID: team, MessageID: ev.TS, IsBot: isBot, MessageIsEdit: edit != ""}
	if ev.ChannelType == "im" || (ev.ChannelType == "" && strings.HasPrefix(ev.Channel, "D")) {
		src.ChatType = relay.ChatDM
		src.OneToOneVerified = true
	}
	if p := ev.UserProfile; p != nil {
		src.UserName = firstNonEmpty(p.DisplayName, p.RealName, p.Name)
	}
	switch {
	case ev.ThreadTS != "" && ev.ThreadTS != ev.TS:
		src.ThreadID = ev.ThreadTS
	case o.StampTopLevel:
		src.ThreadID = ev.TS
	}
	typ := relay.MessageText
	if len(ev.Files) > 0 {
		typ = relay.MediaMessageType(ev.Files[0].Mimetype)
	}
	if ev.Text == "" && len(ev.Files) == 0 {
		return Inbound{}, ErrIgnored
	}
	out := relay.MessageEvent{Text: ev.Text, MessageType: typ, Source: src, MessageID: ev.TS, MediaURLs: []string{}}
	dedupe := ev.TS
	if edit != "" {
		dedupe += ":edit:" + edit
	}
	return Inbound{Event: out, Team: team, DedupeID: dedupe, Files: ev.Files}, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// MaxMessageLength is the most characters chat.postMessage keeps in text
// (Slack truncates beyond 40,000).
const MaxMessageLength = 40000

// SupportedOps are the outbound ops the connector answers for Slack.
var SupportedOps = []string{"send", "edit", "typing", "get_chat_info"}

// Descriptor is the descriptor the connector sends for Slack: 40,000 code
// points, dialect mrkdwn, threads.
func Descriptor() relay.CapabilityDescriptor {
	return relay.CapabilityDescriptor{
		ContractVersion:  relay.ContractVersion,
		Platform:         Platform,
		Label:            "Slack",
		MaxMessageLength: MaxMessageLength,
		SupportsEdit:     true,
		SupportsThreads:  true,
		MarkdownDialect:  "mrkdwn",
		LenUnit:          relay.LenChars,
		Emoji:            "\U0001f4ac",
		PlatformHint:     "You are on Slack. Use Slack mrkdwn (*bold*, _italic_, `code`, <url|text>).",
		SupportedOps:     append([]string(nil), SupportedOps...),
	}
}
