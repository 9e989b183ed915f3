package shim_test

import (
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

func wantErr(t *testing.T, err error, kind contract.Kind, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s/%s", kind, code)
	}
	e := contract.AsError(err)
	if e.Kind != kind || e.Code != code {
		t.Fatalf("got %v (%s/%s), want %s/%s", err, e.Kind, e.Code, kind, code)
	}
}

const simpleProv = `{"id":"P1","triggers":{"keyword":{"any":["deploy"]}},"action":"shim","context_refs":["verb:deploy"]}`

func TestHarnessAttestation(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	a := callers["key-a"]
	_, err := e.svc.CreateProvision(ctx, a, "", []byte(simpleProv))
	wantErr(t, err, contract.KindDeny, shim.CodeHarnessRequired)
	_, err = e.svc.CreateProvision(ctx, a, "cursor", []byte(simpleProv))
	wantErr(t, err, contract.KindDeny, shim.CodeHarnessMismatch)
	_, err = e.svc.CreateProvision(ctx, callers["key-route"], "claude-code", []byte(simpleProv))
	wantErr(t, err, contract.KindDeny, contract.CodeMissingScope)
	noHarness := a
	noHarness.Harness = ""
	_, err = e.svc.CreateProvision(ctx, noHarness, "claude-code", []byte(simpleProv))
	wantErr(t, err, contract.KindDeny, shim.CodeHarnessRequired)
	if ps, _ := e.svc.ListProvisions(ctx, a); len(ps) != 0 {
		t.Fatalf("refused writes stored %d provisions", len(ps))
	}
	p, err := e.svc.CreateProvision(ctx, a, "claude-code", []byte(simpleProv))
	if err != nil || p.Version != 1 || p.Status != shim.StatusActive {
		t.Fatalf("attested write: %+v %v", p, err)
	}
	wantErr(t, e.svc.DeleteProvision(ctx, a, "cursor", "P1", 1), contract.KindDeny, shim.CodeHarnessMismatch)
	_, err = e.svc.CreateContext(ctx, a, "cursor", []byte(`{"ref":"verb:x","kind":"verb","body":"b"}`))
	wantErr(t, err, contract.KindDeny, shim.CodeHarnessMismatch)
	// reads need only route scope
	if _, err := e.svc.GetProvision(ctx, callers["key-route"], "P1"); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.ListProvisions(ctx, contract.Caller{Identity: a.Identity})
	wantErr(t, err, contract.KindDeny, contract.CodeMissingScope)
}

func TestCASConflict(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	a := callers["key-a"]
	e.provision(t, "key-a", simpleProv)
	v2 := strings.Replace(simpleProv, `"deploy"]`, `"deploy","ship"]`, 1)
	p, err := e.svc.UpdateProvision(ctx, a, "claude-code", "P1", 1, []byte(v2))
	if err != nil || p.Version != 2 {
		t.Fatalf("update at 1: %+v %v", p, err)
	}
	_, err = e.svc.UpdateProvision(ctx, a, "claude-code", "P1", 1, []byte(simpleProv))
	wantErr(t, err, contract.KindConflict, shim.CodeRevisionMismatch)
	_, err = e.svc.UpdateProvision(ctx, a, "claude-code", "P1", 0, []byte(simpleProv))
	wantErr(t, err, contract.KindPrecondition, shim.CodeIfMatchRequired)
	_, err = e.svc.UpdateProvision(ctx, a, "claude-code", "P2", 2, []byte(simpleProv))
	wantErr(t, err, contract.KindInvalid, shim.CodeIDMismatch)
	got, _ := e.svc.GetProvision(ctx, a, "P1")
	if got.Version != 2 || len(got.Triggers.Keyword.Any) != 2 {
		t.Fatalf("a refused update changed the provision: %+v", got)
	}
	wantErr(t, e.svc.DeleteProvision(ctx, a, "claude-code", "P1", 1), contract.KindConflict, shim.CodeRevisionMismatch)
	if err := e.svc.DeleteProvision(ctx, a, "claude-code", "P1", 2); err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.GetProvision(ctx, a, "P1")
	wantErr(t, err, contract.KindNotFound, shim.CodeNotFound)
	_, err = e.svc.CreateProvision(ctx, a, "claude-code", []byte(simpleProv))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.CreateProvision(ctx, a, "claude-code", []byte(simpleProv))
	wantErr(t, err, contract.KindConflict, shim.CodeExists)

	// context entries too, with the body's sha256
	ce := e.context(t, "key-a", `{"ref":"verb:deploy","kind":"verb","body":"one"}`)
	if ce.SHA256 != "sha256:"+sha("one") || ce.Version != 1 {
		t.Fatalf("entry %+v", ce)
	}
	_, err = e.svc.UpdateContext(ctx, a, "claude-code", "verb:deploy", 1, []byte(`{"ref":"verb:deploy","kind":"verb","body":"two"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.svc.UpdateContext(ctx, a, "claude-code", "verb:deploy", 1, []byte(`{"ref":"verb:deploy","kind":"verb","body":"three"}`))
	wantErr(t, err, contract.KindConflict, shim.CodeRevisionMismatch)
	got2, _ := e.svc.GetContext(ctx, a, "verb:deploy")
	if got2.Body != "two" || got2.SHA256 != "sha256:"+sha("two") {
		t.Fatalf("entry after conflict %+v", got2)
	}
}

func TestBuiltinProtection(t *testing.T) {
	e := newEnv(t, nil)
	ctx := t.Context()
	a, adm := callers["key-a"], callers["key-admin"]
	builtin := `{"id":"PROV-STARTER","system_builtin":true,"triggers":{"keyword":{"any":["hello"]}},"action":"respond_directly","response":{"text":"builtin hi"}}`
	_, err := e.svc.CreateProvision(ctx, a, "claude-code", []byte(builtin))
	wantErr(t, err, contract.KindDeny, shim.CodeBuiltinProtected)
	p, err := e.svc.CreateProvision(ctx, adm, "ops", []byte(builtin))
	if err != nil || !p.SystemBuiltin {
		t.Fatalf("admin builtin write: %+v %v", p, err)
	}
	// the builtin fires for every tenant and shows in their lists
	for _, key := range []string{"key-a", "key-b"} {
		res, err := call(t, e, key, wire.ChatCompletions, false, "gpt-4o", "hello there", nil)
		if err != nil || res.text != "builtin hi" {
			t.Fatalf("%s: builtin did not answer: %q %v", key, res.text, err)
		}
		ps, _ := e.svc.ListProvisions(ctx, callers[key])
		if len(ps) != 1 || !ps[0].SystemBuiltin {
			t.Fatalf("%s lists %+v", key, ps)
		}
	}
	// non-admins cannot update, delete or take over the builtin's id
	upd := strings.Replace(builtin, "builtin hi", "hijacked", 1)
	_, err = e.svc.UpdateProvision(ctx, callers["key-b"], "claude-code", "PROV-STARTER", 1, []byte(upd))
	wantErr(t, err, contract.KindDeny, shim.CodeBuiltinProtected)
	_, err = e.svc.UpdateProvision(ctx, a, "claude-code", "PROV-STARTER", 1, []byte(strings.Replace(upd, `"system_builtin":true,`, "", 1)))
	wantErr(t, err, contract.KindDeny, shim.CodeBuiltinProtected)
	wantErr(t, e.svc.DeleteProvision(ctx, a, "claude-code", "PROV-STARTER", 1), contract.KindDeny, shim.CodeBuiltinProtected)
	_, err = e.svc.CreateProvision(ctx, a, "claude-code", []byte(strings.Replace(upd, `"system_builtin":true,`, "", 1)))
	wantErr(t, err, contract.KindDeny, shim.CodeBuiltinProtected)
	if res, _ := call(t, e, "key-b", wire.Messages, false, "claude-x", "hello", nil); res.text != "builtin hi" {
		t.Fatalf("builtin changed by a refused write: %q", res.text)
	}
	// admins can
	if _, err := e.svc.UpdateProvision(ctx, adm, "ops", "PROV-STARTER", 1, []byte(upd)); err != nil {
		t.Fatal(err)
	}
	if res, _ := call(t, e, "key-b", wire.Messages, false, "claude-x", "hello", nil); res.text != "hijacked" {
		t.Fatalf("admin update not seen: %q", res.text)
	}
	// builtin context entries are protected the same way
	_, err = e.svc.CreateContext(ctx, a, "claude-code", []byte(`{"ref":"noun:x","kind":"noun","body":"b","system_builtin":true}`))
	wantErr(t, err, contract.KindDeny, shim.CodeBuiltinProtected)
}

func TestProvisionValidation(t *testing.T) {
	e := newEnv(t, nil)
	cases := []struct{ body, field string }{
		{`{"triggers":{"keyword":{"any":["x"]}},"action":"shim","context_refs":["verb:x"]}`, "(root)"},
		{`{"id":"P","triggers":{"keyword":{"any":["x"]}},"action":"explode"}`, "action"},
		{`{"id":"P","triggers":{"regex":[{"pattern":"(unclosed"}]},"action":"shim","context_refs":["verb:x"]}`, "triggers.regex.0.pattern"},
		{`{"id":"P","triggers":{"regex":[{"pattern":"(?=lookahead)"}]},"action":"shim","context_refs":["verb:x"]}`, "triggers.regex.0.pattern"},
		{`{"id":"P","triggers":{},"action":"shim","context_refs":["verb:x"]}`, "triggers"},
		{`{"id":"P","triggers":{"keyword":{"any":["x"]}},"action":"shim"}`, "context_refs"},
		{`{"id":"P","triggers":{"keyword":{"any":["x"]}},"action":"respond_directly"}`, "response.text"},
		{`{"id":"P","triggers":{"keyword":{"any":["x"]}},"action":"shim","context_refs":["no ref"]}`, "context_refs.0"},
		{`{"id":"P","triggers":{"semantic":{"examples":["a"],"threshold":1.5}},"action":"shim","context_refs":["verb:x"]}`, "triggers.semantic.threshold"},
		{`{"id":"P","triggers":{"micromodel":{"model":"m","question":"q","min_confidence":-1}},"action":"shim","context_refs":["verb:x"]}`, "triggers.micromodel.min_confidence"},
		{`{"id":"P","triggers":{"keyword":{"any":["x"]}},"action":"shim","context_refs":["verb:x"],"unknown":1}`, "(root)"},
		{`{"id":"P","triggers":{"path":["[bad"]},"action":"shim","context_refs":["verb:x"]}`, "triggers.path.0"},
		{`not json`, ""},
	}
	for _, c := range cases {
		_, err := e.svc.CreateProvision(t.Context(), callers["key-a"], "claude-code", []byte(c.body))
		if err == nil {
			t.Fatalf("accepted %s", c.body)
		}
		ce := contract.AsError(err)
		if ce.Kind != contract.KindInvalid || !strings.Contains(ce.Message, c.field) {
			t.Fatalf("%s: got %v (%s), want invalid naming %q", c.body, ce.Message, ce.Kind, c.field)
		}
	}
	if ps, _ := e.svc.ListProvisions(t.Context(), callers["key-a"]); len(ps) != 0 {
		t.Fatal("invalid input was stored")
	}
}

// The builtin rule is the same for provisions and context entries: one
// table of writes, run against both kinds, with the same refusals.
func TestBuiltinRuleBothKinds(t *testing.T) {
	type kind struct {
		name               string
		builtin            string // a builtin document, key builtinKey
		own                string // a tenant document, key ownKey
		create             func(e *env, c contract.Caller, h, body string) error
		update             func(e *env, c contract.Caller, h, key string, v int64, body string) error
		delete             func(e *env, c contract.Caller, h, key string, v int64) error
		list               func(e *env, c contract.Caller) (keys []string, builtin []bool, err error)
		get                func(e *env, c contract.Caller, key string) error
		builtinKey, ownKey string
	}
	ctx := t.Context()
	kinds := []kind{{
		name:       "provision",
		builtin:    `{"id":"B","system_builtin":true,"triggers":{"keyword":{"any":["hello"]}},"action":"respond_directly","response":{"text":"hi"}}`,
		own:        `{"id":"T","triggers":{"keyword":{"any":["deploy"]}},"action":"respond_directly","response":{"text":"own"}}`,
		builtinKey: "B", ownKey: "T",
		create: func(e *env, c contract.Caller, h, body string) error {
			_, err := e.svc.CreateProvision(ctx, c, h, []byte(body))
			return err
		},
		update: func(e *env, c contract.Caller, h, key string, v int64, body string) error {
			_, err := e.svc.UpdateProvision(ctx, c, h, key, v, []byte(body))
			return err
		},
		delete: func(e *env, c contract.Caller, h, key string, v int64) error {
			return e.svc.DeleteProvision(ctx, c, h, key, v)
		},
		list: func(e *env, c contract.Caller) (keys []string, builtin []bool, err error) {
			ps, err := e.svc.ListProvisions(ctx, c)
			for _, p := range ps {
				keys, builtin = append(keys, p.ID), append(builtin, p.SystemBuiltin)
			}
			return keys, builtin, err
		},
		get: func(e *env, c contract.Caller, key string) error {
			_, err := e.svc.GetProvision(ctx, c, key)
			return err
		},
	}, {
		name:       "context",
		builtin:    `{"ref":"noun:b","kind":"noun","body":"builtin body","system_builtin":true}`,
		own:        `{"ref":"noun:t","kind":"noun","body":"own body"}`,
		builtinKey: "noun:b", ownKey: "noun:t",
		create: func(e *env, c contract.Caller, h, body string) error {
			_, err := e.svc.CreateContext(ctx, c, h, []byte(body))
			return err
		},
		update: func(e *env, c contract.Caller, h, key string, v int64, body string) error {
			_, err := e.svc.UpdateContext(ctx, c, h, key, v, []byte(body))
			return err
		},
		delete: func(e *env, c contract.Caller, h, key string, v int64) error {
			return e.svc.DeleteContext(ctx, c, h, key, v)
		},
		list: func(e *env, c contract.Caller) (keys []string, builtin []bool, err error) {
			es, err := e.svc.ListContext(ctx, c)
			for _, x := range es {
				keys, builtin = append(keys, x.Ref), append(builtin, x.SystemBuiltin)
			}
			return keys, builtin, err
		},
		get: func(e *env, c contract.Caller, key string) error {
			_, err := e.svc.GetContext(ctx, c, key)
			return err
		},
	}}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEnv(t, nil)
			a, b, adm := callers["key-a"], callers["key-b"], callers["key-admin"]
			notBuiltin := strings.Replace(k.builtin, `"system_builtin":true,`, "", 1)
			wantErr(t, k.create(e, a, "claude-code", k.builtin), contract.KindDeny, shim.CodeBuiltinProtected)
			if err := k.create(e, adm, "ops", k.builtin); err != nil {
				t.Fatalf("admin builtin create: %v", err)
			}
			// every tenant sees the builtin, marked
			for _, c := range []contract.Caller{a, b} {
				keys, builtin, err := k.list(e, c)
				if err != nil || len(keys) != 1 || keys[0] != k.builtinKey || !builtin[0] {
					t.Fatalf("%s lists %v %v %v", c.KeyID, keys, builtin, err)
				}
			}
			// a non-admin can neither write it nor take its key
			wantErr(t, k.update(e, b, "claude-code", k.builtinKey, 1, k.builtin), contract.KindDeny, shim.CodeBuiltinProtected)
			wantErr(t, k.update(e, a, "claude-code", k.builtinKey, 1, notBuiltin), contract.KindDeny, shim.CodeBuiltinProtected)
			wantErr(t, k.delete(e, a, "claude-code", k.builtinKey, 1), contract.KindDeny, shim.CodeBuiltinProtected)
			wantErr(t, k.create(e, a, "claude-code", notBuiltin), contract.KindDeny, shim.CodeBuiltinProtected)
			// a tenant document never becomes a builtin: refused as protected
			// for a non-admin, as immutable for an admin
			if err := k.create(e, a, "claude-code", k.own); err != nil {
				t.Fatal(err)
			}
			ownBuiltin := strings.Replace(k.own, "{", `{"system_builtin":true,`, 1)
			wantErr(t, k.update(e, a, "claude-code", k.ownKey, 1, ownBuiltin), contract.KindDeny, shim.CodeBuiltinProtected)
			wantErr(t, k.update(e, adm, "ops", k.ownKey, 1, ownBuiltin), contract.KindInvalid, "system_builtin_immutable")
			// the path key, If-Match and a missing key
			wantErr(t, k.update(e, a, "claude-code", k.ownKey+"x", 1, k.own), contract.KindInvalid, shim.CodeIDMismatch)
			wantErr(t, k.update(e, a, "claude-code", k.ownKey, 0, k.own), contract.KindPrecondition, shim.CodeIfMatchRequired)
			wantErr(t, k.delete(e, a, "claude-code", k.ownKey, 0), contract.KindPrecondition, shim.CodeIfMatchRequired)
			wantErr(t, k.get(e, a, k.ownKey+"nope"), contract.KindNotFound, shim.CodeNotFound)
			// an admin writes the builtin; the refused writes changed nothing
			if err := k.update(e, adm, "ops", k.builtinKey, 1, notBuiltin); err != nil {
				t.Fatalf("admin builtin update: %v", err)
			}
			if err := k.delete(e, adm, "ops", k.builtinKey, 2); err != nil {
				t.Fatalf("admin builtin delete: %v", err)
			}
			if keys, _, err := k.list(e, b); err != nil || len(keys) != 0 {
				t.Fatalf("after delete key-b lists %v %v", keys, err)
			}
		})
	}
}
