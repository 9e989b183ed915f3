package contract

import (
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// sampleValues are values the package produces; each must validate against
// its schema definition.
func sampleValues() map[string]any {
	now := Timestamp(time.Date(2026, 11, 29, 19, 57, 41, 123456789, time.UTC))
	ident := Identity{TenantSlot: "slot-1", Subject: "usr_" + strings.Repeat("ab", 32), Surface: SurfaceAPI, Trust: TrustRouter}
	return map[string]any{
		"id":               NewID(PrefixEvent),
		"user_ref":         ident.Subject,
		"timestamp":        now,
		"sha256":           SHA256([]byte("x")),
		"surface":          SurfaceTelegram,
		"provider":         ProviderClaude,
		"effort":           EffortXHigh,
		"sensitivity":      SensitivityRestricted,
		"redaction":        Redaction{Level: RedactionPartial, Reason: "pii"},
		"actor":            Actor{Type: ActorOperator, ID: "ops", Display: "Ops"},
		"route":            Route{Requested: "fast", ResolvedTarget: "t1", Provider: ProviderLocal, Effort: EffortLow},
		"build":            Build{Commit: strings.Repeat("a", 40), ImageDigest: SHA256(nil)},
		"provenance":       Provenance{Surface: SurfaceChat, Actor: Actor{Type: ActorUser, ID: "u"}, RecordedAt: now, ConversationID: NewID(PrefixConversation), Route: &Route{Requested: "x"}, Build: &Build{}},
		"evidence_ref":     EvidenceRef{Kind: EvidenceReceipt, ID: NewID(PrefixReceipt), Hash: SHA256([]byte("r"))},
		"tags":             Tags{"a", "b-2"},
		"tenant_slot":      TenantSlot("slot-999"),
		"trust":            TrustEvidence,
		"identity":         ident,
		"revision":         Revision(1),
		"idempotency_key":  IdempotencyKey("decision:0001"),
		"contract_version": Version,
		"audit_outcome":    AuditOutcome{At: now, Identity: ident, Action: "keys.create", Resource: "key/abc", Outcome: OutcomeAllow, Reason: "ok"},
	}
}

func TestEveryDefHasAGoValueThatValidates(t *testing.T) {
	b, err := schemaFS.ReadFile("schema/common.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]json.RawMessage `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	samples := sampleValues()
	for name := range doc.Defs {
		v, ok := samples[name]
		if !ok {
			t.Errorf("$defs/%s has no Go sample value", name)
			continue
		}
		if err := Def(name).Validate(v); err != nil {
			t.Errorf("$defs/%s: Go value %+v does not validate: %v", name, v, err)
		}
	}
	if len(samples) != len(doc.Defs) {
		t.Errorf("samples for %d defs, schema has %d", len(samples), len(doc.Defs))
	}
}

// TestGoldenViolations: every pattern, enum and bound of the common schema is
// refused with a message naming the field.
func TestGoldenViolations(t *testing.T) {
	ident := `{"tenant_slot":"slot-1","subject":"usr_0123456789abcdef","surface":"api","trust":"router"}`
	cases := []struct {
		def, doc, field string
	}{
		{"id", `"EVT_abcd"`, "(root)"},
		{"id", `"e_abcd"`, "(root)"},
		{"id", `"evt_ab"`, "(root)"},
		{"user_ref", `"usr_ABCDEF0123456789"`, "(root)"},
		{"user_ref", `"usr_0123"`, "(root)"},
		{"timestamp", `"2026-11-29T19:57:41+01:00"`, "(root)"},
		{"timestamp", `"2026-11-29T19:57:41.1234567Z"`, "(root)"},
		{"sha256", `"sha256:ABC"`, "(root)"},
		{"surface", `"email"`, "(root)"},
		{"provider", `"gpt-4o"`, "(root)"},
		{"effort", `"max"`, "(root)"},
		{"sensitivity", `"secret"`, "(root)"},
		{"redaction", `{"level":"some"}`, "level"},
		{"redaction", `{"level":"none","extra":1}`, "(root)"},
		{"actor", `{"type":"robot","id":"x"}`, "type"},
		{"actor", `{"type":"user","id":""}`, "id"},
		{"route", `{"requested":"x","provider":"openai"}`, "provider"},
		{"build", `{"commit":"abc"}`, "commit"},
		{"provenance", `{"surface":"api","actor":{"type":"user","id":"u"},"recorded_at":"yesterday"}`, "recorded_at"},
		{"provenance", `{"surface":"api","actor":{"type":"user","id":"u"},"recorded_at":"2026-11-29T19:57:41Z","conversation_id":"bad"}`, "conversation_id"},
		{"evidence_ref", `{"kind":"blob","id":"x"}`, "kind"},
		{"tags", `["Upper"]`, "0"},
		{"tags", `["a","a"]`, "(root)"},
		{"tenant_slot", `"slot-1000"`, "(root)"},
		{"trust", `"self"`, "(root)"},
		{"identity", `{"tenant_slot":"tenant-1","subject":"usr_0123456789abcdef","surface":"api","trust":"router"}`, "tenant_slot"},
		{"identity", `{"tenant_slot":"slot-1","subject":"bob@example.com","surface":"api","trust":"router"}`, "subject"},
		{"revision", `0`, "(root)"},
		{"revision", `1.5`, "(root)"},
		{"idempotency_key", `"short"`, "(root)"},
		{"idempotency_key", `"has space in it"`, "(root)"},
		{"contract_version", `"2.0.0"`, "(root)"},
		{"audit_outcome", `{"at":"2026-11-29T19:57:41Z","identity":` + ident + `,"action":"Keys.Create","resource":"k","outcome":"allow"}`, "action"},
		{"audit_outcome", `{"at":"2026-11-29T19:57:41Z","identity":` + ident + `,"action":"keys.create","resource":"k","outcome":"maybe"}`, "outcome"},
	}
	for _, c := range cases {
		t.Run(c.def+"/"+c.doc, func(t *testing.T) {
			err := Def(c.def).ValidateJSON([]byte(c.doc))
			if err == nil {
				t.Fatalf("accepted %s as %s", c.doc, c.def)
			}
			e, ok := errors.AsType[*Error](err)
			if !ok || e.Kind != KindInvalid {
				t.Fatalf("want invalid *Error, got %T %v", err, err)
			}
			if !strings.Contains(e.Message, "field "+c.field+":") {
				t.Errorf("message %q does not name field %q", e.Message, c.field)
			}
		})
	}
}

func TestPatternsAgreeWithSchema(t *testing.T) {
	checks := []struct {
		def   string
		valid func(string) bool
		in    []string
	}{
		{"id", ValidID, []string{"evt_abcd", "evt_ab", "EVT_abcd", "rcpt_01J.x-y_z", "toolong_abcd"}},
		{"user_ref", ValidUserRef, []string{"usr_0123456789abcdef", "usr_0123", "usr_0123456789ABCDEF"}},
		{"sha256", ValidSHA256, []string{SHA256(nil), "sha256:00"}},
		{"tenant_slot", ValidTenantSlot, []string{"slot-1", "slot-0001", "slot-"}},
		{"idempotency_key", ValidIdempotencyKey, []string{"abcdefgh", "abc", "a b c d e f"}},
		{"contract_version", ValidContractVersion, []string{"1.0.0", "1.2", "2.0.0"}},
	}
	for _, c := range checks {
		for _, s := range c.in {
			b, _ := json.Marshal(s)
			schemaOK := Def(c.def).ValidateJSON(b) == nil
			if got := c.valid(s); got != schemaOK {
				t.Errorf("%s(%q): Go says %v, schema says %v", c.def, s, got, schemaOK)
			}
		}
	}
}

func TestNewIDSortsByTime(t *testing.T) {
	var ids []string
	for range 2000 {
		ids = append(ids, NewID(PrefixEvent))
	}
	if !slices.IsSorted(ids) {
		t.Fatal("ids made in sequence do not sort in sequence")
	}
	if len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Fatal("duplicate ids")
	}
	early := "evt_" + NewULID(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))
	if early >= ids[0] {
		t.Errorf("an id from 2020 (%s) does not sort before one from now (%s)", early, ids[0])
	}
	for _, id := range ids[:10] {
		if !ValidID(id) || len(id) != len("evt_")+26 {
			t.Errorf("bad id %q", id)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	a, err := CanonicalJSON(json.RawMessage(`{ "b": [1, 2.50, {"z":null,"a":true}], "a": "x<y" }`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"a":"x<y","b":[1,2.50,{"a":true,"z":null}]}`
	if string(a) != want {
		t.Errorf("got %s want %s", a, want)
	}
	b, _ := CanonicalJSON(map[string]any{"a": "x<y", "b": []any{1, json.Number("2.50"), map[string]any{"z": nil, "a": true}}})
	if string(b) != want {
		t.Errorf("map form: got %s want %s", b, want)
	}
	for _, bad := range []string{`{`, `{"a":1} {"b":2}`, ``} {
		if _, err := CanonicalJSON(json.RawMessage(bad)); KindOf(err) != KindInvalid {
			t.Errorf("CanonicalJSON(%q) = %v, want invalid", bad, err)
		}
	}
}

func TestErrorMaps(t *testing.T) {
	cases := []struct {
		kind    Kind
		status  int
		rpc     int64
		outcome Outcome
	}{
		{KindInvalid, 400, -32602, OutcomeDeny},
		{KindUnauthenticated, 401, -32001, OutcomeDeny},
		{KindDeny, 403, -32003, OutcomeDeny},
		{KindNotFound, 404, -32004, OutcomeNotFound},
		{KindConflict, 409, -32009, OutcomeConflict},
		{KindFlagOff, 501, -32010, OutcomeFlagOff},
		{KindPrecondition, 428, -32028, OutcomeConflict},
		{KindInternal, 500, -32603, OutcomeDeny},
	}
	for _, c := range cases {
		if got := c.kind.HTTPStatus(); got != c.status {
			t.Errorf("%v: HTTP %d want %d", c.kind, got, c.status)
		}
		if got := c.kind.RPCCode(); got != c.rpc {
			t.Errorf("%v: RPC %d want %d", c.kind, got, c.rpc)
		}
		if got := c.kind.Outcome(); got != c.outcome {
			t.Errorf("%v: outcome %s want %s", c.kind, got, c.outcome)
		}
	}
	wrapped := errors.Join(errors.New("disk"), Conflictf("stale_revision", "revision 3 is stale"))
	if KindOf(wrapped) != KindConflict {
		t.Errorf("KindOf through a wrap = %v", KindOf(wrapped))
	}
	if e := AsError(errors.New("boom")); e.Kind != KindInternal || e.Message != "internal error" {
		t.Errorf("foreign error became %+v", e)
	}
}

func TestTimestamp(t *testing.T) {
	ts := Timestamp(time.Date(2026, 1, 2, 3, 4, 5, 600000000, time.FixedZone("x", 3600)))
	if ts != "2026-01-02T02:04:05.6Z" {
		t.Errorf("Timestamp = %s", ts)
	}
	if _, err := ParseTimestamp(ts); err != nil {
		t.Error(err)
	}
	if _, err := ParseTimestamp("2026-01-02 02:04:05"); KindOf(err) != KindInvalid {
		t.Errorf("ParseTimestamp accepted a bad stamp: %v", err)
	}
}

// TestNoIODependencies keeps contract free of I/O: no net/http, database/sql,
// drivers, or anything of this module's outside contract but internal/swar
// (byte arithmetic, whose own imports this list covers too).
func TestNoIODependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{"net/http", "database/sql", "modernc.org/", "github.com/jackc/", "os/exec", "net"}
	for dep := range strings.FieldsSeq(string(out)) {
		for _, f := range forbidden {
			if dep == f || (strings.HasSuffix(f, "/") && strings.HasPrefix(dep, f)) {
				t.Errorf("contract depends on %s", dep)
			}
		}
		if strings.HasPrefix(dep, "github.com/caduceus-dev/caduceus/") && dep != "github.com/caduceus-dev/caduceus/contract" &&
			dep != "github.com/caduceus-dev/caduceus/internal/swar" && dep != "github.com/caduceus-dev/caduceus/internal/lazyre" {
			t.Errorf("contract depends on %s", dep)
		}
	}
}

// FuzzCanonicalJSON: canonical JSON is a fixed point, and two encodings of
// one document (reparsed) canonicalize the same.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x"]}`, `1.50`, `"\u00e9<>&"`, `[]`, `{"a":{"c":1,"b":2}}`, `{`, `nul`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c1, err := CanonicalJSON(json.RawMessage(b))
		if err != nil {
			if KindOf(err) != KindInvalid {
				t.Fatalf("error kind %v for %q", KindOf(err), b)
			}
			return
		}
		c2, err := CanonicalJSON(json.RawMessage(c1))
		if err != nil || string(c1) != string(c2) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", b, c1, c2, err)
		}
		if !json.Valid(c1) {
			t.Fatalf("invalid output %q", c1)
		}
	})
}

// FuzzSchemaValidate: validating arbitrary bytes never panics, and a refusal
// is always an invalid Error with a message.
func FuzzSchemaValidate(f *testing.F) {
	f.Add([]byte(`{"tenant_slot":"slot-1","subject":"usr_0123456789abcdef","surface":"api","trust":"router"}`))
	f.Add([]byte(`{"tenant_slot":1}`))
	f.Add([]byte(`[`))
	s := Def("identity")
	f.Fuzz(func(t *testing.T, b []byte) {
		err := s.ValidateJSON(b)
		if err == nil {
			var id Identity
			if json.Unmarshal(b, &id) != nil || !ValidTenantSlot(string(id.TenantSlot)) || !ValidUserRef(id.Subject) {
				t.Fatalf("accepted %q", b)
			}
			return
		}
		if e := AsError(err); e.Kind != KindInvalid || e.Message == "" {
			t.Fatalf("refusal %v", err)
		}
	})
}

// TestGoValidatorsAgreeWithSchema: the Go fast path of audit_outcome and
// identity validation accepts exactly what the schema accepts.
func TestGoValidatorsAgreeWithSchema(t *testing.T) {
	good := AuditOutcome{At: "2026-11-29T19:57:41Z", Identity: Identity{TenantSlot: "slot-1", Subject: "usr_0123456789abcdef", Surface: SurfaceAPI, Trust: TrustRouter},
		Action: "keys.create", Resource: "key/1", Outcome: OutcomeAllow, Reason: "ok"}
	mutate := []func(o *AuditOutcome){
		func(o *AuditOutcome) {},
		func(o *AuditOutcome) { o.At = "2026-11-29 19:57:41" },
		func(o *AuditOutcome) { o.At = "2026-11-29T19:57:41.1234567Z" },
		func(o *AuditOutcome) { o.Identity.TenantSlot = "slot-1000" },
		func(o *AuditOutcome) { o.Identity.Subject = "usr_XYZ" },
		func(o *AuditOutcome) { o.Identity.Surface = "email" },
		func(o *AuditOutcome) { o.Identity.Trust = "" },
		func(o *AuditOutcome) { o.Action = "keys" },
		func(o *AuditOutcome) { o.Action = "Keys.create" },
		func(o *AuditOutcome) { o.Resource = strings.Repeat("é", 200) },
		func(o *AuditOutcome) { o.Resource = strings.Repeat("é", 201) },
		func(o *AuditOutcome) { o.Outcome = "maybe" },
		func(o *AuditOutcome) { o.Reason = strings.Repeat("x", 201) },
		func(o *AuditOutcome) { o.Resource = "" },
	}
	for i, m := range mutate {
		o := good
		m(&o)
		goErr := o.Validate()
		schemaErr := Def("audit_outcome").Validate(o)
		if (goErr == nil) != (schemaErr == nil) {
			t.Errorf("case %d: Go says %v, schema says %v", i, goErr, schemaErr)
		}
		if goErr != nil && !strings.HasPrefix(AsError(goErr).Message, "field ") {
			t.Errorf("case %d: message %q does not name the field", i, AsError(goErr).Message)
		}
	}
}

func TestProvenanceValidatorAgreesWithSchema(t *testing.T) {
	good := Provenance{Surface: SurfaceChat, Actor: Actor{Type: ActorUser, ID: "u1", Display: "U"}, RecordedAt: "2026-11-29T19:57:41.5Z",
		SessionID: "s", ConversationID: "conv_abcd", MessageID: "m", RunID: "r",
		Route: &Route{Requested: "fast", ResolvedTarget: "t", Provider: ProviderLocal, Effort: EffortHigh},
		Build: &Build{Commit: strings.Repeat("a", 40), ImageDigest: SHA256(nil)}}
	mutate := []func(p *Provenance){
		func(p *Provenance) {},
		func(p *Provenance) { p.Route, p.Build = nil, nil },
		func(p *Provenance) { p.Surface = "fax" },
		func(p *Provenance) { p.Actor.Type = "robot" },
		func(p *Provenance) { p.Actor.ID = "" },
		func(p *Provenance) { p.Actor.ID = strings.Repeat("é", 121) },
		func(p *Provenance) { p.Actor.Display = strings.Repeat("x", 121) },
		func(p *Provenance) { p.RecordedAt = "now" },
		func(p *Provenance) { p.SessionID = strings.Repeat("x", 121) },
		func(p *Provenance) { p.ConversationID = "c" },
		func(p *Provenance) { p.MessageID = strings.Repeat("x", 120) },
		func(p *Provenance) { p.RunID = strings.Repeat("x", 121) },
		func(p *Provenance) { p.Route.Requested = "" },
		func(p *Provenance) { p.Route.ResolvedTarget = strings.Repeat("x", 121) },
		func(p *Provenance) { p.Route.Provider = "openai" },
		func(p *Provenance) { p.Route.Effort = "max" },
		func(p *Provenance) { p.Build.Commit = "abc" },
		func(p *Provenance) { p.Build.ImageDigest = "sha256:00" },
		func(p *Provenance) { p.Build = &Build{} },
	}
	for i, m := range mutate {
		p := good
		r, b := *good.Route, *good.Build
		p.Route, p.Build = &r, &b
		m(&p)
		goErr := p.Validate()
		schemaErr := Def("provenance").Validate(p)
		if (goErr == nil) != (schemaErr == nil) {
			t.Errorf("case %d: Go says %v, schema says %v", i, goErr, schemaErr)
		}
	}
}

// TestSensitivityAndRedactionValidatorsAgreeWithSchema: the Go validators
// of sensitivity and redaction accept exactly what the schema accepts.
func TestSensitivityAndRedactionValidatorsAgreeWithSchema(t *testing.T) {
	for _, s := range []Sensitivity{SensitivityPublic, SensitivityPersonal, SensitivitySensitive, SensitivityRestricted, "", "secret", "Personal"} {
		goErr, schemaErr := s.Validate(), Def("sensitivity").Validate(s)
		if (goErr == nil) != (schemaErr == nil) {
			t.Errorf("sensitivity %q: Go says %v, schema says %v", s, goErr, schemaErr)
		}
	}
	for _, r := range []Redaction{{Level: RedactionNone}, {Level: RedactionPartial, Reason: "message text kept as its sha256"}, {Level: RedactionFull, Reason: strings.Repeat("é", 200)},
		{Level: RedactionFull, Reason: strings.Repeat("é", 201)}, {Level: ""}, {Level: "most"}} {
		goErr, schemaErr := r.Validate(), Def("redaction").Validate(r)
		if (goErr == nil) != (schemaErr == nil) {
			t.Errorf("redaction %+v: Go says %v, schema says %v", r, goErr, schemaErr)
		}
	}
}

// TestDecodeStrict: unknown members and trailing data are refused, white
// space after the value is not; the value is decoded.
func TestDecodeStrict(t *testing.T) {
	type v struct {
		A int `json:"a"`
	}
	for body, want := range map[string]string{
		`{"a":1}`:         "",
		" {\"a\":1} \n":   "",
		`{"a":1,"b":2}`:   `json: unknown field "b"`,
		`{"a":1} x`:       ErrTrailingData.Error(),
		`{"a":1}}`:        ErrTrailingData.Error(),
		`{"a":1} {"a":2}`: ErrTrailingData.Error(),
		`{"a":"x"}`:       "json: cannot unmarshal string into Go struct field v.a of type int",
	} {
		var got v
		err := DecodeStrict([]byte(body), &got)
		if (err == nil) != (want == "") || (err != nil && err.Error() != want) {
			t.Errorf("DecodeStrict(%q) = %v, want %q", body, err, want)
		}
		if err == nil && got.A != 1 {
			t.Errorf("DecodeStrict(%q) decoded %+v", body, got)
		}
	}
}
