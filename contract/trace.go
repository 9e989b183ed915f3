package contract

import (
	"runtime/debug"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/internal/lazyre"
)

// HeaderConversation names the conversation a request belongs to on every
// HTTP gate: a relay session key ("agent:main:telegram:dm:42"), a conv_ id,
// or any caller-chosen name. The gates map it with ConversationFor.
const HeaderConversation = "X-Caduceus-Conversation"

// MaxConversationBytes bounds a caller-given conversation name.
const MaxConversationBytes = 512

// CheckConversation refuses a conversation name that is empty, longer than
// MaxConversationBytes, not valid UTF-8, or holds a control character;
// where names the source ("X-Caduceus-Conversation", "--conversation").
func CheckConversation(where, s string) error {
	switch {
	case s == "":
		return Invalidf("bad_conversation", "%s is empty", where)
	case len(s) > MaxConversationBytes:
		return Invalidf("bad_conversation", "%s is %d bytes; at most %d", where, len(s), MaxConversationBytes)
	case !utf8.ValidString(s):
		return Invalidf("bad_conversation", "%s is not valid UTF-8", where)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return Invalidf("bad_conversation", "%s holds a control character (%U)", where, r)
		}
	}
	return nil
}

// CheckRunID refuses a run id that does not fit provenance run_id (1 to
// 120 characters, valid UTF-8, no control character).
func CheckRunID(where, s string) error {
	if s == "" || !utf8.ValidString(s) || utf8.RuneCountInString(s) > 120 {
		return Invalidf("bad_run_id", "%s must be 1 to 120 characters of valid UTF-8", where)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return Invalidf("bad_run_id", "%s holds a control character (%U)", where, r)
		}
	}
	return nil
}

// Trace is what ties a gate's records to a conversation and a run: it
// rides on the Caller from the entry point (an HTTP header, an MCP _meta, a
// CLI flag or the environment) to the provenance of every record written.
type Trace struct {
	// Conversation is the conversation as the caller named it: a session
	// key or a conv_ id (empty: none).
	Conversation string
	// RunID is the scheduler's run (HERMES_CRON_RUN_ID), if any.
	RunID string
	// Route is the entry point the request came through, e.g.
	// "POST /v1/trader/decisions", "mcp apply_decision", "cli trader apply".
	Route string
}

// Stamp fills p from the trace for tenant: conversation_id (ConversationFor)
// and session_id (the name itself, or its sha256 when longer than
// provenance allows; none when the name already is a conv_ id), run_id,
// route (when p has none) and build.
func (t Trace) Stamp(tenant TenantSlot, p *Provenance) {
	if t.Conversation != "" {
		p.ConversationID = ConversationFor(tenant, t.Conversation)
		if !IsConversationID(t.Conversation) {
			p.SessionID = SessionIDFor(t.Conversation)
		}
	}
	if t.RunID != "" {
		p.RunID = t.RunID
	}
	if p.Route == nil && t.Route != "" {
		p.Route = &Route{Requested: clipRunes(t.Route, 120)}
	}
	if p.Build == nil {
		p.Build = CurrentBuild()
	}
}

// SessionIDFor is the provenance session_id of a session key: the key
// itself when it fits (120 characters), else its sha256.
func SessionIDFor(key string) string {
	if utf8.RuneCountInString(key) <= 120 {
		return key
	}
	return SHA256([]byte(key))
}

// Provenance is the provenance of a record the caller causes at ts (an
// RFC 3339 UTC timestamp), by an actor of type actor, stamped with the
// caller's trace.
func (c Caller) Provenance(actor ActorType, ts string) *Provenance {
	surface := c.Identity.Surface
	if surface == "" {
		surface = SurfaceAPI
	}
	id := c.Identity.Subject
	if id == "" {
		id = "unknown"
	}
	p := &Provenance{Surface: surface, Actor: Actor{Type: actor, ID: id}, RecordedAt: ts}
	c.Trace.Stamp(c.Identity.TenantSlot, p)
	return p
}

var buildOnce = sync.OnceValue(func() Build {
	var b Build
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && commitRE().MatchString(s.Value) {
				b.Commit = s.Value
			}
		}
	}
	return b
})

// CurrentBuild is the provenance build of this binary: the VCS commit the
// Go toolchain stamped (runtime/debug.ReadBuildInfo), empty when it stamped
// none (go test, a build outside a repository).
func CurrentBuild() *Build {
	b := buildOnce()
	return &b
}

var controlRE = lazyre.New(`[\x00-\x1f\x7f]`)

func clipRunes(s string, n int) string {
	s = controlRE().ReplaceAllString(s, " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n])
}
