package executor

import (
	"fmt"

	"github.com/caduceus-dev/caduceus/contract"
)

// RunContext is where a tick runs, which decides whether it may place.
type RunContext string

// Run contexts, from least to most strict.
const (
	ContextCron       RunContext = "cron"        // scheduled, unattended: places live manifests' intents after review
	ContextChat       RunContext = "chat"        // interactive Hermes: places only on a matching EXECUTE: directive
	ContextClaudeCode RunContext = "claude-code" // analyst: never places
)

func (c RunContext) strictness() int {
	switch c {
	case ContextCron:
		return 0
	case ContextChat:
		return 1
	default:
		return 2
	}
}

// Stricter returns the stricter of a and b.
func Stricter(a, b RunContext) RunContext {
	if b.strictness() > a.strictness() {
		return b
	}
	return a
}

// ParseRunContext parses a context name ("cron", "chat", "claude-code"; the
// key vocabulary's "analyst" is claude-code).
func ParseRunContext(s string) (RunContext, error) {
	switch s {
	case "cron":
		return ContextCron, nil
	case "chat":
		return ContextChat, nil
	case "claude-code", "analyst":
		return ContextClaudeCode, nil
	}
	return "", contract.Invalidf("bad_context", "executor: run context %q is not cron, chat or claude-code", s)
}

// DetectContext determines the run context of a local run from the
// environment and the strategist's context_hint (seed 001, run-context
// detection):
//
//   - cron when HERMES_CRON_RUN_ID is set or hint is "cron", and there is
//     no TTY;
//   - chat when a TTY is present and HERMES_SESSION_TYPE=chat;
//   - otherwise claude-code.
//
// A cron signal seen together with a TTY is ambiguous and resolves to the
// strictest context that still applies (chat when the session says so, else
// claude-code). stricter, when not empty, is an operator's --context flag:
// it can only make the result stricter, never looser. Any other hint is
// applied by Tick (HintedContext), which makes the context stricter only.
// DetectContext returns an invalid error only for an unknown stricter value.
func DetectContext(env func(string) string, isTTY bool, stricter, hint string) (RunContext, error) {
	c, _, err := DetectContextSource(env, isTTY, stricter, hint)
	return c, err
}

// DetectContextSource is DetectContext plus the sentence saying what the
// context was decided from (which variables were set, whether the hint said
// cron, whether standard input is a terminal, whether --context made it
// stricter). The sentence goes into the envelope's notes when the context
// keeps a tick from placing.
func DetectContextSource(env func(string) string, isTTY bool, stricter, hint string) (RunContext, string, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	cronID := env("HERMES_CRON_RUN_ID") != ""
	cronSignal := cronID || hint == string(ContextCron)
	signal := "HERMES_CRON_RUN_ID is set"
	if !cronID {
		signal = "context_hint is cron"
	}
	chat := env("HERMES_SESSION_TYPE") == "chat"
	tty := "standard input is not a terminal"
	if isTTY {
		tty = "standard input is a terminal"
	}
	var c RunContext
	var src string
	switch {
	case cronSignal && !isTTY && chat:
		// Scheduled run but the session says chat: ambiguous.
		c, src = ContextChat, signal+" but HERMES_SESSION_TYPE=chat"
	case cronSignal && !isTTY:
		c, src = ContextCron, signal+" and "+tty
	case isTTY && chat:
		c, src = ContextChat, "HERMES_SESSION_TYPE=chat and "+tty
	case cronSignal:
		c, src = ContextClaudeCode, signal+" but "+tty+" and HERMES_SESSION_TYPE is not chat"
	case isTTY:
		c, src = ContextClaudeCode, "HERMES_CRON_RUN_ID is not set, "+tty+" and HERMES_SESSION_TYPE is not chat"
	default:
		c, src = ContextClaudeCode, "HERMES_CRON_RUN_ID is not set and "+tty
	}
	if stricter != "" {
		s, err := ParseRunContext(stricter)
		if err != nil {
			return "", "", err
		}
		if t := Stricter(c, s); t != c {
			src += "; --context " + stricter + " made " + string(c) + " stricter"
			c = t
		}
	}
	return c, src, nil
}

// HintedContext applies a payload's context_hint to the run context c
// decided from source (the environment or the calling key), which stays
// authoritative: a hint naming another run context yields the stricter of
// the two (seed 001: an ambiguous detection takes the strictest mode that
// applies), a hint that is no run context changes nothing. note, when not
// empty, says what happened, naming both.
func HintedContext(c RunContext, source, hint string) (RunContext, string) {
	if hint == "" {
		return c, ""
	}
	h, err := ParseRunContext(hint)
	if err != nil {
		return c, fmt.Sprintf("context_hint %q is not cron, chat or claude-code; ignored", hint)
	}
	if h == c {
		return c, ""
	}
	if source == "" {
		source = "the request"
	}
	s := Stricter(c, h)
	return s, fmt.Sprintf("context_hint %q disagrees with run context %s (from: %s); the stricter %s applies", hint, c, source, s)
}

// ContextFromCaller is the run context of an HTTP or MCP call: the calling
// key's run context, claude-code when the key has none.
func ContextFromCaller(c contract.Caller) RunContext {
	switch c.RunContext {
	case contract.RunCron:
		return ContextCron
	case contract.RunChat:
		return ContextChat
	}
	return ContextClaudeCode
}

// DetectProfile is the loaded profile of a local run: HERMES_PROFILE, else
// "claude-code".
func DetectProfile(env func(string) string) string {
	if env != nil {
		if p := env("HERMES_PROFILE"); p != "" {
			return p
		}
	}
	return "claude-code"
}

func (c RunContext) String() string { return string(c) }

var _ fmt.Stringer = ContextCron
