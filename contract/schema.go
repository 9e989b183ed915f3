package contract

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaFS holds the wire contracts: common.schema.json is seed 002 verbatim;
// every other file is a contract Caduceus defines and $refs it.
//
//go:embed schema/*.json
var schemaFS embed.FS

// SchemaFS returns the embedded schema files (for documentation and tools).
func SchemaFS() fs.FS {
	sub, _ := fs.Sub(schemaFS, "schema")
	return sub
}

// Schema is a compiled JSON Schema (draft 2020-12) from contract/schema.
type Schema struct {
	ref string
	s   *jsonschema.Schema
}

var schemas struct {
	once     sync.Once
	err      error
	compiler *jsonschema.Compiler
	ids      map[string]string // file name -> $id
	mu       sync.Mutex
	compiled map[string]*Schema
}

const schemaBase = "https://caduceus.dev/schema/"

func loadSchemas() {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	schemas.ids = map[string]string{}
	schemas.compiled = map[string]*Schema{}
	entries, err := fs.ReadDir(schemaFS, "schema")
	if err != nil {
		schemas.err = err
		return
	}
	for _, e := range entries {
		b, err := schemaFS.ReadFile("schema/" + e.Name())
		if err != nil {
			schemas.err = err
			return
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			schemas.err = fmt.Errorf("contract: schema %s: %w", e.Name(), err)
			return
		}
		id := schemaBase + e.Name()
		if m, ok := doc.(map[string]any); ok {
			if s, ok := m["$id"].(string); ok && s != "" {
				id = s
			}
		}
		if err := c.AddResource(id, doc); err != nil {
			schemas.err = fmt.Errorf("contract: schema %s: %w", e.Name(), err)
			return
		}
		schemas.ids[e.Name()] = id
	}
	schemas.compiler = c
}

// LoadSchema compiles the schema at ref: a file name in contract/schema,
// optionally followed by a JSON pointer fragment, e.g.
// "common.schema.json#/$defs/identity". Compiled schemas are cached.
func LoadSchema(ref string) (*Schema, error) {
	schemas.once.Do(loadSchemas)
	if schemas.err != nil {
		return nil, schemas.err
	}
	schemas.mu.Lock()
	defer schemas.mu.Unlock()
	if s, ok := schemas.compiled[ref]; ok {
		return s, nil
	}
	file, frag, _ := strings.Cut(ref, "#")
	id, ok := schemas.ids[path.Base(file)]
	if !ok {
		return nil, fmt.Errorf("contract: no schema file %q", file)
	}
	loc := id
	if frag != "" {
		loc += "#" + frag
	}
	cs, err := schemas.compiler.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("contract: compile %s: %w", ref, err)
	}
	s := &Schema{ref: ref, s: cs}
	schemas.compiled[ref] = s
	return s, nil
}

// MustSchema is LoadSchema for package-level variables; it panics on error,
// which a test of every caller's package turns into a failure.
func MustSchema(ref string) *Schema {
	s, err := LoadSchema(ref)
	if err != nil {
		panic(err)
	}
	return s
}

// Def returns the compiled common-schema definition name ("identity", "id", ...).
func Def(name string) *Schema {
	return MustSchema("common.schema.json#/$defs/" + name)
}

// ValidateJSON validates raw JSON bytes. Anything that is not JSON, or that
// the schema refuses, is an invalid *Error whose Field is the JSON pointer of
// the offending value and whose Message names it.
func (s *Schema) ValidateJSON(b []byte) error {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return Invalidf("bad_json", "not valid JSON: %v", err)
	}
	return s.validate(inst)
}

// Validate validates a Go value by its JSON encoding.
func (s *Schema) Validate(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return Invalidf("bad_json", "cannot encode value: %v", err)
	}
	return s.ValidateJSON(b)
}

// ValidateInstance validates a value already decoded by UnmarshalInstance.
func (s *Schema) ValidateInstance(inst any) error { return s.validate(inst) }

// UnmarshalInstance decodes JSON the way the validator wants it (numbers as
// json.Number), so a caller can validate and then inspect one decoded tree.
func UnmarshalInstance(b []byte) (any, error) {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return nil, Invalidf("bad_json", "not valid JSON: %v", err)
	}
	return inst, nil
}

var printer = message.NewPrinter(language.English)

func (s *Schema) validate(inst any) error {
	err := s.s.Validate(inst)
	if err == nil {
		return nil
	}
	ve, ok := err.(*jsonschema.ValidationError)
	if !ok {
		return Invalidf("schema_invalid", "%v", err)
	}
	leaf := deepest(ve)
	ptr := "/" + strings.Join(leaf.InstanceLocation, "/")
	field := strings.Join(leaf.InstanceLocation, ".")
	if field == "" {
		field = "(root)"
	}
	msg := leaf.ErrorKind.LocalizedString(printer)
	return &Error{
		Kind:    KindInvalid,
		Code:    "schema_invalid",
		Field:   ptr,
		Message: fmt.Sprintf("field %s: %s", field, msg),
	}
}

// deepest picks the most specific cause: the leaf with the longest instance
// location, first in document order among equals.
func deepest(e *jsonschema.ValidationError) *jsonschema.ValidationError {
	best := e
	var walk func(*jsonschema.ValidationError)
	walk = func(v *jsonschema.ValidationError) {
		if len(v.Causes) == 0 {
			if len(v.InstanceLocation) > len(best.InstanceLocation) || best == e {
				best = v
			}
			return
		}
		for _, c := range v.Causes {
			walk(c)
		}
	}
	walk(e)
	return best
}
