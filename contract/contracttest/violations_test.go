package contracttest

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
)

// thingSchema holds one of every keyword the generator knows, a $ref to
// the same file and one to another file, and an if/then.
const thingSchema = `{
  "$id": "https://example.test/thing.json",
  "$comment": "an annotation",
  "$defs": {
    "thing": {
      "description": "a thing",
      "type": "object",
      "additionalProperties": false,
      "required": ["name", "count"],
      "properties": {
        "name":   {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
        "count":  {"type": "number", "minimum": 1, "maximum": 10},
        "ratio":  {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "kind":   {"enum": ["a", "b"]},
        "fixed":  {"const": "x"},
        "when":   {"type": "string", "format": "date-time"},
        "note":   {"type": ["string", "null"], "minLength": 0},
        "mixed":  {"type": ["object", "string"]},
        "tags":   {"type": "array", "minItems": 1, "maxItems": 2, "items": {"$ref": "#/$defs/tag"}},
        "many":   {"type": "array", "minItems": 0, "maxItems": 3, "items": {"type": "string"}},
        "other":  {"$ref": "other.json#/$defs/o"}
      },
      "allOf": [
        {"if": {"required": ["kind"], "properties": {"kind": {"const": "b"}}}, "then": {"required": ["ratio"]}},
        {"required": ["tags"]}
      ]
    },
    "tag": {"type": "string", "maxLength": 3}
  }
}`

const otherSchema = `{"$defs": {"o": {"type": "object", "required": ["v"], "properties": {"v": {"type": "boolean"}}}}}`

const thingBase = `{"name":"abc","count":5,"ratio":0.5,"kind":"a","fixed":"x","when":"2026-11-29T19:57:41Z","note":"n",
  "mixed":"m","tags":["t"],"many":["a","b"],"other":{"v":true}}`

func thingFS(schema string) fstest.MapFS {
	return fstest.MapFS{
		"thing.json": {Data: []byte(schema)},
		"other.json": {Data: []byte(otherSchema)},
	}
}

// compileThing resolves the thing schema with the validator the contracts
// use (github.com/google/jsonschema-go) and returns a validation of a
// document against it. That validator reads format as an annotation, as
// the contracts' validation does; the one format the schema holds (when:
// date-time) is asserted here beside it, as the generator breaks it.
func compileThing(t *testing.T) func([]byte) error {
	t.Helper()
	docs := map[string]*jsonschema.Schema{}
	for name, data := range map[string]string{"thing.json": thingSchema, "other.json": otherSchema} {
		doc := new(jsonschema.Schema)
		if err := json.Unmarshal([]byte(data), doc); err != nil {
			t.Fatal(err)
		}
		docs["https://example.test/"+name] = doc
	}
	load := func(u *url.URL) (*jsonschema.Schema, error) {
		if d, ok := docs[u.String()]; ok {
			return d, nil
		}
		return nil, fmt.Errorf("no schema %s", u)
	}
	root := &jsonschema.Schema{Ref: "https://example.test/thing.json#/$defs/thing"}
	rs, err := root.Resolve(&jsonschema.ResolveOptions{Loader: load})
	if err != nil {
		t.Fatal(err)
	}
	return func(b []byte) error {
		var inst any
		if err := json.Unmarshal(b, &inst); err != nil {
			t.Fatal(err)
		}
		if err := rs.Validate(inst); err != nil {
			return err
		}
		if when, ok := inst.(map[string]any)["when"].(string); ok {
			if _, err := time.Parse(time.RFC3339, when); err != nil {
				return fmt.Errorf("when: not a date-time: %w", err)
			}
		}
		return nil
	}
}

// TestViolationsEachBreakTheirRule: every instance the generator makes from
// a valid base is refused by a real validator, and every rule of the schema
// has one: a $ref's rules first, then the keywords and properties in name
// order.
func TestViolationsEachBreakTheirRule(t *testing.T) {
	valid := compileThing(t)
	if err := valid([]byte(thingBase)); err != nil {
		t.Fatalf("the base is not valid: %v", err)
	}
	vs, err := Violations(thingFS(thingSchema), "thing.json#/$defs/thing", []byte(thingBase))
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, v := range vs {
		rules = append(rules, v.Rule)
		if valid(v.Instance) == nil {
			t.Errorf("%s: the validator accepts %s", v.Rule, v.Instance)
		}
	}
	want := []string{
		" additionalProperties",
		"/0/then required ratio", // allOf: the if holds in the base, then its then is broken
		"/1 required tags",
		"/count maximum", "/count minimum", "/count type",
		"/fixed const",
		"/kind enum",
		"/many/0 type", "/many maxItems", "/many type", // minItems 0 cannot be broken
		"/mixed type",
		"/name maxLength 5", "/name minLength 2", "/name pattern ^[a-z]+$", "/name type",
		"/note type",                                        // minLength 0 cannot be broken
		"/other/v type", "/other required v", "/other type", // the $ref's rules
		"/ratio exclusiveMaximum", "/ratio exclusiveMinimum", "/ratio type",
		"/tags/0 maxLength 3", "/tags/0 type", "/tags maxItems", "/tags minItems", "/tags type",
		"/when format", "/when type",
		" required name", " required count",
		" type",
	}
	if strings.Join(rules, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(rules, "\n"), strings.Join(want, "\n"))
	}
}

// TestViolationsPatternBreakClosestToBase: a pattern is broken by the
// candidate closest to the base value, the value with a space after it.
func TestViolationsPatternBreakClosestToBase(t *testing.T) {
	vs, err := Violations(thingFS(thingSchema), "thing.json#/$defs/thing", []byte(thingBase))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs {
		if strings.HasPrefix(v.Rule, "/name pattern") && !strings.Contains(string(v.Instance), `"name":"abc "`) {
			t.Errorf("%s: %s, want the name \"abc \"", v.Rule, v.Instance)
		}
	}
}

// TestViolationsRefuseWhatTheyCannotProve: a rule the generator cannot
// break (an unknown keyword, a property the base leaves out, a schema or
// base it cannot read) is an error, never a rule passed over.
func TestViolationsRefuseWhatTheyCannotProve(t *testing.T) {
	swap := func(old, new string) string {
		if !strings.Contains(thingSchema, old) {
			t.Fatalf("the schema has no %q", old)
		}
		return strings.Replace(thingSchema, old, new, 1)
	}
	for _, c := range []struct {
		name, schema, ref, base, want string
	}{
		{"unknown keyword", swap(`"minItems": 0,`, `"uniqueItems": true,`), "", "", "does not know this keyword"},
		{"property without a base value", thingSchema, "", strings.Replace(thingBase, `"fixed":"x",`, "", 1), "/fixed: the base must give this property a value"},
		{"base not JSON", thingSchema, "", `{"name":`, "base"},
		{"missing file", thingSchema, "nope.json#/$defs/thing", "", "nope.json"},
		{"missing def", thingSchema, "thing.json#/$defs/nope", "", "is not a schema"},
		{"pointer through a non-object", thingSchema, "thing.json#/$comment/x", "", "does not resolve"},
		{"schema not JSON", `{"$defs":`, "", "", "thing.json"},
		{"missing $ref target", swap(`"$ref": "#/$defs/tag"`, `"$ref": "#/$defs/nope"`), "", "", "is not a schema"},
		{"missing $ref file", swap(`"$ref": "other.json#/$defs/o"`, `"$ref": "gone.json#/$defs/o"`), "", "", "gone.json"},
		{"pattern nothing breaks", swap(`"pattern": "^[a-z]+$"`, `"pattern": ".*"`), "", "", "no candidate string breaks"},
		{"pattern not a regexp", swap(`"pattern": "^[a-z]+$"`, `"pattern": "("`), "", "", "/name pattern"},
		{"additionalProperties a schema", swap(`"additionalProperties": false`, `"additionalProperties": {"type": "string"}`), "", "", "only additionalProperties false"},
		{"required of a non-object", swap(`"tag": {"type": "string", "maxLength": 3}`, `"tag": {"required": ["x"]}`), "", "", "/tags/0 required: the base has no object here"},
		{"properties of a non-object", thingSchema, "", strings.Replace(thingBase, `"other":{"v":true}`, `"other":7`, 1), "/other properties: the base has no object here"},
		{"items of an empty array", thingSchema, "", strings.Replace(thingBase, `"tags":["t"]`, `"tags":[]`, 1), "the base must hold a non-empty array"},
		{"if of an unknown keyword", swap(`"required": ["kind"], "properties"`, `"minProperties": 1, "properties"`), "", "", "if: keyword minProperties is not known"},
		{"if of a property without a const", swap(`{"kind": {"const": "b"}}}`, `{"kind": {"enum": ["b"]}}}`), "", "", "only properties with a const"},
		{"if of a property with more than a const", swap(`{"kind": {"const": "b"}}}`, `{"kind": {"const": "b", "type": "string"}}}`), "", "", "only properties with a const"},
		{"if of a non-object", swap(`"tag": {"type": "string", "maxLength": 3}`, `"tag": {"allOf": [{"if": {"properties": {"k": {"const": 1}}}, "then": {}}]}`), "", "", "if: the base has no object here"},
		{"error inside a then", swap(`"then": {"required": ["ratio"]}`, `"then": {"required": ["ratio"], "uniqueItems": true}`), "", "", "does not know this keyword"},
		{"error inside an allOf member", swap(`{"required": ["tags"]}`, `{"required": ["tags"], "uniqueItems": true}`), "", "", "does not know this keyword"},
		{"error inside a $ref", swap(`"tag": {"type": "string"`, `"tag": {"uniqueItems": true, "type": "string"`), "", "", "does not know this keyword"},
	} {
		ref, base := c.ref, c.base
		if ref == "" {
			ref = "thing.json#/$defs/thing"
		}
		if base == "" {
			base = thingBase
		}
		vs, err := Violations(thingFS(c.schema), ref, []byte(base))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %d violations, error %v; want an error with %q", c.name, len(vs), err, c.want)
		} else if vs != nil {
			t.Errorf("%s: violations returned beside the error", c.name)
		}
	}
}
