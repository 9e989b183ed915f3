package relay

import (
	"errors"
	"fmt"
	"strings"
)

// SessionKeyOptions are the gateway's session-key switches.
type SessionKeyOptions struct {
	// GroupSessionsPerUser gives each participant of a non-thread group its
	// own session (gateway default: true).
	GroupSessionsPerUser bool
	// ThreadSessionsPerUser does the same inside threads (default: false).
	ThreadSessionsPerUser bool
	// MultiplexProfiles says the gateway serves several profiles from one
	// process (its multiplex_profiles setting): the key's namespace is then
	// the source's profile, else Profile (HERMES-RELAY.md §3.3). When false
	// the namespace is always agent:main and a source's profile is ignored.
	MultiplexProfiles bool
	// Profile is the gateway's active profile, used by a multiplexing
	// gateway for a source that names none ("" and "default" are the
	// default profile).
	Profile string
	// SlackTopLevelThreads mirrors the gateway's Slack stamping (its relay
	// knobs reply_in_thread and dm_top_level_threads_as_sessions, both on
	// by default): a Slack message outside a thread is keyed as the thread
	// it starts (thread_id = its message id). Only EventSessionKey applies
	// it; SessionKey is the pure build_session_key.
	SlackTopLevelThreads bool
}

// DefaultSessionKeyOptions are the gateway's defaults.
func DefaultSessionKeyOptions() SessionKeyOptions {
	return SessionKeyOptions{GroupSessionsPerUser: true, ThreadSessionsPerUser: false, SlackTopLevelThreads: true}
}

// knownPlatforms are the platform names the gateway knows; any other name
// keys as "relay".
var knownPlatforms = map[string]bool{
	"local": true, "telegram": true, "discord": true, "whatsapp": true, "whatsapp_cloud": true,
	"slack": true, "signal": true, "mattermost": true, "matrix": true, "homeassistant": true,
	"email": true, "sms": true, "dingtalk": true, "api_server": true, "webhook": true,
	"msgraph_webhook": true, "feishu": true, "wecom": true, "wecom_callback": true, "weixin": true,
	"bluebubbles": true, "qqbot": true, "yuanbao": true, "relay": true,
	"google_chat": true, "irc": true, "line": true, "ntfy": true, "photon": true, "simplex": true,
	"teams": true,
}

func normalizePlatform(p string) string {
	return strings.ToLower(strings.TrimSpace(p))
}

// KeyPlatform is the platform name as the gateway reads it and as it appears
// in a session key: trimmed and lower-cased, and "relay" for a blank name or
// one the gateway does not know (what its wire reader does).
func KeyPlatform(p string) string {
	n := normalizePlatform(p)
	if !knownPlatforms[n] {
		return "relay"
	}
	return n
}

// ErrNoPlatform was returned by SessionKey for a source without a platform;
// such a source now keys as platform "relay", as the gateway reads it. Kept
// for callers that compare against it.
var ErrNoPlatform = errors.New("relay: session key: platform is missing")

// ErrUnsafeWhatsAppID is returned by SessionKey for a WhatsApp identifier the
// gateway's key builder refuses (a character outside A-Z a-z 0-9 @ . + -
// after normalization): the gateway would fail the message, so the edge
// refuses the source instead of passing it on.
var ErrUnsafeWhatsAppID = errors.New("relay: session key: WhatsApp identifier has a character outside A-Z a-z 0-9 @ . + -")

// ProfileNamespace is the first segment of a session key for profile:
// agent:main for none or "default", agent:main~ for "main", else
// agent:<profile>.
func ProfileNamespace(profile string) string {
	switch profile {
	case "", "default":
		return "agent:main"
	case "main":
		return "agent:main~"
	}
	return "agent:" + profile
}

// SessionKey computes the key the gateway's build_session_key() gives src
// (HERMES-RELAY.md §3.2):
//
//	<ns>:<platform>:<slot>[:<slack scope_id>][:<chat>] then
//	  DM:     [:<participant> when there is no chat][:<thread>]
//	  others: [:<thread>][:<participant> when isolated]
//
// The thread is thread_id, else (not for DMs) prospective_thread_id, which
// also turns the slot into "thread". WhatsApp DM chat ids and participants
// are normalized (whitespace trimmed, the first '+' removed, cut at ':' and
// '@'); whatsapp_cloud is not. Other ids are used as they are. It fails only
// with ErrUnsafeWhatsAppID.
func SessionKey(src SessionSource, opts SessionKeyOptions) (string, error) {
	platform := KeyPlatform(src.Platform)
	whatsapp := platform == "whatsapp"
	isDM := src.ChatType == ChatDM
	chat := src.ChatID
	if isDM && whatsapp {
		var err error
		if chat, err = canonicalWhatsApp(chat); err != nil {
			return "", fmt.Errorf("%w: chat_id %q", err, src.ChatID)
		}
	}
	thread, slot := src.ThreadID, src.ChatType
	if thread == "" && !isDM && src.ProspectiveThreadID != "" {
		thread, slot = src.ProspectiveThreadID, ChatThread
	}
	var isolate bool
	if isDM {
		isolate = chat == ""
	} else {
		isolate = opts.GroupSessionsPerUser && !(thread != "" && !opts.ThreadSessionsPerUser)
	}
	participant := ""
	if isolate || !isDM {
		participant = src.UserIDAlt
		if participant == "" {
			participant = src.UserID
		}
		if participant != "" && whatsapp {
			c, err := canonicalWhatsApp(participant)
			if err != nil {
				return "", fmt.Errorf("%w: participant %q", err, participant)
			}
			if c != "" {
				participant = c
			}
		}
	}
	ns := "agent:main"
	if opts.MultiplexProfiles {
		p := src.Profile
		if p == "" {
			p = opts.Profile
		}
		ns = ProfileNamespace(p)
	}
	var b strings.Builder
	b.Grow(64)
	b.WriteString(ns)
	add := func(s string) {
		b.WriteByte(':')
		b.WriteString(s)
	}
	add(platform)
	add(slot)
	if platform == "slack" && src.Scope() != "" {
		add(src.Scope())
	}
	if chat != "" {
		add(chat)
	}
	user := isolate && participant != ""
	if isDM {
		if user {
			add(participant)
		}
		if thread != "" {
			add(thread)
		}
	} else {
		if thread != "" {
			add(thread)
		}
		if user {
			add(participant)
		}
	}
	return b.String(), nil
}

// EventSessionKey is the key the gateway files ev under: SessionKey after
// the gateway-side Slack stamping (HERMES-RELAY.md §3.4) when
// opts.SlackTopLevelThreads is on — a Slack event with no thread_id but a
// message id (the event's, else the source's) is keyed with thread_id set to
// that message id.
func EventSessionKey(ev MessageEvent, opts SessionKeyOptions) (string, error) {
	return SessionKey(StampedSource(ev, opts), opts)
}

// StampedSource is ev's source as the gateway keys it (see EventSessionKey).
func StampedSource(ev MessageEvent, opts SessionKeyOptions) SessionSource {
	src := ev.Source
	if opts.SlackTopLevelThreads && src.ThreadID == "" && KeyPlatform(src.Platform) == "slack" {
		id := ev.MessageID
		if id == "" {
			id = src.MessageID
		}
		src.ThreadID = id
	}
	return src
}

// NormalizeWhatsApp is the gateway's WhatsApp identifier normalization:
// surrounding whitespace trimmed, the first '+' removed wherever it is, then
// cut at the first ':' and at the first '@'
// ("+15551234567:47@s.whatsapp.net" -> "15551234567", "1+555" -> "1555").
func NormalizeWhatsApp(id string) string {
	id = strings.TrimSpace(id)
	if i := strings.IndexByte(id, '+'); i >= 0 {
		id = id[:i] + id[i+1:]
	}
	if i := strings.IndexByte(id, ':'); i >= 0 {
		id = id[:i]
	}
	if i := strings.IndexByte(id, '@'); i >= 0 {
		id = id[:i]
	}
	return id
}

// canonicalWhatsApp is NormalizeWhatsApp, refusing what the gateway's
// canonical form refuses (ErrUnsafeWhatsAppID). The gateway may also pick a
// shorter alias from a native WhatsApp bridge's LID mapping files; a
// relay-only gateway has none.
func canonicalWhatsApp(id string) (string, error) {
	n := NormalizeWhatsApp(id)
	if !SafeWhatsAppID(n) {
		return "", ErrUnsafeWhatsAppID
	}
	return n, nil
}

// SafeWhatsAppID reports whether a normalized WhatsApp identifier is empty
// or only holds A-Z a-z 0-9 @ . + -.
func SafeWhatsAppID(n string) bool {
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '@' || c == '.' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}
