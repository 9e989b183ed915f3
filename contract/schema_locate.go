package contract

import (
	"fmt"
	"maps"
	"math"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/jsonschema-go/jsonschema"
)

// The validator answers whether a document fits its schema; a refusal
// must also say where and why. locate answers that, on refused documents
// only: it walks the schema beside the document, descending into each
// subschema the validator refuses the value under it for, and names the
// deepest offending value (first in document order among equals) and the
// rule it breaks there, in the words refusals have always used.

// refusal is where a document breaks its schema: the path of the
// offending value and what is wrong with it.
type refusal struct {
	path []string
	why  string
}

// application is a subschema applied to a value: the document's value
// itself ($ref, allOf, ...), or a member or item of it (step).
type application struct {
	inst any
	n    *jsonschema.Schema
	at   place
	step string
	into bool // the subschema applies to the member or item step
}

// locator walks one refused document; steps bounds a walk a cycle of
// $refs would keep going.
type locator struct{ steps int }

const locateSteps = 10_000

// locate finds the deepest offending value of inst under the schema at.
func locate(inst any, at place) refusal {
	n, ok := nodeAt(at)
	if !ok {
		return refusal{why: validatorSays(inst, at)}
	}
	var l locator
	return l.walk(inst, n, at, nil)
}

func (l *locator) walk(inst any, n *jsonschema.Schema, at place, path []string) refusal {
	l.steps++
	if l.steps > locateSteps {
		return refusal{path: path, why: validatorSays(inst, at)}
	}
	if why := valueRule(inst, n); why != "" {
		return refusal{path: path, why: why} // the validator checks no further either
	}
	var best *refusal
	consider := func(r refusal) {
		if best == nil || len(r.path) > len(best.path) {
			best = &r
		}
	}
	descend := func(as []application) {
		for _, a := range as {
			if valid(a.inst, a.at) {
				continue
			}
			p := path
			if a.into {
				p = append(slices.Clip(path), a.step)
			}
			consider(l.walk(a.inst, a.n, a.at, p))
		}
	}
	descend(refApplication(inst, n, at))
	if why := localRule(inst, n); why != "" {
		consider(refusal{path: path, why: why})
	}
	descend(memberApplications(inst, n, at))
	descend(logicApplications(inst, n, at))
	if why := logicRule(inst, n, at); why != "" {
		consider(refusal{path: path, why: why})
	}
	if best == nil {
		return refusal{path: path, why: validatorSays(inst, at)}
	}
	return *best
}

// valid reports whether inst fits the schema at p; a subschema that does
// not resolve is taken as fitting, so the walk names the value above it.
func valid(inst any, p place) bool {
	rs, err := resolvedAt(p)
	return err != nil || rs.Validate(inst) == nil
}

// validatorSays is the validator's own reason, without the schema
// locations it prefixes it with: for a rule locate does not word.
func validatorSays(inst any, p place) string {
	rs, err := resolvedAt(p)
	if err != nil {
		return "validation failed"
	}
	err = rs.Validate(inst)
	if err == nil {
		return "validation failed"
	}
	msg := err.Error()
	for strings.HasPrefix(msg, "validating ") {
		_, rest, ok := strings.Cut(msg, ": ")
		if !ok {
			break
		}
		msg = rest
	}
	return msg
}

func refApplication(inst any, n *jsonschema.Schema, at place) []application {
	if n.Ref == "" {
		return nil
	}
	base, err := url.Parse(at.doc)
	if err != nil {
		return nil
	}
	ref, err := url.Parse(n.Ref)
	if err != nil {
		return nil
	}
	u := base.ResolveReference(ref)
	to := place{ptr: u.Fragment}
	u.Fragment, u.RawFragment = "", ""
	to.doc = u.String()
	sub, ok := nodeAt(to)
	if !ok {
		return nil
	}
	return []application{{inst: inst, n: sub, at: to}}
}

// memberApplications are the subschemas an object's members or an
// array's items are validated under, in document order.
func memberApplications(inst any, n *jsonschema.Schema, at place) []application {
	var as []application
	switch v := inst.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			matched := false
			if sub, ok := n.Properties[k]; ok {
				as = append(as, application{v[k], sub, at.child("/properties/" + escapePointer(k)), k, true})
				matched = true
			}
			for re, sub := range n.PatternProperties {
				if ok, _ := regexp.MatchString(re, k); ok {
					as = append(as, application{v[k], sub, at.child("/patternProperties/" + escapePointer(re)), k, true})
					matched = true
				}
			}
			if !matched && n.AdditionalProperties != nil && !isFalse(n.AdditionalProperties) {
				as = append(as, application{v[k], n.AdditionalProperties, at.child("/additionalProperties"), k, true})
			}
		}
	case []any:
		for i, e := range v {
			step := strconv.Itoa(i)
			if i < len(n.PrefixItems) {
				as = append(as, application{e, n.PrefixItems[i], at.child("/prefixItems/" + step), step, true})
			} else if n.Items != nil {
				as = append(as, application{e, n.Items, at.child("/items"), step, true})
			}
		}
	}
	return as
}

// logicApplications are allOf's subschemas, anyOf's and oneOf's when none
// holds, and the then or else the if chooses.
func logicApplications(inst any, n *jsonschema.Schema, at place) []application {
	var as []application
	all := func(kw string, subs []*jsonschema.Schema) {
		for i, sub := range subs {
			as = append(as, application{inst: inst, n: sub, at: at.child("/" + kw + "/" + strconv.Itoa(i))})
		}
	}
	all("allOf", n.AllOf)
	if len(n.AnyOf) > 0 && len(holding(inst, n.AnyOf, at.child("/anyOf"))) == 0 {
		all("anyOf", n.AnyOf)
	}
	if len(n.OneOf) > 0 && len(holding(inst, n.OneOf, at.child("/oneOf"))) == 0 {
		all("oneOf", n.OneOf)
	}
	if n.If != nil {
		if valid(inst, at.child("/if")) {
			if n.Then != nil {
				as = append(as, application{inst: inst, n: n.Then, at: at.child("/then")})
			}
		} else if n.Else != nil {
			as = append(as, application{inst: inst, n: n.Else, at: at.child("/else")})
		}
	}
	return as
}

// holding are the indexes of subs (at kw, e.g. .../oneOf) inst fits.
func holding(inst any, subs []*jsonschema.Schema, kw place) []int {
	var ok []int
	for i := range subs {
		if valid(inst, kw.child("/"+strconv.Itoa(i))) {
			ok = append(ok, i)
		}
	}
	return ok
}

// logicRule is what not, or a oneOf more than one subschema holds for,
// says of inst.
func logicRule(inst any, n *jsonschema.Schema, at place) string {
	if n.Not != nil && !isFalse(n) && valid(inst, at.child("/not")) {
		return "'not' failed"
	}
	if len(n.OneOf) > 0 {
		if ok := holding(inst, n.OneOf, at.child("/oneOf")); len(ok) > 1 {
			return fmt.Sprintf("'oneOf' failed, subschemas %d, %d matched", ok[0], ok[1])
		}
	}
	return ""
}

// isFalse reports whether s is the schema false (which the validator
// reads as {"not": {}}).
func isFalse(s *jsonschema.Schema) bool {
	return s.Not != nil && reflect.ValueOf(*s.Not).IsZero()
}

// valueRule is what the schema false, type, const or enum says of inst
// ("" when they all hold): the rules after which nothing else is checked.
func valueRule(inst any, n *jsonschema.Schema) string {
	if isFalse(n) {
		return "false schema"
	}
	want := n.Types
	if n.Type != "" {
		want = []string{n.Type}
	}
	if len(want) > 0 {
		got := jsonTypeOf(inst)
		integral := false
		if f, ok := inst.(float64); ok {
			integral = f == math.Trunc(f)
		}
		if !slices.Contains(want, got) && !(integral && slices.Contains(want, "integer")) {
			want = slices.Clone(want)
			slices.SortStableFunc(want, func(a, b string) int { return typeRank(a) - typeRank(b) })
			return fmt.Sprintf("got %s, want %s", got, strings.Join(want, " or "))
		}
	}
	if n.Const != nil && !reflect.DeepEqual(inst, *n.Const) {
		return mustBe([]any{*n.Const}, "'const' failed")
	}
	if n.Enum != nil && !slices.ContainsFunc(n.Enum, func(e any) bool { return reflect.DeepEqual(inst, e) }) {
		return mustBe(n.Enum, "'enum' failed")
	}
	return ""
}

// mustBe words a const or enum a value is not: "value must be 'a'", or
// "value must be one of 'a', 'b'"; other when one is an object or array.
func mustBe(want []any, other string) string {
	var ws []string
	for _, w := range want {
		switch w := w.(type) {
		case string:
			ws = append(ws, quote(w))
		case []any, map[string]any:
			return other
		default:
			ws = append(ws, fmt.Sprint(w))
		}
	}
	if len(ws) == 1 {
		return "value must be " + ws[0]
	}
	return "value must be one of " + strings.Join(ws, ", ")
}

// typeRank orders the JSON types as refusals name them: "want null or
// string", whatever the schema's order.
func typeRank(t string) int {
	return slices.Index([]string{"null", "boolean", "number", "integer", "string", "array", "object"}, t)
}

// jsonTypeOf is the JSON type of a decoded value, numbers all "number".
func jsonTypeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// localRule is the first rule of n on inst's own value (its bounds, its
// length, its members' names) inst breaks, "" when it breaks none.
func localRule(inst any, n *jsonschema.Schema) string {
	switch v := inst.(type) {
	case map[string]any:
		return objectRule(v, n)
	case []any:
		return arrayRule(v, n)
	case string:
		return stringRule(v, n)
	case float64:
		return numberRule(v, n)
	}
	return ""
}

func objectRule(obj map[string]any, n *jsonschema.Schema) string {
	if n.MinProperties != nil && len(obj) < *n.MinProperties {
		return fmt.Sprintf("minProperties: got %d, want %d", len(obj), *n.MinProperties)
	}
	if n.MaxProperties != nil && len(obj) > *n.MaxProperties {
		return fmt.Sprintf("maxProperties: got %d, want %d", len(obj), *n.MaxProperties)
	}
	if missing := absent(obj, n.Required); len(missing) == 1 {
		return "missing property " + quote(missing[0])
	} else if len(missing) > 1 {
		return "missing properties " + quoteAll(missing)
	}
	for _, p := range slices.Sorted(maps.Keys(n.DependentRequired)) {
		if _, ok := obj[p]; ok {
			if missing := absent(obj, n.DependentRequired[p]); len(missing) > 0 {
				return fmt.Sprintf("properties %s required, if %s exists", quoteAll(missing), quote(p))
			}
		}
	}
	if n.AdditionalProperties != nil && isFalse(n.AdditionalProperties) {
		var extra []string
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if _, ok := n.Properties[k]; !ok && !matchesAny(n.PatternProperties, k) {
				extra = append(extra, k)
			}
		}
		if len(extra) > 0 {
			return fmt.Sprintf("additional properties %s not allowed", quoteAll(extra))
		}
	}
	return ""
}

func absent(obj map[string]any, names []string) []string {
	var missing []string
	for _, p := range names {
		if _, ok := obj[p]; !ok {
			missing = append(missing, p)
		}
	}
	return missing
}

func matchesAny(patterns map[string]*jsonschema.Schema, k string) bool {
	for re := range patterns {
		if ok, _ := regexp.MatchString(re, k); ok {
			return true
		}
	}
	return false
}

func arrayRule(a []any, n *jsonschema.Schema) string {
	if n.MinItems != nil && len(a) < *n.MinItems {
		return fmt.Sprintf("minItems: got %d, want %d", len(a), *n.MinItems)
	}
	if n.MaxItems != nil && len(a) > *n.MaxItems {
		return fmt.Sprintf("maxItems: got %d, want %d", len(a), *n.MaxItems)
	}
	if n.UniqueItems {
		for j := range a {
			for i := range j {
				if reflect.DeepEqual(a[i], a[j]) {
					return fmt.Sprintf("items at %d and %d are equal", i, j)
				}
			}
		}
	}
	return ""
}

func stringRule(s string, n *jsonschema.Schema) string {
	got := utf8.RuneCountInString(s)
	if n.MinLength != nil && got < *n.MinLength {
		return fmt.Sprintf("minLength: got %d, want %d", got, *n.MinLength)
	}
	if n.MaxLength != nil && got > *n.MaxLength {
		return fmt.Sprintf("maxLength: got %d, want %d", got, *n.MaxLength)
	}
	if n.Pattern != "" {
		if ok, err := regexp.MatchString(n.Pattern, s); err == nil && !ok {
			return fmt.Sprintf("%s does not match pattern %s", quote(s), quote(n.Pattern))
		}
	}
	return ""
}

func numberRule(f float64, n *jsonschema.Schema) string {
	for _, b := range []struct {
		kw    string
		bound *float64
		fails func(f, b float64) bool
	}{
		{"minimum", n.Minimum, func(f, b float64) bool { return f < b }},
		{"maximum", n.Maximum, func(f, b float64) bool { return f > b }},
		{"exclusiveMinimum", n.ExclusiveMinimum, func(f, b float64) bool { return f <= b }},
		{"exclusiveMaximum", n.ExclusiveMaximum, func(f, b float64) bool { return f >= b }},
		{"multipleOf", n.MultipleOf, func(f, b float64) bool { _, r := math.Modf(f / b); return r != 0 }},
	} {
		if b.bound != nil && b.fails(f, *b.bound) {
			return fmt.Sprintf("%s: got %v, want %v", b.kw, f, *b.bound)
		}
	}
	return ""
}

// quote single-quotes s as refusals always have: 'a\'b'.
func quote(s string) string {
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
	return "'" + strings.ReplaceAll(q, `'`, `\'`) + "'"
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = quote(s)
	}
	return strings.Join(q, ", ")
}

// escapePointer escapes a name as one JSON pointer token.
func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// nodeAt is the schema at p within the embedded documents.
func nodeAt(p place) (*jsonschema.Schema, bool) {
	n := schemas.docs[p.doc]
	if n == nil || p.ptr == "" {
		return n, n != nil
	}
	if !strings.HasPrefix(p.ptr, "/") {
		return nil, false // an anchor: the embedded schemas use none
	}
	tokens := strings.Split(p.ptr[1:], "/")
	for i := 0; i < len(tokens) && n != nil; i++ {
		kw := tokens[i]
		if one, ok := schemaOne[kw]; ok {
			n = one(n)
			continue
		}
		if i+1 == len(tokens) {
			return nil, false
		}
		i++
		key := strings.ReplaceAll(strings.ReplaceAll(tokens[i], "~1", "/"), "~0", "~")
		if named, ok := schemaNamed[kw]; ok {
			n = named(n)[key]
		} else if listed, ok := schemaListed[kw]; ok {
			j, err := strconv.Atoi(key)
			if err != nil || j < 0 || j >= len(listed(n)) {
				return nil, false
			}
			n = listed(n)[j]
		} else {
			return nil, false
		}
	}
	return n, n != nil
}

// The keywords a JSON pointer into a schema steps through: to one
// subschema, to one of a map of them by name, to one of a list by index.
var (
	schemaOne = map[string]func(*jsonschema.Schema) *jsonschema.Schema{
		"items":                 func(s *jsonschema.Schema) *jsonschema.Schema { return s.Items },
		"additionalProperties":  func(s *jsonschema.Schema) *jsonschema.Schema { return s.AdditionalProperties },
		"not":                   func(s *jsonschema.Schema) *jsonschema.Schema { return s.Not },
		"if":                    func(s *jsonschema.Schema) *jsonschema.Schema { return s.If },
		"then":                  func(s *jsonschema.Schema) *jsonschema.Schema { return s.Then },
		"else":                  func(s *jsonschema.Schema) *jsonschema.Schema { return s.Else },
		"contains":              func(s *jsonschema.Schema) *jsonschema.Schema { return s.Contains },
		"propertyNames":         func(s *jsonschema.Schema) *jsonschema.Schema { return s.PropertyNames },
		"unevaluatedProperties": func(s *jsonschema.Schema) *jsonschema.Schema { return s.UnevaluatedProperties },
		"unevaluatedItems":      func(s *jsonschema.Schema) *jsonschema.Schema { return s.UnevaluatedItems },
	}
	schemaNamed = map[string]func(*jsonschema.Schema) map[string]*jsonschema.Schema{
		"$defs":             func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Defs },
		"definitions":       func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Definitions },
		"properties":        func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.Properties },
		"patternProperties": func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.PatternProperties },
		"dependentSchemas":  func(s *jsonschema.Schema) map[string]*jsonschema.Schema { return s.DependentSchemas },
	}
	schemaListed = map[string]func(*jsonschema.Schema) []*jsonschema.Schema{
		"allOf":       func(s *jsonschema.Schema) []*jsonschema.Schema { return s.AllOf },
		"anyOf":       func(s *jsonschema.Schema) []*jsonschema.Schema { return s.AnyOf },
		"oneOf":       func(s *jsonschema.Schema) []*jsonschema.Schema { return s.OneOf },
		"prefixItems": func(s *jsonschema.Schema) []*jsonschema.Schema { return s.PrefixItems },
	}
)
