package contract

import (
	"bytes"
	"strconv"
)

// JSONObject writes one JSON object to a buffer, a member at a time in the
// order its methods are called: the opening brace before the first member,
// a comma before each later one, the closing brace at End. A canonical
// writer calls them in key order. Keys are written as given (plain ASCII
// constants, nothing to escape); string values go through WriteJSONString.
//
// It is the member writer of the payloads whose canonical JSON is written
// by hand (the audit record's provenance, the shim's receipts, the relay's
// deliveries): encoding/json's form followed by CanonicalJSON, without the
// round trip.
type JSONObject struct {
	b    *bytes.Buffer
	open bool
}

// NewJSONObject starts an object on b; nothing is written before the first
// member or End.
func NewJSONObject(b *bytes.Buffer) JSONObject { return JSONObject{b: b} }

// Key writes the next member's key; the caller writes its value.
func (o *JSONObject) Key(k string) {
	if o.open {
		o.b.WriteByte(',')
	} else {
		o.b.WriteByte('{')
		o.open = true
	}
	o.b.WriteByte('"')
	o.b.WriteString(k)
	o.b.WriteString(`":`)
}

// Str writes a string member.
func (o *JSONObject) Str(k, v string) {
	o.Key(k)
	WriteJSONString(o.b, v)
}

// OptStr writes a string member tagged omitempty: nothing when v is empty.
func (o *JSONObject) OptStr(k, v string) {
	if v != "" {
		o.Str(k, v)
	}
}

// Int writes an integer member.
func (o *JSONObject) Int(k string, v int64) {
	o.Key(k)
	o.b.Write(strconv.AppendInt(o.b.AvailableBuffer(), v, 10))
}

// Bool writes a boolean member.
func (o *JSONObject) Bool(k string, v bool) {
	o.Key(k)
	o.b.WriteString(strconv.FormatBool(v))
}

// End closes the object ({} when it has no member).
func (o *JSONObject) End() {
	if !o.open {
		o.b.WriteByte('{')
	}
	o.b.WriteByte('}')
}

// WriteCanonicalJSON writes r as CanonicalJSON writes its encoding/json
// form: keys sorted, the omitempty members only when set.
func (r *Route) WriteCanonicalJSON(b *bytes.Buffer) {
	o := NewJSONObject(b)
	o.OptStr("effort", string(r.Effort))
	o.OptStr("provider", string(r.Provider))
	o.Str("requested", r.Requested)
	o.OptStr("resolved_target", r.ResolvedTarget)
	o.End()
}
