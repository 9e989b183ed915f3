package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// The scanner below walks JSON that json.Valid has already accepted and
// returns byte spans, so edits can splice new bytes into the original text
// without re-encoding anything around them.

var errScan = errors.New("wire: malformed json")

func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i]
// (after leading space).
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	if i >= len(b) {
		return 0, errScan
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errScan
	default:
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, nil
			}
			i++
		}
		return i, nil
	}
}

func skipString(b []byte, i int) (int, error) {
	i++ // opening quote
	for i < len(b) {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return 0, errScan
		}
		i += j
		// the quote is escaped when an odd number of backslashes precede it
		n := 0
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return i + 1, nil
		}
		i++
	}
	return 0, errScan
}

// span is a half-open byte range [Start, End).
type span struct{ Start, End int }

// member is one object member: the key (decoded only when it has no
// escapes) and the span of its value.
type member struct {
	Key   string
	Value span
}

// objectMembers lists the members of the object at b[s.Start:s.End].
func objectMembers(b []byte, s span) ([]member, error) {
	i, empty, ok := openItems(b, s, '{', '}')
	if !ok {
		return nil, fmt.Errorf("wire: expected an object")
	}
	var out []member
	for !empty {
		if i = skipSpace(b, i); i >= s.End || b[i] != '"' {
			return nil, errScan
		}
		ke, err := skipString(b, i)
		if err != nil {
			return nil, err
		}
		key := decodeKey(b[i:ke])
		i = skipSpace(b, ke)
		if i >= s.End || b[i] != ':' {
			return nil, errScan
		}
		vs := skipSpace(b, i+1)
		ve, err := skipValue(b, vs)
		if err != nil {
			return nil, err
		}
		out = append(out, member{Key: key, Value: span{vs, ve}})
		if i, empty, ok = nextItem(b, ve, s.End, '}'); !ok {
			return nil, errScan
		}
	}
	return out, nil
}

// arrayElements lists the element spans of the array at b[s.Start:s.End].
func arrayElements(b []byte, s span) ([]span, error) {
	i, empty, ok := openItems(b, s, '[', ']')
	if !ok {
		return nil, fmt.Errorf("wire: expected an array")
	}
	var out []span
	for !empty {
		if i = skipSpace(b, i); i >= s.End {
			return nil, errScan
		}
		ve, err := skipValue(b, i)
		if err != nil {
			return nil, err
		}
		out = append(out, span{i, ve})
		if i, empty, ok = nextItem(b, ve, s.End, ']'); !ok {
			return nil, errScan
		}
	}
	return out, nil
}

// openItems reads the opening byte of the object or array at
// b[s.Start:s.End]: next is just past it, empty whether closing follows.
func openItems(b []byte, s span, opening, closing byte) (next int, empty, ok bool) {
	i := skipSpace(b, s.Start)
	if i >= s.End || b[i] != opening {
		return 0, false, false
	}
	i = skipSpace(b, i+1)
	return i, i < s.End && b[i] == closing, true
}

// nextItem reads the ',' or the closing byte after an object member or an
// array element ending at b[i], before end: next is just past it, done
// whether it was closing.
func nextItem(b []byte, i, end int, closing byte) (next int, done, ok bool) {
	i = skipSpace(b, i)
	if i >= end {
		return 0, false, false
	}
	switch b[i] {
	case closing:
		return i + 1, true, true
	case ',':
		return i + 1, false, true
	}
	return 0, false, false
}

// find returns the value span of key in members (the last one wins, as in
// encoding/json).
func find(ms []member, key string) (span, bool) {
	var s span
	ok := false
	for _, m := range ms {
		if m.Key == key {
			s, ok = m.Value, true
		}
	}
	return s, ok
}

// splice returns b with b[s.Start:s.End] replaced by repl.
func splice(b []byte, s span, repl []byte) []byte {
	out := make([]byte, 0, len(b)-(s.End-s.Start)+len(repl))
	out = append(out, b[:s.Start]...)
	out = append(out, repl...)
	out = append(out, b[s.End:]...)
	return out
}

// decodeKey decodes a quoted key, resolving escapes only when there are any.
func decodeKey(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1])
	}
	var k string
	if json.Unmarshal(q, &k) != nil {
		return string(q[1 : len(q)-1])
	}
	return k
}
