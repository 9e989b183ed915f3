package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// SSE is one server-sent event as read from an upstream.
type SSE struct {
	Name string // the event: field ("" when absent)
	Data []byte // data: lines joined with "\n"
	ID   string
	// Raw is the event's exact bytes, terminating blank line included, so a
	// proxy can pass it on untouched.
	Raw []byte
	// Incomplete is set on a trailing event cut off by end of stream.
	Incomplete bool
}

// MaxEventSize bounds one event; a longer one is an error, not a stall.
const MaxEventSize = 8 << 20

// ErrEventTooLarge is returned for an event larger than MaxEventSize.
var ErrEventTooLarge = errors.New("wire: sse event too large")

// SSEReader reads server-sent events (lines ending in "\n" or "\r\n";
// comment lines starting with ":" are kept in Raw but carry no field).
type SSEReader struct {
	r    *bufio.Reader
	done bool
}

// NewSSEReader returns a reader of the events in r.
func NewSSEReader(r io.Reader) *SSEReader {
	return &SSEReader{r: bufio.NewReaderSize(r, 32<<10)}
}

// Next returns the next event. It returns io.EOF after the last one; an
// event cut off by the end of the stream is returned once with Incomplete
// set, its Raw holding the bytes that did arrive.
func (s *SSEReader) Next() (SSE, error) {
	if s.done {
		return SSE{}, io.EOF
	}
	var ev SSE
	var raw []byte
	var data [][]byte
	hasField := false
	for {
		start := len(raw)
		chunk, err := s.r.ReadSlice('\n')
		raw = append(raw, chunk...)
		for errors.Is(err, bufio.ErrBufferFull) && len(raw) <= MaxEventSize {
			chunk, err = s.r.ReadSlice('\n')
			raw = append(raw, chunk...)
		}
		if len(raw) > MaxEventSize {
			return SSE{}, ErrEventTooLarge
		}
		line := raw[start:]
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return SSE{}, fmt.Errorf("wire: read sse: %w", err)
			}
			s.done = true
			if len(bytes.TrimSpace(raw)) == 0 {
				return SSE{}, io.EOF
			}
			if len(line) > 0 {
				parseField(&ev, &data, &hasField, line)
			}
			ev.Data = bytes.Join(data, []byte("\n"))
			ev.Raw = raw
			ev.Incomplete = true
			return ev, nil
		}
		content := bytes.TrimRight(line, "\r\n")
		if len(content) == 0 {
			if !hasField && len(bytes.TrimSpace(raw)) == 0 {
				continue // stray blank lines between events
			}
			ev.Data = bytes.Join(data, []byte("\n"))
			ev.Raw = raw
			return ev, nil
		}
		parseField(&ev, &data, &hasField, content)
	}
}

func parseField(ev *SSE, data *[][]byte, has *bool, line []byte) {
	line = bytes.TrimRight(line, "\r\n")
	if len(line) == 0 || line[0] == ':' {
		return
	}
	*has = true
	name, value, found := bytes.Cut(line, []byte(":"))
	if found && len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	switch string(name) {
	case "data":
		*data = append(*data, append([]byte(nil), value...))
	case "event":
		ev.Name = string(value)
	case "id":
		ev.ID = string(value)
	}
}
