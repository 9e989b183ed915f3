package contracttest

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Violation is one instance that breaks exactly one rule of a schema (as
// far as the generator can make it so), made from a valid base instance.
type Violation struct {
	Rule     string // e.g. "/properties/session_id maxLength 120"
	Instance []byte // the JSON instance
}

// Violations walks the schema at ref ("file.json" or "file.json#/$defs/x")
// in fsys and returns, for every rule it holds at every depth, an instance
// made from base (valid JSON for that schema) that breaks the rule. Every
// optional property must have a value in base, so that its rules are
// reached; every keyword must be one the generator knows. Either lack is
// an error, so a rule added to a schema is never passed over silently: the
// differential tests of the Go mirrors (trader.ParseRequest,
// contract.Provenance.Validate) then fail until the mirror has the rule.
func Violations(fsys fs.FS, ref string, base []byte) ([]Violation, error) {
	var inst any
	if err := json.Unmarshal(base, &inst); err != nil {
		return nil, fmt.Errorf("contracttest: base: %w", err)
	}
	g := &gen{fsys: fsys, files: map[string]map[string]any{}}
	file, ptr, _ := strings.Cut(ref, "#")
	node, err := g.resolve(file, ptr)
	if err != nil {
		return nil, err
	}
	if err := g.walk(file, node, inst, "", func(v any) any { return v }); err != nil {
		return nil, err
	}
	return g.out, nil
}

type gen struct {
	fsys  fs.FS
	files map[string]map[string]any
	out   []Violation
}

// set replaces the value at the walked position within the whole instance.
type set func(v any) any

// known are the keywords that carry no rule.
var annotations = map[string]bool{"$schema": true, "$id": true, "$comment": true, "$defs": true,
	"title": true, "description": true, "examples": true, "default": true, "deprecated": true}

func (g *gen) resolve(file, ptr string) (map[string]any, error) {
	doc, ok := g.files[file]
	if !ok {
		b, err := fs.ReadFile(g.fsys, file)
		if err != nil {
			return nil, fmt.Errorf("contracttest: %w", err)
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("contracttest: %s: %w", file, err)
		}
		g.files[file] = doc
	}
	var node any = doc
	for _, part := range strings.Split(strings.Trim(ptr, "/"), "/") {
		if part == "" {
			continue
		}
		m, ok := node.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("contracttest: %s#%s does not resolve", file, ptr)
		}
		node = m[part]
	}
	m, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("contracttest: %s#%s is not a schema", file, ptr)
	}
	return m, nil
}

func (g *gen) emit(rule string, whole any) {
	b, _ := json.Marshal(whole)
	g.out = append(g.out, Violation{Rule: rule, Instance: b})
}

// walk generates the violations of node at the position where the
// instance holds v; put(x) returns the whole instance with x there. A $ref
// is walked first, then every keyword in name order.
func (g *gen) walk(file string, node map[string]any, v any, at string, put set) error {
	if ref, ok := node["$ref"].(string); ok {
		f, ptr, _ := strings.Cut(ref, "#")
		if f == "" {
			f = file
		} else {
			f = path.Base(f)
		}
		target, err := g.resolve(f, ptr)
		if err != nil {
			return err
		}
		if err := g.walk(f, target, v, at, put); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(node))
	for k := range node {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if err := g.keyword(file, node, k, v, at, put); err != nil {
			return err
		}
	}
	return nil
}

// keyword generates the violations of one keyword k of node.
func (g *gen) keyword(file string, node map[string]any, k string, v any, at string, put set) error {
	rule := at + " " + k
	switch k {
	case "$ref", "if", "then", "else":
		return nil
	case "type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "format":
		return g.valueRule(rule, k, node[k], v, put)
	case "required", "additionalProperties":
		return g.objectRule(rule, k, node[k], v, put)
	case "properties":
		return g.properties(file, node[k].(map[string]any), v, at, rule, put)
	case "items", "minItems", "maxItems":
		return g.arrayRule(file, rule, k, node[k], v, at, put)
	case "allOf":
		return g.allOf(file, node[k].([]any), v, at, rule, put)
	}
	if !annotations[k] {
		return fmt.Errorf("contracttest: %s: the generator does not know this keyword; teach it, so the mirrors are proved against it", rule)
	}
	return nil
}

// valueRule breaks a keyword on the value itself: its type, enum, const,
// pattern, length, bounds or format.
func (g *gen) valueRule(rule, k string, arg, v any, put set) error {
	switch k {
	case "type":
		g.emit(rule, put(wrongType(arg)))
	case "enum":
		g.emit(rule, put("zz-not-in-the-enum"))
	case "const":
		g.emit(rule, put("zz-not-the-const"))
	case "pattern":
		re, err := regexp.Compile(arg.(string))
		if err != nil {
			return fmt.Errorf("contracttest: %s: %w", rule, err)
		}
		bad, ok := notMatching(re, v)
		if !ok {
			return fmt.Errorf("contracttest: %s: no candidate string breaks %s", rule, re)
		}
		g.emit(rule+" "+re.String(), put(bad))
	case "minLength":
		if n := int(arg.(float64)); n > 0 {
			g.emit(fmt.Sprintf("%s %d", rule, n), put(strings.Repeat("x", n-1)))
		}
	case "maxLength":
		n := int(arg.(float64))
		g.emit(fmt.Sprintf("%s %d", rule, n), put(strings.Repeat("é", n+1)))
	case "minimum":
		g.emit(rule, put(arg.(float64)-0.5))
	case "maximum":
		g.emit(rule, put(arg.(float64)+0.5))
	case "exclusiveMinimum", "exclusiveMaximum":
		g.emit(rule, put(arg.(float64)))
	case "format":
		g.emit(rule, put("zz not a "+arg.(string)))
	}
	return nil
}

// objectRule breaks required (each name left out in turn) and
// additionalProperties false (an unknown member added).
func (g *gen) objectRule(rule, k string, arg, v any, put set) error {
	if k == "required" {
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("contracttest: %s: the base has no object here", rule)
		}
		for _, name := range arg.([]any) {
			c := clone(obj)
			delete(c, name.(string))
			g.emit(rule+" "+name.(string), put(c))
		}
		return nil
	}
	b, ok := arg.(bool)
	if !ok {
		return fmt.Errorf("contracttest: %s: only additionalProperties false is known", rule)
	}
	if !b {
		c := clone(v.(map[string]any))
		c["zz_unknown"] = 1
		g.emit(rule, put(c))
	}
	return nil
}

// properties walks each property's schema, in name order, at the
// property's value in the base.
func (g *gen) properties(file string, props map[string]any, v any, at, rule string, put set) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("contracttest: %s: the base has no object here", rule)
	}
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		pv, ok := obj[name]
		if !ok {
			return fmt.Errorf("contracttest: %s/%s: the base must give this property a value", at, name)
		}
		err := g.walk(file, props[name].(map[string]any), pv, at+"/"+name, func(x any) any {
			c := clone(obj)
			c[name] = x
			return put(c)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// arrayRule walks items at the base's first element and breaks minItems
// (one too few) and maxItems (one too many).
func (g *gen) arrayRule(file, rule, k string, arg, v any, at string, put set) error {
	switch k {
	case "items":
		arr, ok := v.([]any)
		if !ok || len(arr) == 0 {
			return fmt.Errorf("contracttest: %s: the base must hold a non-empty array here", rule)
		}
		return g.walk(file, arg.(map[string]any), arr[0], at+"/0", func(x any) any {
			c := slices.Clone(arr)
			c[0] = x
			return put(c)
		})
	case "minItems":
		if n := int(arg.(float64)); n > 0 {
			g.emit(rule, put(v.([]any)[:n-1]))
		}
	case "maxItems":
		arr := v.([]any)
		c := slices.Clone(arr)
		for len(c) <= int(arg.(float64)) {
			c = append(c, arr[0])
		}
		g.emit(rule, put(c))
	}
	return nil
}

// allOf walks each sub-schema; for an if/then one it first makes the
// condition hold in the base, then breaks what it implies.
func (g *gen) allOf(file string, subs []any, v any, at, rule string, put set) error {
	for i, sub := range subs {
		s := sub.(map[string]any)
		if cond, ok := s["if"].(map[string]any); ok {
			held, err := holding(cond, v)
			if err != nil {
				return fmt.Errorf("contracttest: %s/%d: %w", rule, i, err)
			}
			then, _ := s["then"].(map[string]any)
			if err := g.walk(file, then, held, fmt.Sprintf("%s/%d/then", at, i), put); err != nil {
				return err
			}
			continue
		}
		if err := g.walk(file, s, v, fmt.Sprintf("%s/%d", at, i), put); err != nil {
			return err
		}
	}
	return nil
}

// holding returns v changed so that cond (properties with const values)
// holds.
func holding(cond map[string]any, v any) (any, error) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("if: the base has no object here")
	}
	c := clone(obj)
	for k, s := range cond {
		switch k {
		case "required":
		case "properties":
			for name, ps := range s.(map[string]any) {
				cv, ok := ps.(map[string]any)["const"]
				if !ok || len(ps.(map[string]any)) != 1 {
					return nil, fmt.Errorf("if: only properties with a const are known")
				}
				c[name] = cv
			}
		default:
			return nil, fmt.Errorf("if: keyword %s is not known", k)
		}
	}
	return c, nil
}

func wrongType(t any) any {
	allowed := map[string]bool{}
	switch t := t.(type) {
	case string:
		allowed[t] = true
	case []any:
		for _, s := range t {
			allowed[s.(string)] = true
		}
	}
	switch {
	case !allowed["object"]:
		return map[string]any{"zz": 1}
	case !allowed["string"]:
		return "zz"
	default:
		return 12345
	}
}

// notMatching returns a string the pattern refuses, preferring ones close
// to the base value.
func notMatching(re *regexp.Regexp, v any) (string, bool) {
	s, _ := v.(string)
	cands := []string{s + " ", " " + s, s + "!", "!", "é", "", "x", "0", "A", "Z!", strings.Repeat("x", 300),
		strings.ToUpper(s) + "!", "sha256:" + strings.Repeat("z", 64), "\n"}
	for _, c := range cands {
		if !re.MatchString(c) {
			return c, true
		}
	}
	return "", false
}

func clone(m map[string]any) map[string]any {
	c := make(map[string]any, len(m))
	for k, v := range m {
		c[k] = v
	}
	return c
}
