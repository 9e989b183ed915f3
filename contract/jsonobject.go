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
// by hand (the provenance below, the shim's receipts, the relay's
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

// The provenance's types write themselves as CanonicalJSON writes their
// encoding/json form: keys sorted, an omitempty member only when set. The
// audit log seals every record's provenance this way, and a receipt its
// route; TestProvenanceCanonicalJSON holds them to CanonicalJSON.

// WriteCanonicalJSON writes p's canonical JSON.
func (p *Provenance) WriteCanonicalJSON(b *bytes.Buffer) {
	o := NewJSONObject(b)
	o.Key("actor")
	p.Actor.WriteCanonicalJSON(b)
	if p.Build != nil {
		o.Key("build")
		p.Build.WriteCanonicalJSON(b)
	}
	o.OptStr("conversation_id", p.ConversationID)
	o.OptStr("message_id", p.MessageID)
	o.Str("recorded_at", p.RecordedAt)
	if p.Route != nil {
		o.Key("route")
		p.Route.WriteCanonicalJSON(b)
	}
	o.OptStr("run_id", p.RunID)
	o.OptStr("session_id", p.SessionID)
	o.Str("surface", string(p.Surface))
	o.End()
}

// WriteCanonicalJSON writes a's canonical JSON.
func (a *Actor) WriteCanonicalJSON(b *bytes.Buffer) {
	o := NewJSONObject(b)
	o.OptStr("display", a.Display)
	o.Str("id", a.ID)
	o.Str("type", string(a.Type))
	o.End()
}

// WriteCanonicalJSON writes bd's canonical JSON.
func (bd *Build) WriteCanonicalJSON(b *bytes.Buffer) {
	o := NewJSONObject(b)
	o.OptStr("commit", bd.Commit)
	o.OptStr("image_digest", bd.ImageDigest)
	o.End()
}

// WriteCanonicalJSON writes r's canonical JSON.
func (r *Route) WriteCanonicalJSON(b *bytes.Buffer) {
	o := NewJSONObject(b)
	o.OptStr("effort", string(r.Effort))
	o.OptStr("provider", string(r.Provider))
	o.Str("requested", r.Requested)
	o.OptStr("resolved_target", r.ResolvedTarget)
	o.End()
}
