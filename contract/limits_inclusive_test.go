package contract

import (
	"strings"
	"testing"
)

// TestLengthLimitsAreInclusive: every length limit of the Go mirrors of the
// schema (provenance, audit outcome, redaction) accepts a value of exactly
// the limit, counted in characters, and refuses one more, as the schema
// does.
func TestLengthLimitsAreInclusive(t *testing.T) {
	goodProv := func() Provenance {
		return Provenance{Surface: SurfaceChat, Actor: Actor{Type: ActorUser, ID: "u1", Display: "U"}, RecordedAt: "2026-11-29T19:57:41.5Z",
			SessionID: "s", ConversationID: "conv_abcd", MessageID: "m", RunID: "r",
			Route: &Route{Requested: "fast", ResolvedTarget: "t", Provider: ProviderLocal, Effort: EffortHigh}}
	}
	prov := map[string]func(p *Provenance, s string){
		"actor.id":              func(p *Provenance, s string) { p.Actor.ID = s },
		"actor.display":         func(p *Provenance, s string) { p.Actor.Display = s },
		"session_id":            func(p *Provenance, s string) { p.SessionID = s },
		"message_id":            func(p *Provenance, s string) { p.MessageID = s },
		"run_id":                func(p *Provenance, s string) { p.RunID = s },
		"route.requested":       func(p *Provenance, s string) { p.Route.Requested = s },
		"route.resolved_target": func(p *Provenance, s string) { p.Route.ResolvedTarget = s },
	}
	for field, set := range prov {
		for n, ok := range map[int]bool{120: true, 121: false} {
			p := goodProv()
			set(&p, strings.Repeat("é", n))
			goErr, schemaErr := p.Validate(), Def("provenance").Validate(p)
			if (goErr == nil) != ok || (schemaErr == nil) != ok {
				t.Errorf("provenance %s of %d characters: Go %v, schema %v; want ok %v", field, n, goErr, schemaErr, ok)
			}
		}
	}
	// A conversation id is optional, but when given it is an id.
	for id, ok := range map[string]bool{"": true, "conv_abcd": true, "conv_" + strings.Repeat("x", 80): true, "conv_" + strings.Repeat("x", 81): false, "conv": false} {
		p := goodProv()
		p.ConversationID = id
		if err := p.Validate(); (err == nil) != ok {
			t.Errorf("conversation_id %q: %v, want ok %v", id, err, ok)
		}
	}
	goodOutcome := func() AuditOutcome {
		return AuditOutcome{At: "2026-11-29T19:57:41Z", Identity: Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: SurfaceAPI, Trust: TrustRouter},
			Action: "keys.create", Resource: "key/1", Outcome: OutcomeAllow, Reason: "ok"}
	}
	for field, set := range map[string]func(o *AuditOutcome, s string){
		"resource": func(o *AuditOutcome, s string) { o.Resource = s },
		"reason":   func(o *AuditOutcome, s string) { o.Reason = s },
	} {
		for n, ok := range map[int]bool{200: true, 201: false} {
			o := goodOutcome()
			set(&o, strings.Repeat("é", n))
			goErr, schemaErr := o.Validate(), Def("audit_outcome").Validate(o)
			if (goErr == nil) != ok || (schemaErr == nil) != ok {
				t.Errorf("audit outcome %s of %d characters: Go %v, schema %v; want ok %v", field, n, goErr, schemaErr, ok)
			}
		}
	}
	for n, ok := range map[int]bool{200: true, 201: false} {
		r := Redaction{Level: RedactionFull, Reason: strings.Repeat("é", n)}
		if err := r.Validate(); (err == nil) != ok {
			t.Errorf("redaction reason of %d characters: %v, want ok %v", n, err, ok)
		}
	}
}

// TestOutcomeRefusalNamesTheField: a refused audit outcome names the
// offending field as a JSON pointer, the identity's fields under
// /identity.
func TestOutcomeRefusalNamesTheField(t *testing.T) {
	good := AuditOutcome{At: "2026-11-29T19:57:41Z", Identity: Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: SurfaceAPI, Trust: TrustRouter},
		Action: "keys.create", Resource: "key/1", Outcome: OutcomeAllow}
	for want, mutate := range map[string]func(o *AuditOutcome){
		"/at":                   func(o *AuditOutcome) { o.At = "now" },
		"/identity/tenant_slot": func(o *AuditOutcome) { o.Identity.TenantSlot = "slot-x" },
		"/identity/subject":     func(o *AuditOutcome) { o.Identity.Subject = "usr_x" },
		"/identity/surface":     func(o *AuditOutcome) { o.Identity.Surface = "fax" },
		"/identity/trust":       func(o *AuditOutcome) { o.Identity.Trust = "" },
		"/action":               func(o *AuditOutcome) { o.Action = "keys" },
		"/resource":             func(o *AuditOutcome) { o.Resource = "\xff" },
		"/outcome":              func(o *AuditOutcome) { o.Outcome = "maybe" },
		"/reason":               func(o *AuditOutcome) { o.Reason = strings.Repeat("x", 201) },
	} {
		o := good
		mutate(&o)
		e := AsError(o.Validate())
		if e == nil || e.Field != want || e.Code != "schema_invalid" || !strings.HasPrefix(e.Message, "field "+strings.ReplaceAll(strings.TrimPrefix(want, "/"), "/", ".")) {
			t.Errorf("%s: %+v", want, e)
		}
	}
}

// TestOutcomeTextIsStorable: a resource or reason that is not valid UTF-8
// or holds a NUL is refused, naming its field, on every store alike
// (Postgres keeps neither in text); a NUL escape's text ("\\u0000") is
// kept.
func TestOutcomeTextIsStorable(t *testing.T) {
	good := AuditOutcome{At: "2026-11-29T19:57:41Z", Identity: Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: SurfaceAPI, Trust: TrustRouter},
		Action: "keys.create", Resource: "key/1", Outcome: OutcomeAllow}
	for _, c := range []struct {
		field, resource, reason string
	}{
		{"/resource", "context/\x00", ""},
		{"/resource", "\x00", ""},
		{"/resource", "key/\xff", ""},
		{"/reason", "key/1", "a\x00b"},
		{"/reason", "key/1", "\xc3\x28"},
		{"", "context/\\u0000", "why \\u0000"},
		{"", "context/é", "héllo"},
	} {
		o := good
		o.Resource, o.Reason = c.resource, c.reason
		e := AsError(o.Validate())
		switch {
		case c.field == "" && e != nil:
			t.Errorf("%q %q refused: %v", c.resource, c.reason, e)
		case c.field != "" && (e == nil || e.Field != c.field || !strings.Contains(e.Message, "NUL")):
			t.Errorf("%q %q: %+v, want a refusal naming %s", c.resource, c.reason, e, c.field)
		}
	}
}

// TestStorableTextIsAlwaysStored: whatever bytes come in, StorableText's
// result passes AuditOutcome.Validate as a resource and a reason (valid
// UTF-8, no NUL, within the bound), cut on a character boundary; text
// that is storable and short enough is kept as it is.
func TestStorableTextIsAlwaysStored(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"key/1", 200, "key/1"},
		{"a\x00b", 200, "a\uFFFDb"},
		{"a\xffb", 200, "a\uFFFDb"},
		{"ééé", 3, "é"},  // 6 bytes, cut inside the second é
		{"ééé", 4, "éé"}, // at a boundary
		{"abc", 3, "abc"},
		{"abcd", 3, "abc"},
		{"\x00", 1, ""}, // U+FFFD is three bytes: none fits
		{"", 0, ""},
	} {
		if got := StorableText(c.in, c.n); got != c.want {
			t.Errorf("StorableText(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func FuzzStorableText(f *testing.F) {
	for _, s := range []string{"", "key/1", "a\x00b", "\xff\xfe", strings.Repeat("é", 150), "\xe2\x82"} {
		f.Add(s, 200)
	}
	good := AuditOutcome{At: "2026-11-29T19:57:41Z", Identity: Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: SurfaceAPI, Trust: TrustRouter},
		Action: "keys.create", Outcome: OutcomeAllow}
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = min(max(n, 0), 200)
		got := StorableText(s, n)
		if len(got) > n {
			t.Fatalf("StorableText(%q, %d) = %q: %d bytes", s, n, got, len(got))
		}
		o := good
		o.Resource, o.Reason = got, got
		if err := o.Validate(); err != nil {
			t.Fatalf("StorableText(%q, %d) = %q refused: %v", s, n, got, err)
		}
		if storableText(s) && len(s) <= n && got != s {
			t.Fatalf("StorableText(%q, %d) = %q changed storable text", s, n, got)
		}
	})
}
