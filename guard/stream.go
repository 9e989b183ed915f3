package guard

import "strings"

// Hold is how many bytes a Stream keeps back by default: every finding of
// guard/detect but a private key block is shorter (its longest rule needs
// about 180 bytes with its context), so a value never leaves before the
// bytes that would reveal it as one have arrived.
const Hold = 256

// MaxKeyHold bounds what a Stream keeps back of an unfinished private key
// block (a BEGIN ... PRIVATE KEY line with no END yet): past it the held
// block goes out as one placeholder and the rest of the block, up to its
// END line, is dropped.
const MaxKeyHold = 16 << 10

const (
	keyBegin = "-----BEGIN"
	keyEnd   = "-----END"
)

// Stream redacts text that arrives in pieces (a streamed answer's deltas):
// Write returns what may go to the client now and keeps back the last Hold
// bytes — and from the start of any finding that reaches into them, or of
// an unfinished private key block — until later pieces or Flush show what
// they are. The concatenation of what Write and Flush return is the text
// redacted as a whole would be, less the rare finding only context beyond
// Hold would reveal.
type Stream struct {
	r       *Redactor
	hold    int
	pending string
	// inKey: a private key block too long to hold went out as a
	// placeholder; text is dropped until its END line.
	inKey bool
}

// NewStream returns a Stream redacting with r, keeping back hold bytes
// (0: Hold).
func NewStream(r *Redactor, hold int) *Stream {
	if hold <= 0 {
		hold = Hold
	}
	return &Stream{r: r, hold: hold}
}

// Write takes the next piece of text and returns what may be sent now.
func (s *Stream) Write(text string) string {
	if text == "" {
		return ""
	}
	if s.inKey {
		text = s.skipKey(text)
		if text == "" {
			return ""
		}
	}
	s.pending += text
	return s.emit(false)
}

// Flush returns what is still kept back, redacted: the piece of text is
// over (its block or choice ended).
func (s *Stream) Flush() string {
	if s.inKey {
		s.inKey, s.pending = false, ""
		return ""
	}
	return s.emit(true)
}

// Pending is how many bytes s keeps back.
func (s *Stream) Pending() int { return len(s.pending) }

// skipKey drops text up to the end of the private key block being
// dropped (its END line's closing dashes), keeping a marker's tail that a
// piece may have split.
func (s *Stream) skipKey(text string) string {
	buf := s.pending + text
	i := strings.Index(buf, keyEnd)
	if i < 0 {
		// keep what could be the start of the END marker
		s.pending = tail(buf, len(keyEnd)+64)
		return ""
	}
	rest := buf[i+len(keyEnd):]
	j := strings.Index(rest, "-----")
	if j < 0 {
		s.pending = buf[i:]
		return ""
	}
	s.inKey, s.pending = false, ""
	return rest[j+5:]
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// emit sends what is safe of pending (all of it when final).
func (s *Stream) emit(final bool) string {
	p := s.pending
	safe := len(p)
	if !final {
		safe = max(0, len(p)-s.hold)
		// an unfinished private key block is held from its BEGIN
		if b := strings.LastIndex(p, keyBegin); b >= 0 && !keyClosed(p[b:]) {
			if len(p)-b > MaxKeyHold && s.r.want.Has(PrivateKey) {
				out, _ := s.r.Redact(p[:b])
				s.r.count(Finding{Kind: PrivateKey, Rule: "private-key"}, s.r.policy.Action(PrivateKey))
				out += s.r.placeholder(PrivateKey, p[b:b+len(keyBegin)+32])
				s.pending, s.inKey = "", true
				return out
			}
			safe = min(safe, b)
		}
	}
	if safe == 0 {
		return ""
	}
	if s.r.want == 0 {
		s.pending = p[safe:]
		return p[:safe]
	}
	fs := s.r.scan.Scan(p, s.r.want)
	if !final {
		for _, f := range fs {
			if f.End > safe && f.Start < safe {
				safe = f.Start // a finding the kept bytes may still extend
			}
		}
	}
	if safe <= 0 {
		return ""
	}
	out := s.r.apply(p[:safe], fs)
	s.pending = p[safe:]
	return out
}

// apply is Redact of text with its findings fs already known (those past
// text's end are ignored).
func (r *Redactor) apply(text string, fs []Finding) string {
	var b strings.Builder
	last := 0
	for _, f := range fs {
		if f.End > len(text) || f.Start < last || f.Start >= f.End {
			continue
		}
		act := r.policy.Action(f.Kind)
		r.count(f, act)
		if act == Flag || (act == Block && r.dir != Answer) {
			continue
		}
		b.WriteString(text[last:f.Start])
		b.WriteString(r.placeholder(f.Kind, text[f.Start:f.End]))
		last = f.End
	}
	if last == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}

// keyClosed reports whether block, from a BEGIN marker on, holds its END
// line to its closing dashes.
func keyClosed(block string) bool {
	i := strings.Index(block, keyEnd)
	return i >= 0 && strings.Contains(block[i+len(keyEnd):], "-----")
}
