package guard_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/guard"
	"github.com/caduceus-dev/caduceus/guard/detect"
	"github.com/caduceus-dev/caduceus/guard/guardtest"
)

func all(act guard.Action) guard.Policy {
	return guard.Config{Actions: guard.Actions{"default": act}}.Policy("")
}

// TestConfigValidate: every kind and action named is checked, and the
// error names what is wrong.
func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  guard.Config
		want string
	}{
		{guard.Config{Actions: guard.Actions{"secret": "redact", "email": "flag", "default": "off"}}, ""},
		{guard.Config{Actions: guard.Actions{"emial": "redact"}}, `shim.guardrails: unknown kind "emial"`},
		{guard.Config{Actions: guard.Actions{"email": "mask"}}, `shim.guardrails.email: unknown action "mask": want redact, block, flag or off`},
		{guard.Config{Plans: map[string]guard.Actions{"nope": {"email": "block"}}}, `shim.guardrails.plans: "nope" is not a plan (shim.plans names main)`},
		{guard.Config{Plans: map[string]guard.Actions{"main": {"card": "hide"}}}, `shim.guardrails.plans.main.card: unknown action "hide"`},
		{guard.Config{Plans: map[string]guard.Actions{"main": {"card": "block"}}}, ""},
	} {
		err := c.cfg.Validate("shim.guardrails", []string{"main"})
		if c.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", c.cfg, err)
			}
			continue
		}
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestPolicyMerge: default, then kinds, then the plan's default and kinds.
func TestPolicyMerge(t *testing.T) {
	c := guard.Config{Actions: guard.Actions{"default": "flag", "secret": "redact"},
		Plans: map[string]guard.Actions{"strict": {"email": "block"}, "lax": {"default": "off"}}}
	if p := c.Policy(""); p.Action(guard.Email) != guard.Flag || p.Action(guard.Secret) != guard.Redact {
		t.Errorf("base %v", p)
	}
	if p := c.Policy("strict"); p.Action(guard.Email) != guard.Block || p.Action(guard.Secret) != guard.Redact || p.Action(guard.Phone) != guard.Flag {
		t.Errorf("strict %v", p)
	}
	if p := c.Policy("lax"); p.Active() {
		t.Errorf("lax %v is active", p)
	}
	if (guard.Config{}).Active() || (guard.Config{Actions: guard.Actions{"email": "off"}}).Active() {
		t.Error("an empty policy is active")
	}
}

// TestRedactorPlaceholders: typed, numbered per kind, the same value the
// same placeholder, shared with the answer's redactor.
func TestRedactorPlaceholders(t *testing.T) {
	d := detect.MustDefault()
	r := guard.NewRedactor(d, all(guard.Redact), guard.Request)
	a, b := "ann@example.org", "bob@example.org"
	out, ch := r.Redact(a + " " + b + " " + a)
	if !ch || out != "[REDACTED:email:1] [REDACTED:email:2] [REDACTED:email:1]" {
		t.Fatalf("%q", out)
	}
	ans := guard.NewRedactor(d, all(guard.Redact), guard.Answer)
	ans.Share(r)
	if out, _ := ans.Redact("to " + b); out != "to [REDACTED:email:2]" {
		t.Fatalf("answer %q", out)
	}
	recs := r.Records()
	if len(recs) != 1 || recs[0] != (guard.Record{Direction: guard.Request, Kind: guard.Email, Rule: "email", Action: guard.Redact, Count: 3}) {
		t.Fatalf("records %+v", recs)
	}
}

// TestRedactJSONKeepsTheDocument: only string values change; ids,
// signatures and data URLs are left; a malformed document is redacted as
// text.
func TestRedactJSONKeepsTheDocument(t *testing.T) {
	d := detect.MustDefault()
	mail := guardtest.Six[3].Value
	doc := `{"id":"` + mail + `","n":1.5e3, "list":[true,null,"` + mail + `"],"signature":"` + mail + `","img":"data:image/png;base64,` + mail + `","k":"\u0041 ` + mail + `"}`
	r := guard.NewRedactor(d, all(guard.Redact), guard.Request)
	out, ch := guard.RedactJSON([]byte(doc), r)
	want := `{"id":"` + mail + `","n":1.5e3, "list":[true,null,"[REDACTED:email:1]"],"signature":"` + mail + `","img":"data:image/png;base64,` + mail + `","k":"A [REDACTED:email:1]"}`
	if !ch || string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	bad := `{"text":"` + mail
	out, ch = guard.RedactJSON([]byte(bad), r)
	if !ch || strings.Contains(string(out), mail) {
		t.Fatalf("malformed: %s", out)
	}
}

// TestStreamHoldsBackOnlyWhatItMust: text far from any finding goes out
// at once but for the last Hold bytes; a value split across writes never
// goes out; Flush gives back the rest.
func TestStreamHoldsBackOnlyWhatItMust(t *testing.T) {
	d := detect.MustDefault()
	r := guard.NewRedactor(d, all(guard.Redact), guard.Answer)
	s := guard.NewStream(r, 0)
	long := strings.Repeat("plain words here. ", 40)
	out := s.Write(long)
	if len(out) != len(long)-guard.Hold || s.Pending() != guard.Hold {
		t.Fatalf("emitted %d of %d, pending %d", len(out), len(long), s.Pending())
	}
	key := guardtest.Six[0].Value
	out += s.Write("key " + key[:5])
	out += s.Write(key[5:] + " done")
	out += s.Flush()
	if strings.Contains(out, key) || !strings.HasSuffix(out, "key [REDACTED:secret:1] done") {
		t.Fatalf("%q", out[len(out)-60:])
	}
}

// TestStreamPrivateKeyBlock: a key block is held from its BEGIN line to
// its END line however long it is, then goes out as one placeholder; a
// block past MaxKeyHold goes out as a placeholder and the rest of it is
// dropped.
func TestStreamPrivateKeyBlock(t *testing.T) {
	d := detect.MustDefault()
	key := guardtest.PrivateKey
	r := guard.NewRedactor(d, all(guard.Redact), guard.Answer)
	s := guard.NewStream(r, 0)
	var out string
	for i := 0; i < len(key); i += 7 {
		out += s.Write(key[i:min(i+7, len(key))])
	}
	out += s.Write(" after") + s.Flush()
	if out != "[REDACTED:private_key:1] after" {
		t.Fatalf("%q", out)
	}
	body := strings.Split(key, "\n")[1]
	huge := "x -----BEGIN RSA PRIVATE KEY-----\n" + strings.Repeat(body+"\n", guard.MaxKeyHold/len(body)+2) + "-----END RSA PRIVATE KEY----- tail"
	r = guard.NewRedactor(d, all(guard.Redact), guard.Answer)
	s = guard.NewStream(r, 0)
	out = ""
	for i := 0; i < len(huge); i += 1000 {
		out += s.Write(huge[i:min(i+1000, len(huge))])
	}
	out += s.Flush()
	if strings.Contains(out, body) || !strings.HasPrefix(out, "x [REDACTED:private_key:1]") || !strings.HasSuffix(out, " tail") {
		t.Fatalf("%q", out)
	}
}
