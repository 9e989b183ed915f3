//go:build js && wasm

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"syscall/js"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/deploy/cloudflare/fetch"
	"github.com/caduceus-dev/caduceus/store/port"
)

var jsUint8Array = js.Global().Get("Uint8Array")

// d1 answers the edge's SQL port with the Worker's D1 binding: each call
// one prepared statement, bound and run on its own.
type d1 struct{ db js.Value }

var _ port.DB = d1{}

func (d d1) statement(q string, args []any) (js.Value, error) {
	if d.db.Type() != js.TypeObject {
		return js.Value{}, errors.New("d1: the Worker has no D1 binding named DB (wrangler.jsonc d1_databases)")
	}
	var s js.Value
	err := fetch.CatchJS(func() error {
		s = d.db.Call("prepare", q)
		if len(args) > 0 {
			vs := make([]any, len(args))
			for i, a := range args {
				switch v := a.(type) {
				case nil:
					vs[i] = js.Null()
				case int64:
					vs[i] = float64(v) // D1 binds numbers; the edge's integers stay below 2^53
				case int:
					vs[i] = float64(v)
				default:
					vs[i] = v
				}
			}
			s = s.Call("bind", vs...)
		}
		return nil
	})
	return s, err
}

// jsonArgs is the JSON of args as D1 binds them ("" for none), and
// whether JSON holds each as statement binds it (a string of valid UTF-8,
// a finite number, a boolean or nil); when it does not, the statement is
// bound from Go, argument by argument.
func jsonArgs(args []any) (string, bool) {
	if len(args) == 0 {
		return "", true
	}
	vs := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case nil, bool:
			vs[i] = v
		case string:
			if !utf8.ValidString(v) {
				return "", false
			}
			vs[i] = v
		case int64:
			vs[i] = float64(v) // as statement binds it
		case int:
			vs[i] = float64(v)
		case float64:
			if math.IsInf(v, 0) || math.IsNaN(v) {
				return "", false
			}
			vs[i] = v
		default:
			return "", false
		}
	}
	b, err := json.Marshal(vs)
	if err != nil {
		return "", false
	}
	return string(b), true
}

// call runs one of worker.mjs's D1 helpers (query, exec, batch) and
// awaits what it settles: a statement D1 refuses as it is prepared or
// bound throws (an error as statement's), one it refuses as it runs
// rejects (d1Error).
func (d d1) call(b js.Value, name string, args ...any) (js.Value, error) {
	if d.db.Type() != js.TypeObject {
		return js.Value{}, errors.New("d1: the Worker has no D1 binding named DB (wrangler.jsonc d1_databases)")
	}
	id, wait := fetch.AwaitID()
	if err := fetch.CatchJS(func() error { b.Call(name, append([]any{d.db, id}, args...)...); return nil }); err != nil {
		fetch.Forget(id)
		return js.Value{}, err
	}
	v, err := wait()
	if err != nil {
		return js.Value{}, d1Error(err)
	}
	return v, nil
}

// Query implements port.DB with raw(): each row an array of its values.
func (d d1) Query(_ context.Context, q string, args ...any) ([]port.Row, error) {
	if b, ok := fetch.Helpers(); ok {
		if a, ok := jsonArgs(args); ok {
			res, err := d.call(b, "query", q, a)
			if err != nil {
				return nil, err
			}
			if res.Type() == js.TypeString { // every value as JSON holds it
				var rows []port.Row
				if err := json.Unmarshal([]byte(res.String()), &rows); err != nil {
					return nil, fmt.Errorf("d1: the rows: %w", err)
				}
				if rows == nil {
					rows = []port.Row{}
				}
				return rows, nil
			}
			return goRows(res), nil
		}
	}
	s, err := d.statement(q, args)
	if err != nil {
		return nil, err
	}
	var p js.Value
	if err := fetch.CatchJS(func() error { p = s.Call("raw"); return nil }); err != nil {
		return nil, err
	}
	res, err := fetch.Await(p)
	if err != nil {
		return nil, d1Error(err)
	}
	return goRows(res), nil
}

// goRows are raw()'s rows, value by value.
func goRows(res js.Value) []port.Row {
	rows := make([]port.Row, res.Length())
	for i := range rows {
		r := res.Index(i)
		row := make(port.Row, r.Length())
		for j := range row {
			row[j] = goValue(r.Index(j))
		}
		rows[i] = row
	}
	return rows
}

// Exec implements port.DB with run(): its meta.changes.
func (d d1) Exec(_ context.Context, q string, args ...any) (int64, error) {
	if b, ok := fetch.Helpers(); ok {
		if a, ok := jsonArgs(args); ok {
			n, err := d.call(b, "exec", q, a)
			if err != nil {
				return 0, err
			}
			return int64(n.Int()), nil
		}
	}
	s, err := d.statement(q, args)
	if err != nil {
		return 0, err
	}
	var p js.Value
	if err := fetch.CatchJS(func() error { p = s.Call("run"); return nil }); err != nil {
		return 0, err
	}
	res, err := fetch.Await(p)
	if err != nil {
		return 0, d1Error(err)
	}
	return int64(res.Get("meta").Get("changes").Int()), nil
}

func goValue(v js.Value) any {
	switch v.Type() {
	case js.TypeString:
		return v.String()
	case js.TypeNumber:
		return v.Float()
	case js.TypeBoolean:
		return v.Bool()
	case js.TypeObject: // a BLOB arrives as an ArrayBuffer
		b := make([]byte, v.Get("byteLength").Int())
		js.CopyBytesToGo(b, jsUint8Array.New(v))
		return b
	}
	return nil
}

// Batch implements port.DB with batch(): D1 runs the statements in one
// transaction and rolls all back when one fails.
func (d d1) Batch(_ context.Context, stmts []port.Statement) error {
	if b, ok := fetch.Helpers(); ok {
		var buf strings.Builder
		buf.WriteByte('[')
		all := true
		for i, st := range stmts {
			a, ok := jsonArgs(st.Args)
			if !ok || !utf8.ValidString(st.SQL) {
				all = false
				break
			}
			if a == "" {
				a = "null"
			}
			q, _ := json.Marshal(st.SQL)
			if i > 0 {
				buf.WriteByte(',')
			}
			fmt.Fprintf(&buf, "[%s,%s]", q, a)
		}
		buf.WriteByte(']')
		if all {
			_, err := d.call(b, "batch", buf.String())
			return err
		}
	}
	list := make([]any, len(stmts))
	for i, st := range stmts {
		s, err := d.statement(st.SQL, st.Args)
		if err != nil {
			return err
		}
		list[i] = s
	}
	var p js.Value
	if err := fetch.CatchJS(func() error { p = d.db.Call("batch", list); return nil }); err != nil {
		return err
	}
	_, err := fetch.Await(p)
	return d1Error(err)
}

// d1Error marks D1's unique constraint failures (SQLite's message, which
// D1 passes on) as port.ErrUnique.
func d1Error(err error) error {
	if err != nil && port.SQLiteUnique(err.Error()) {
		return port.UniqueError(err)
	}
	return err
}
