package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
)

// withoutNullUsage drops a chat completions chunk's "usage": null member,
// which an upstream asked for include_usage writes into every chunk and a
// client that did not ask never sees from the provider; every other byte is
// kept. ok is false when the chunk has no such member (data returned as is).
func withoutNullUsage(data []byte) (out []byte, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return data, false
	}
	open := int(dec.InputOffset()) // just after '{'
	prevEnd := open
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return data, false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return data, false
		}
		end := int(dec.InputOffset())
		if k, _ := t.(string); k != "usage" || string(raw) != "null" {
			prevEnd = end
			continue
		}
		if prevEnd != open { // not the first member: drop from the comma before it
			return splice(data, prevEnd, end, nil), true
		}
		// The first member: drop through the comma after it, if any.
		rest := bytes.TrimLeft(data[end:], " \t\r\n")
		if len(rest) > 0 && rest[0] == ',' {
			rest = bytes.TrimLeft(rest[1:], " \t\r\n")
		}
		return splice(data, open, len(data)-len(rest), nil), true
	}
	return data, false
}

// readAll reads at most max bytes of r.
func readAll(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return b, err
	}
	if int64(len(b)) > max {
		return b, errors.New("gateway: upstream answer too large")
	}
	return b, nil
}

// responseID is the id of a Responses API answer in data: a JSON answer's
// own id ({"id":"resp_...","object":"response",...}), or the response.id
// of a stream event (response.created carries it first). "" when data
// names none.
func responseID(data []byte) string {
	if !bytes.Contains(data, []byte(`"resp`)) {
		return ""
	}
	var d struct {
		ID       string `json:"id"`
		Object   string `json:"object"`
		Response *struct {
			ID string `json:"id"`
		} `json:"response"`
	}
	if json.Unmarshal(data, &d) != nil {
		return ""
	}
	if d.Response != nil {
		return d.Response.ID
	}
	if d.Object == "response" {
		return d.ID
	}
	return ""
}

// splice is b with b[start:end] replaced by repl.
func splice(b []byte, start, end int, repl []byte) []byte {
	out := make([]byte, 0, len(b)-(end-start)+len(repl))
	out = append(out, b[:start]...)
	out = append(out, repl...)
	return append(out, b[end:]...)
}
