package relay

import (
	"bytes"
	"unicode/utf8"
)

// parseFrameFast decodes the hot frame types (inbound and inbound_ack) in
// one pass without reflection. It takes only input it is sure about:
// exactly the wire's lower-case keys, each once, strings without \u
// escapes or invalid UTF-8, and no value the reflective decoder would
// refuse. Anything else (other frame types, unknown keys, numbers, errors
// of any kind) it declines with ok false, and the caller falls back to the
// reflective decoder, so both always agree (decode_test.go proves it).
func parseFrameFast(b []byte) (f Frame, ok bool) {
	if !bytes.Contains(b, []byte(`"inbound`)) {
		return Frame{}, false // no inbound or inbound_ack: decline before copying b
	}
	s := newScanner(b)
	if !s.open() {
		return Frame{}, false
	}
	var (
		typ, buf, platform, bot   string
		haveType, haveEv, haveBuf bool
		havePlatform, haveBot     bool
		ev                        *MessageEvent // allocated when the key comes
	)
	for more := true; more; {
		k, ok := s.key()
		if !ok {
			return Frame{}, false
		}
		switch string(k) {
		case "type":
			if haveType {
				return Frame{}, false
			}
			haveType = true
			typ, ok = s.str()
		case "event":
			if haveEv {
				return Frame{}, false
			}
			haveEv = true
			ev = new(MessageEvent)
			ok = s.event(ev)
		case "bufferId":
			if haveBuf {
				return Frame{}, false
			}
			haveBuf = true
			buf, ok = s.str()
		case "platform":
			if havePlatform {
				return Frame{}, false
			}
			havePlatform = true
			platform, ok = s.str()
		case "botId":
			if haveBot {
				return Frame{}, false
			}
			haveBot = true
			bot, ok = s.str()
		default:
			return Frame{}, false
		}
		if !ok {
			return Frame{}, false
		}
		if more, ok = s.next(); !ok {
			return Frame{}, false
		}
	}
	if !s.end() {
		return Frame{}, false
	}
	switch {
	case typ == FrameInbound && haveEv:
		return Frame{Type: typ, Event: ev, BufferID: buf, Platform: platform, BotID: bot}, true
	case typ == FrameInboundAck && !haveEv && !havePlatform && !haveBot:
		return Frame{Type: typ, BufferID: buf}, true
	}
	return Frame{}, false
}

// scanner reads JSON for parseFrameFast; every method reports false for
// input it declines. The strings it returns are substrings of one copy of
// the input (s), so a frame costs one allocation for all its strings.
type scanner struct {
	b []byte
	s string // string(b)
	i int
}

func newScanner(b []byte) scanner {
	return scanner{b: b, s: string(b)}
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

func (s *scanner) eat(c byte) bool {
	if s.peek() == c {
		s.i++
		return true
	}
	return false
}

// open reads the '{' of a non-empty object.
func (s *scanner) open() bool {
	return s.eat('{') && s.peek() == '"'
}

// next reads the ',' (more) or '}' (!more) after a member.
func (s *scanner) next() (more, ok bool) {
	switch s.peek() {
	case ',':
		s.i++
		return true, s.peek() == '"'
	case '}':
		s.i++
		return false, true
	}
	return false, false
}

// end reports whether only whitespace is left.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// null reads a null.
func (s *scanner) null() bool {
	if s.peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// key reads a member's name and its colon; the name must be plain ASCII
// without escapes.
func (s *scanner) key() ([]byte, bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	for j := start; j < len(s.b); j++ {
		switch c := s.b[j]; {
		case c == '"':
			s.i = j + 1
			return s.b[start:j], s.eat(':')
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return nil, false
		}
	}
	return nil, false
}

// str reads a string: valid UTF-8, escapes other than \u decoded.
func (s *scanner) str() (string, bool) {
	if s.peek() != '"' {
		return "", false
	}
	start := s.i + 1
	ascii := true
	for j := start; j < len(s.b); j++ {
		c := s.b[j]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(s.b[start:j]) {
				return "", false
			}
			s.i = j + 1
			return s.s[start:j], true
		case c == '\\':
			return s.escaped(start, j)
		case c < 0x20:
			return "", false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

// escaped finishes str for a string whose first backslash is at j.
func (s *scanner) escaped(start, j int) (string, bool) {
	out := make([]byte, 0, j-start+16)
	out = append(out, s.b[start:j]...)
	for j < len(s.b) {
		c := s.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", false
			}
			s.i = j + 1
			return string(out), true
		case c == '\\':
			if j+1 >= len(s.b) {
				return "", false
			}
			switch e := s.b[j+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			default: // \u and invalid escapes
				return "", false
			}
			j += 2
		case c < 0x20:
			return "", false
		default:
			out = append(out, c)
			j++
		}
	}
	return "", false
}

// optStr reads a string or null ("").
func (s *scanner) optStr() (string, bool) {
	if s.null() {
		return "", true
	}
	return s.str()
}

// event reads a MessageEvent object the way (*MessageEvent).UnmarshalJSON
// does, declining whatever that would refuse.
func (s *scanner) event(e *MessageEvent) bool {
	if !s.open() {
		return false
	}
	var seen [6]bool
	var mt string
	haveSrc := false
	for more := true; more; {
		k, ok := s.key()
		if !ok {
			return false
		}
		n := -1
		switch string(k) {
		case "text":
			n = 0
			e.Text, ok = s.str()
		case "message_type":
			n = 1
			mt, ok = s.str()
		case "source":
			n = 2
			ok = s.source(&e.Source)
			haveSrc = true
		case "message_id":
			n = 3
			e.MessageID, ok = s.optStr()
		case "reply_to_message_id":
			n = 4
			e.ReplyToMessageID, ok = s.optStr()
		case "media_urls":
			n = 5
			ok = s.strings(&e.MediaURLs)
		default:
			return false
		}
		if !ok || seen[n] {
			return false
		}
		seen[n] = true
		if more, ok = s.next(); !ok {
			return false
		}
	}
	e.MessageType = ParseMessageType(mt)
	return haveSrc
}

// strings reads null (nil) or an array of strings (non-nil, maybe empty).
func (s *scanner) strings(dst *[]string) bool {
	if s.null() {
		*dst = nil
		return true
	}
	if !s.eat('[') {
		return false
	}
	out := []string{}
	if s.eat(']') {
		*dst = out
		return true
	}
	for {
		v, ok := s.str()
		if !ok {
			return false
		}
		out = append(out, v)
		if s.eat(']') {
			*dst = out
			return true
		}
		if !s.eat(',') {
			return false
		}
	}
}

// source reads a SessionSource object the way ParseSource does, declining
// whatever that would refuse (and duplicate keys, which it leaves to it).
func (s *scanner) source(src *SessionSource) bool {
	if !s.open() {
		return false
	}
	var seen [len(sourceStringKeys) + len(sourceBoolKeys)]bool
	typeSeen, typeNull := false, false
	for more := true; more; {
		k, ok := s.key()
		if !ok {
			return false
		}
		if b := src.boolField(string(k)); b != nil {
			n := len(sourceStringKeys) + sourceBoolIndex(string(k))
			if seen[n] {
				return false
			}
			seen[n] = true
			switch {
			case s.lit("true"):
				*b = true
			case s.lit("false"), s.null():
			default:
				return false
			}
		} else {
			n := sourceKeyIndex(k)
			if n < 0 || seen[n] {
				return false
			}
			seen[n] = true
			dst := src.stringField(sourceStringKeys[n])
			if s.null() {
				if n == 2 {
					typeNull = true
				}
			} else if *dst, ok = s.str(); !ok {
				return false
			}
			typeSeen = typeSeen || n == 2
		}
		if more, ok = s.next(); !ok {
			return false
		}
	}
	src.mirrorScope()
	switch {
	case !typeSeen:
		src.ChatType = ChatDM
	case typeNull:
		src.ChatType = ChatTypeNull
	}
	return true
}

// sourceBoolIndex is k's index in sourceBoolKeys, or -1.
func sourceBoolIndex(k string) int {
	for i, b := range sourceBoolKeys {
		if b == k {
			return i
		}
	}
	return -1
}

// sourceKeyIndex is k's index in sourceStringKeys, or -1.
func sourceKeyIndex(k []byte) int {
	if i, ok := sourceKeyIndexes[string(k)]; ok {
		return i
	}
	return -1
}

var sourceKeyIndexes = func() map[string]int {
	m := make(map[string]int, len(sourceStringKeys))
	for i, k := range sourceStringKeys {
		m[k] = i
	}
	return m
}()

// lit reads the literal word (true, false).
func (s *scanner) lit(word string) bool {
	if s.peek() == word[0] && len(s.b)-s.i >= len(word) && string(s.b[s.i:s.i+len(word)]) == word {
		s.i += len(word)
		return true
	}
	return false
}
