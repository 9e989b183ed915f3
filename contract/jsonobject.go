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

// OptRoute writes member k as r's canonical JSON (keys sorted, the
// omitempty members only when set), nothing when r is nil: the route of a
// provenance and of a receipt.
func (o *JSONObject) OptRoute(k string, r *Route) {
	if r == nil {
		return
	}
	o.Key(k)
	route := NewJSONObject(o.b)
	route.OptStr("effort", string(r.Effort))
	route.OptStr("provider", string(r.Provider))
	route.Str("requested", r.Requested)
	route.OptStr("resolved_target", r.ResolvedTarget)
	route.End()
}

// End closes the object ({} when it has no member).
func (o *JSONObject) End() {
	if !o.open {
		o.b.WriteByte('{')
	}
	o.b.WriteByte('}')
}

// WriteCanonicalJSON writes p as CanonicalJSON writes its encoding/json
// form (keys sorted, an omitempty member only when set): the audit log
// seals every record's provenance this way. TestProvenanceCanonicalJSON
// holds it to CanonicalJSON.
func (p *Provenance) WriteCanonicalJSON(b *bytes.Buffer) {
	o := NewJSONObject(b)
	o.Key("actor")
	actor := NewJSONObject(b)
	actor.OptStr("display", p.Actor.Display)
	actor.Str("id", p.Actor.ID)
	actor.Str("type", string(p.Actor.Type))
	actor.End()
	if p.Build != nil {
		o.Key("build")
		build := NewJSONObject(b)
		build.OptStr("commit", p.Build.Commit)
		build.OptStr("image_digest", p.Build.ImageDigest)
		build.End()
	}
	o.OptStr("conversation_id", p.ConversationID)
	o.OptStr("message_id", p.MessageID)
	o.Str("recorded_at", p.RecordedAt)
	o.OptRoute("route", p.Route)
	o.OptStr("run_id", p.RunID)
	o.OptStr("session_id", p.SessionID)
	o.Str("surface", string(p.Surface))
	o.End()
}
