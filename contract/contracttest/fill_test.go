package contracttest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

// Types that reach themselves through each kind of container the filler
// walks: a pointer, a slice, an array and a map.
type (
	chain struct {
		Name string
		Next *chain
	}
	kids struct {
		Name string
		Kids []kids
	}
	pair struct {
		Name string
		Pair [1]*pair
	}
	keyed struct {
		Name  string
		ByKey map[string]*keyed
	}
)

// sample has a field of every kind the filler knows, a self-referencing
// one first (so that the field numbered 1 has fields of its own), and the
// fields it must leave alone.
type sample struct {
	T        *chain
	K        kids
	P        pair
	Y        keyed
	S        string
	B        bool
	I        int
	I8       int8
	I64      int64
	U        uint
	U16      uint16
	F        float64
	F32      float32
	Bytes    []byte
	Bytes2   []byte
	Raw      json.RawMessage
	Arr      [2]string
	M        map[string]int
	Any      any
	Nested   struct{ X, Y int }
	Strings  []string
	Stringer fmt.Stringer // an interface with methods: left nil
	hidden   string
	Skipped  string `json:"-"`
}

// checkFilled walks v as the filler should have filled it: a value at most
// maxDepth levels below the root (each struct field, pointer target,
// element, key and map value one level down) is filled, and one deeper is
// left zero.
func checkFilled(t *testing.T, v reflect.Value, path string, depth int) {
	t.Helper()
	if depth > maxDepth {
		if !v.IsZero() {
			t.Errorf("%s at depth %d (past %d) is filled: %v", path, depth, maxDepth, v)
		}
		return
	}
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); !strings.ContainsAny(s, "\"\\<é\u2028") || !strings.HasPrefix(s, "s") {
			t.Errorf("%s = %q, want a string that needs escaping", path, s)
		}
	case reflect.Bool:
		if !v.Bool() {
			t.Errorf("%s is false", path)
		}
	case reflect.Int, reflect.Int8, reflect.Int64:
		if n := v.Int(); n < 1 || n > 100 {
			t.Errorf("%s = %d, want 1 to 100 (fits every width)", path, n)
		}
	case reflect.Uint, reflect.Uint16:
		if n := v.Uint(); n < 1 || n > 100 {
			t.Errorf("%s = %d, want 1 to 100", path, n)
		}
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); f <= 1 || f >= 101 || f == float64(int(f)) {
			t.Errorf("%s = %v, want a fraction between 1 and 101", path, f)
		}
	case reflect.Pointer:
		if v.IsNil() {
			t.Errorf("%s is nil", path)
			return
		}
		checkFilled(t, v.Elem(), path, depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() || sf.Tag.Get("json") == "-" || sf.Type.Kind() == reflect.Interface && sf.Type.NumMethod() > 0 {
				if !v.Field(i).IsZero() {
					t.Errorf("%s.%s is filled; it must be left alone", path, sf.Name)
				}
				continue
			}
			checkFilled(t, v.Field(i), path+"."+sf.Name, depth+1)
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			if v.Len() == 0 {
				t.Errorf("%s is empty", path)
			}
			return
		}
		if v.Len() != 2 {
			t.Errorf("%s has %d elements, want 2", path, v.Len())
			return
		}
		for i := range 2 {
			checkFilled(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
	case reflect.Array:
		for i := range v.Len() {
			checkFilled(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
	case reflect.Map:
		if v.Len() != 2 {
			t.Errorf("%s has %d members, want 2", path, v.Len())
		}
		for _, k := range v.MapKeys() {
			checkFilled(t, v.MapIndex(k), fmt.Sprintf("%s{%v}", path, k), depth+1)
		}
	case reflect.Interface:
		if v.IsNil() {
			t.Errorf("%s is nil", path)
		}
	}
}

// TestVariantsFillEveryFieldWithinTheDepthBound: the first variant fills
// every exported field at every depth down to maxDepth, through pointers,
// slices, arrays and maps of a self-referencing type, and leaves
// unexported fields, json:"-" fields and interfaces with methods alone.
func TestVariantsFillEveryFieldWithinTheDepthBound(t *testing.T) {
	full := Variants[sample]()[0]
	checkFilled(t, reflect.ValueOf(full), "sample", 0)
	// The bound is reached along each way down, and stops there.
	// T is 1 level down, its chain at 2, T.Next.Next.Next at 8: there, a
	// struct is allocated but its fields, at 9, are left zero.
	if last := full.T.Next.Next.Next; full.T.Next.Next.Name == "" || last == nil || last.Name != "" || last.Next != nil {
		t.Errorf("the chain of pointers is not filled to depth %d exactly", maxDepth)
	}
}

// TestVariantsValuesTellFieldsApart: scalar fields of one kind get
// different values and byte slices readable, different text, so an encoder
// that writes one field's value under another's name is caught.
func TestVariantsValuesTellFieldsApart(t *testing.T) {
	full := Variants[sample]()[0]
	ints := []int64{int64(full.I), int64(full.I8), full.I64, int64(full.U), int64(full.U16), int64(full.Nested.X), int64(full.Nested.Y)}
	if len(slices.Compact(slices.Sorted(slices.Values(ints)))) != len(ints) {
		t.Errorf("integer fields share values: %v", ints)
	}
	if full.F == float64(full.F32) {
		t.Errorf("float fields share a value: %v", full.F)
	}
	if full.S == full.Arr[0] || full.S == full.Strings[0] || full.Arr[0] == full.Strings[0] {
		t.Errorf("string fields share values: %q %q", full.S, full.Arr)
	}
	for _, b := range [][]byte{full.Bytes, full.Bytes2} {
		if strings.ContainsFunc(string(b), func(r rune) bool { return r < 0x21 || r > 0x7e }) {
			t.Errorf("bytes %q are not readable text", b)
		}
	}
	if string(full.Bytes) == string(full.Bytes2) {
		t.Errorf("byte fields share a value: %q", full.Bytes)
	}
}

// TestVariantsRawJSONNeedsCanonicalizing: a json.RawMessage (and an any) is
// given a JSON object whose keys are out of order, so what an encoder
// canonicalizes is exercised.
func TestVariantsRawJSONNeedsCanonicalizing(t *testing.T) {
	full := Variants[sample]()[0]
	for name, raw := range map[string][]byte{"Raw": full.Raw, "Any": mustJSON(t, full.Any)} {
		if name == "Any" {
			raw = []byte(`{"z":` + mustJSONString(t, full.Any.(map[string]any)["z"]) + `,"a":` + string(mustJSON(t, full.Any.(map[string]any)["a"])) + `}`)
		}
		canon, err := contract.CanonicalJSON(json.RawMessage(raw))
		if err != nil {
			t.Fatalf("%s: %s is not JSON: %v", name, raw, err)
		}
		if string(canon) == string(raw) {
			t.Errorf("%s: %s is already canonical", name, raw)
		}
		var obj map[string]any
		if json.Unmarshal(raw, &obj) != nil || len(obj) < 2 {
			t.Errorf("%s: %s is not an object of several members", name, raw)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustJSONString(t *testing.T, v any) string { return string(mustJSON(t, v)) }

// TestVariantsLeaveEachFieldZeroInTurn: after the full value come exactly
// one variant per field Fields lists, the i-th leaving that field (and so
// what is below it) zero and filling every other.
func TestVariantsLeaveEachFieldZeroInTurn(t *testing.T) {
	type leaf struct{ A, B string }
	type flat struct {
		P     *leaf
		N     int
		L     leaf
		Items []leaf
	}
	fields := Fields[flat]()
	want := []string{"P", "P.A", "P.B", "N", "L", "L.A", "L.B", "Items", "Items[0].A", "Items[0].B", "Items[1].A", "Items[1].B"}
	if !slices.Equal(fields, want) {
		t.Fatalf("Fields = %q, want %q", fields, want)
	}
	vs := Variants[flat]()
	if len(vs) != 1+len(fields) {
		t.Fatalf("%d variants for %d fields", len(vs), len(fields))
	}
	zero := map[string]func(flat) bool{
		"P":          func(v flat) bool { return v.P == nil },
		"P.A":        func(v flat) bool { return v.P != nil && v.P.A == "" },
		"P.B":        func(v flat) bool { return v.P != nil && v.P.B == "" },
		"N":          func(v flat) bool { return v.N == 0 },
		"L":          func(v flat) bool { return v.L == leaf{} },
		"L.A":        func(v flat) bool { return v.L.A == "" },
		"L.B":        func(v flat) bool { return v.L.B == "" },
		"Items":      func(v flat) bool { return v.Items == nil },
		"Items[0].A": func(v flat) bool { return len(v.Items) == 2 && v.Items[0].A == "" },
		"Items[0].B": func(v flat) bool { return len(v.Items) == 2 && v.Items[0].B == "" },
		"Items[1].A": func(v flat) bool { return len(v.Items) == 2 && v.Items[1].A == "" },
		"Items[1].B": func(v flat) bool { return len(v.Items) == 2 && v.Items[1].B == "" },
	}
	under := func(f, g string) bool { return f == g || strings.HasPrefix(f, g+".") || strings.HasPrefix(f, g+"[") }
	for i, v := range vs {
		for _, f := range fields {
			skipped := i > 0 && under(f, fields[i-1])
			if got := zero[f](v); got != skipped && !(skipped && f != fields[i-1]) {
				t.Errorf("variant %d (leaving %s zero): %s zero = %v", i, fieldName(fields, i), f, got)
			}
		}
	}
}

func fieldName(fields []string, i int) string {
	if i == 0 {
		return "none"
	}
	return fields[i-1]
}
