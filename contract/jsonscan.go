package contract

import "bytes"

// scanner is the cursor the input rule's checker and the canonicalizer
// share: the bytes, the offset, and the parts of the JSON grammar both read
// alike (white space, literals, numbers, how objects and arrays open and
// separate their members and elements).
type scanner struct {
	in  []byte
	pos int
}

func (s *scanner) bad(what string) error {
	return Invalidf(CodeBadJSON, "not valid JSON: %s at offset %d", what, s.pos)
}

func (s *scanner) space() {
	for s.pos < len(s.in) {
		switch s.in[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// skipLiteral consumes the true, false or null at s.pos and returns it, or
// returns "" when none stands there.
func (s *scanner) skipLiteral() string {
	for _, lit := range [...]string{"true", "false", "null"} {
		if bytes.HasPrefix(s.in[s.pos:], []byte(lit)) {
			s.pos += len(lit)
			return lit
		}
	}
	return ""
}

// skipNumber consumes the JSON number at s.pos, which starts with '-' or a
// digit, after checking RFC 8259's grammar:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) skipNumber() error {
	digits := func() int {
		n := 0
		for s.pos < len(s.in) && '0' <= s.in[s.pos] && s.in[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.in[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.in) && s.in[s.pos] == '0' {
		s.pos++
	} else if digits() == 0 {
		return s.bad("bad number")
	}
	if s.pos < len(s.in) && s.in[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return s.bad("bad number")
		}
	}
	if s.pos < len(s.in) && (s.in[s.pos] == 'e' || s.in[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.in) && (s.in[s.pos] == '+' || s.in[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return s.bad("bad number")
		}
	}
	return nil
}

// open consumes the '{' or '[' at s.pos and the space after it; empty
// reports (and consumes) a closing byte right after.
func (s *scanner) open(closing byte) (empty bool) {
	s.pos++
	s.space()
	if s.pos < len(s.in) && s.in[s.pos] == closing {
		s.pos++
		return true
	}
	return false
}

// next consumes what follows an object member or an array element: a ','
// (more follow) or the closing byte (done). ok is false when neither is
// there; badNext then says so.
func (s *scanner) next(closing byte) (done, ok bool) {
	s.space()
	if s.pos < len(s.in) {
		if ch := s.in[s.pos]; ch == ',' || ch == closing {
			s.pos++
			return ch == closing, true
		}
	}
	return false, false
}

// badNext is the refusal of what stands where next wanted a ',' or
// closing; where ("" or, say, " in an object") ends its message.
func (s *scanner) badNext(closing byte, where string) error {
	if s.pos >= len(s.in) {
		return s.bad("unexpected end of input" + where)
	}
	return s.bad("expected ',' or '" + string(closing) + "'" + where)
}
