package relay

import (
	"errors"
	"strings"
)

// SessionKeyOptions are the gateway's session-key switches.
type SessionKeyOptions struct {
	// GroupSessionsPerUser gives each participant of a non-thread group its
	// own session (gateway default: true).
	GroupSessionsPerUser bool
	// ThreadSessionsPerUser does the same inside threads (default: false).
	ThreadSessionsPerUser bool
}

// DefaultSessionKeyOptions are the gateway's defaults.
func DefaultSessionKeyOptions() SessionKeyOptions {
	return SessionKeyOptions{GroupSessionsPerUser: true, ThreadSessionsPerUser: false}
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

// KeyPlatform is the platform name as it appears in a session key: trimmed,
// lower-cased, and "relay" for a name the gateway does not know. It returns
// "" for a blank name.
func KeyPlatform(p string) string {
	n := normalizePlatform(p)
	if n == "" {
		return ""
	}
	if !knownPlatforms[n] {
		return "relay"
	}
	return n
}

// ErrNoPlatform is returned by SessionKey for a source without a platform.
var ErrNoPlatform = errors.New("relay: session key: platform is missing")

// SessionKey computes the key the gateway's build_session_key() gives src
// (RELAY.md §3): agent:main:<platform>:dm:<chat|participant|thread>[:<thread>]
// for direct messages, agent:main:<platform>:<chat_type>[:<chat>][:<thread>]
// [:<participant>] otherwise. Ids are used as they are (no hashing, escaping,
// case folding or normalization) except WhatsApp DM chat ids and
// participants. guild_id is not part of the key; scope_id is, for Slack
// only, right after the chat type. It fails only for a source
// without a platform; ParseSource refuses the other unkeyable wire forms.
func SessionKey(src SessionSource, opts SessionKeyOptions) (string, error) {
	platform := KeyPlatform(src.Platform)
	if platform == "" {
		return "", ErrNoPlatform
	}
	whatsapp := platform == "whatsapp"
	participant := src.UserIDAlt
	if participant == "" {
		participant = src.UserID
	}
	if whatsapp {
		participant = normalizeWhatsApp(participant)
	}
	var b strings.Builder
	b.Grow(64)
	b.WriteString("agent:main:")
	b.WriteString(platform)
	add := func(s string) {
		b.WriteByte(':')
		b.WriteString(s)
	}
	if src.ChatType == ChatDM {
		add(ChatDM)
		if platform == "slack" && src.ScopeID != "" {
			add(src.ScopeID)
		}
		chat := src.ChatID
		if whatsapp {
			chat = normalizeWhatsApp(chat)
		}
		switch {
		case chat != "":
			add(chat)
			if src.ThreadID != "" {
				add(src.ThreadID)
			}
		case participant != "":
			add(participant)
			if src.ThreadID != "" {
				add(src.ThreadID)
			}
		case src.ThreadID != "":
			add(src.ThreadID)
		}
		return b.String(), nil
	}
	add(src.ChatType)
	if platform == "slack" && src.ScopeID != "" {
		add(src.ScopeID)
	}
	if src.ChatID != "" {
		add(src.ChatID)
	}
	if src.ThreadID != "" {
		add(src.ThreadID)
	}
	if participant != "" && opts.GroupSessionsPerUser && !(src.ThreadID != "" && !opts.ThreadSessionsPerUser) {
		add(participant)
	}
	return b.String(), nil
}

// normalizeWhatsApp drops a leading '+' and cuts at the first ':' and the
// first '@' ("+15551234567:47@s.whatsapp.net" -> "15551234567").
func normalizeWhatsApp(id string) string {
	id = strings.TrimPrefix(id, "+")
	if i := strings.IndexByte(id, ':'); i >= 0 {
		id = id[:i]
	}
	if i := strings.IndexByte(id, '@'); i >= 0 {
		id = id[:i]
	}
	return id
}
