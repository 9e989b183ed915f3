package contract

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
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
	at  place
	rs  *jsonschema.Resolved
}

// place is where a schema stands: the URI of its document ($id) and the
// JSON pointer to it within that document ("" for the whole document).
type place struct{ doc, ptr string }

// uri is p as a URI reference, the pointer as its fragment.
func (p place) uri() string {
	u, err := url.Parse(p.doc)
	if err != nil {
		return p.doc + "#" + p.ptr
	}
	u.Fragment = p.ptr
	return u.String()
}

// child is the place of the subschema of p at the pointer suffix sub.
func (p place) child(sub string) place { return place{doc: p.doc, ptr: p.ptr + sub} }

// schemas is the embedded schema set, read on first use. Every schema is
// resolved (its $refs followed, its patterns compiled) when first asked
// for; locating a refusal resolves the subschemas it descends into, and
// keeps up to locatorPlaces of them.
var schemas struct {
	once     sync.Once
	err      error
	docs     map[string]*jsonschema.Schema // $id -> document; read-only once loaded
	ids      map[string]string             // file name -> $id
	mu       sync.Mutex
	compiled map[string]*Schema              // LoadSchema's ref -> schema
	at       map[string]*jsonschema.Resolved // place URI -> resolved, for the refusal locator
}

const schemaBase = "https://caduceus.dev/schema/"

func loadSchemas() {
	schemas.ids = map[string]string{}
	schemas.docs = map[string]*jsonschema.Schema{}
	schemas.compiled = map[string]*Schema{}
	schemas.at = map[string]*jsonschema.Resolved{}
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
		doc := new(jsonschema.Schema)
		if err := json.Unmarshal(b, doc); err != nil {
			schemas.err = fmt.Errorf("contract: schema %s: %w", e.Name(), err)
			return
		}
		id := doc.ID
		if id == "" {
			id = schemaBase + e.Name()
		}
		schemas.docs[id] = doc
		schemas.ids[e.Name()] = id
	}
}

// loadDoc is the resolver's Loader: the embedded document whose $id is u.
func loadDoc(u *url.URL) (*jsonschema.Schema, error) {
	if d, ok := schemas.docs[u.String()]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("no embedded schema has $id %s", u)
}

// resolveAt resolves the schema at p: a root that is only a $ref to it,
// since the validator validates against a root. It loads and resolves
// every document p refers to, 1–2 ms and 0.2 MB kept per place.
func resolveAt(p place) (*jsonschema.Resolved, error) {
	root := &jsonschema.Schema{Ref: p.uri()}
	return root.Resolve(&jsonschema.ResolveOptions{Loader: loadDoc})
}

// locatorPlaces bounds the subschemas the refusal locator keeps resolved
// (about 0.2 MB each): past it they are dropped and resolved again as
// refusals need them. One refusal walks a few dozen at most.
const locatorPlaces = 64

// resolvedAt is resolveAt for the refusal locator, cached.
func resolvedAt(p place) (*jsonschema.Resolved, error) {
	key := p.uri()
	schemas.mu.Lock()
	defer schemas.mu.Unlock()
	if rs, ok := schemas.at[key]; ok {
		return rs, nil
	}
	rs, err := resolveAt(p)
	if err != nil {
		return nil, err
	}
	if len(schemas.at) >= locatorPlaces {
		clear(schemas.at)
	}
	schemas.at[key] = rs
	return rs, nil
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
	at := place{doc: id, ptr: frag}
	rs, err := resolveAt(at)
	if err != nil {
		return nil, fmt.Errorf("contract: compile %s: %w", ref, err)
	}
	s := &Schema{ref: ref, at: at, rs: rs}
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
	inst, err := decodeInstance(b)
	if err != nil {
		return Invalidf("bad_json", "not valid JSON: %v", err)
	}
	return s.validate(floats(inst, false))
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
// The value is left as it is.
func (s *Schema) ValidateInstance(inst any) error { return s.validate(floats(inst, true)) }

// UnmarshalInstance decodes JSON with its numbers kept exact (as
// json.Number), so a caller can validate and then inspect one decoded tree.
func UnmarshalInstance(b []byte) (any, error) {
	inst, err := decodeInstance(b)
	if err != nil {
		return nil, Invalidf("bad_json", "not valid JSON: %v", err)
	}
	return inst, nil
}

// decodeInstance decodes one JSON value, numbers as json.Number, and
// refuses anything after it.
func decodeInstance(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}

// floats returns v with each json.Number as a float64, which is how the
// validator reads numbers (it takes a json.Number for a string). A number
// beyond float64's range stands as the largest float64 of its sign, so it
// is still a number and still beyond any bound a schema sets. With copy,
// v is left as it is and the maps and slices holding a number are copies.
func floats(v any, copy bool) any {
	switch t := v.(type) {
	case json.Number:
		f, _ := strconv.ParseFloat(string(t), 64)
		if math.IsInf(f, 0) {
			f = math.Copysign(math.MaxFloat64, f)
		}
		return f
	case map[string]any:
		m := t
		if copy {
			m = make(map[string]any, len(t))
		}
		for k, e := range t {
			m[k] = floats(e, copy)
		}
		return m
	case []any:
		a := t
		if copy {
			a = make([]any, len(t))
		}
		for i, e := range t {
			a[i] = floats(e, copy)
		}
		return a
	}
	return v
}

func (s *Schema) validate(inst any) error {
	if s.rs.Validate(inst) == nil {
		return nil
	}
	r := locate(inst, s.at)
	ptr := "/" + strings.Join(r.path, "/")
	field := strings.Join(r.path, ".")
	if field == "" {
		field = "(root)"
	}
	return &Error{
		Kind:    KindInvalid,
		Code:    "schema_invalid",
		Field:   ptr,
		Message: fmt.Sprintf("field %s: %s", field, r.why),
	}
}
