//go:build js && wasm

package main

import (
	"context"
	"errors"
	"syscall/js"

	"github.com/caduceus-dev/caduceus/deploy/cloudflare/fetch"
	"github.com/caduceus-dev/caduceus/store/port"
)

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

// Query implements port.DB with raw(): each row an array of its values.
func (d d1) Query(_ context.Context, q string, args ...any) ([]port.Row, error) {
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
	rows := make([]port.Row, res.Length())
	for i := range rows {
		r := res.Index(i)
		row := make(port.Row, r.Length())
		for j := range row {
			row[j] = goValue(r.Index(j))
		}
		rows[i] = row
	}
	return rows, nil
}

// Exec implements port.DB with run(): its meta.changes.
func (d d1) Exec(_ context.Context, q string, args ...any) (int64, error) {
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
		js.CopyBytesToGo(b, js.Global().Get("Uint8Array").New(v))
		return b
	}
	return nil
}

// Batch implements port.DB with batch(): D1 runs the statements in one
// transaction and rolls all back when one fails.
func (d d1) Batch(_ context.Context, stmts []port.Statement) error {
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
