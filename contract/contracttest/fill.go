// Package contracttest builds values by reflection for the proofs of the
// hand-written encoders (the sealed audit body, the relay codec, the relay
// delivery record): every exported field, at every depth, is filled, so a
// field added to a struct without its encoder makes the proof fail instead
// of vanishing from what the hand-writer emits. Loop is the body of the
// benchmarks that set each hand-written codec against the library it
// replaces.
package contracttest

import (
	"encoding/json"
	"fmt"
	"reflect"
)

// maxDepth bounds the recursion through self-referencing types.
const maxDepth = 8

// Variants returns values of type T: the first with every exported field
// filled at every depth (pointers allocated, slices and maps given two
// elements, strings made of characters that need escaping), then one value
// per field (at any depth) that is the first with just that field left at
// its zero value, so that the encoders' handling of omitted and empty
// fields is proved field by field too.
func Variants[T any]() []T {
	var full T
	n := fill(reflect.ValueOf(&full).Elem(), -1)
	out := []T{full}
	for skip := range n {
		var v T
		fill(reflect.ValueOf(&v).Elem(), skip)
		out = append(out, v)
	}
	return out
}

// Fields lists the dotted paths of every field Variants fills in T (for
// messages: which field a failing variant left zero).
func Fields[T any]() []string {
	var paths []string
	var v T
	f := filler{skip: -1, paths: &paths}
	f.value(reflect.ValueOf(&v).Elem(), "", 0)
	return paths
}

// fill fills v, leaving the field numbered skip at its zero value, and
// returns how many fields it numbered.
func fill(v reflect.Value, skip int) int {
	f := filler{skip: skip}
	f.value(v, "", 0)
	return f.n
}

type filler struct {
	n     int
	skip  int
	paths *[]string
}

// rawJSON is the value a json.RawMessage field gets: an object whose keys
// are out of order, so canonicalization is exercised too.
var rawJSON = json.RawMessage(`{"z":1,"a":["<é>",2.5,true,null]}`)

func (f *filler) value(v reflect.Value, path string, depth int) {
	if depth > maxDepth {
		return
	}
	n := f.n
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d \"<é>\u2028\\", n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(n%100 + 1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(uint64(n%100 + 1))
	case reflect.Float32, reflect.Float64:
		v.SetFloat(float64(n%100) + 1.5)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		f.value(p.Elem(), path, depth+1)
		v.Set(p)
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() || sf.Tag.Get("json") == "-" {
				continue
			}
			f.field(v.Field(i), join(path, sf.Name), depth+1)
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			v.SetBytes(append([]byte(nil), rawJSON...))
			break
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes([]byte(fmt.Sprintf("b%d", n)))
			break
		}
		s := reflect.MakeSlice(v.Type(), 2, 2)
		for i := range 2 {
			f.value(s.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
		v.Set(s)
	case reflect.Array:
		for i := range v.Len() {
			f.value(v.Index(i), fmt.Sprintf("%s[%d]", path, i), depth+1)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for i := range 2 {
			k := reflect.New(v.Type().Key()).Elem()
			f.value(k, path+"{key}", depth+1)
			if k.Kind() == reflect.String {
				k.SetString(fmt.Sprintf("k%d-%d", n, i))
			}
			e := reflect.New(v.Type().Elem()).Elem()
			f.value(e, fmt.Sprintf("%s{%d}", path, i), depth+1)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Interface:
		if v.NumMethod() == 0 {
			v.Set(reflect.ValueOf(map[string]any{"z": fmt.Sprintf("v%d", n), "a": []any{1.5, "<>", nil}}))
		}
	}
}

// field numbers one struct field and fills it unless it is the one to skip.
func (f *filler) field(v reflect.Value, path string, depth int) {
	n := f.n
	f.n++
	if f.paths != nil {
		*f.paths = append(*f.paths, path)
	}
	if n == f.skip {
		return
	}
	f.value(v, path, depth)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}
