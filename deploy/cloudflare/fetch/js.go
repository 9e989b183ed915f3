//go:build js && wasm

package fetch

import (
	"errors"
	"fmt"
	"syscall/js"
)

// Await blocks the calling goroutine (never the JavaScript event loop's
// callback) until p settles, and returns its value or its rejection.
func Await(p js.Value) (js.Value, error) {
	type settled struct {
		v   js.Value
		err error
	}
	ch := make(chan settled, 1)
	then := js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- settled{v: arg(a)}; return nil })
	catch := js.FuncOf(func(_ js.Value, a []js.Value) any { ch <- settled{err: jsError(arg(a))}; return nil })
	defer then.Release()
	defer catch.Release()
	p.Call("then", then, catch)
	s := <-ch
	return s.v, s.err
}

func arg(a []js.Value) js.Value {
	if len(a) == 0 {
		return js.Undefined()
	}
	return a[0]
}

// jsError is the Go error of a thrown or rejected JavaScript value.
func jsError(v js.Value) error {
	if v.Type() == js.TypeObject {
		if m := v.Get("message"); m.Type() == js.TypeString {
			return errors.New(m.String())
		}
	}
	return errors.New(v.String())
}

// CatchJS runs fn and turns a JavaScript exception it raises (syscall/js
// panics with a js.Error) into an error.
func CatchJS(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = jsError(je.Value)
				return
			}
			err = fmt.Errorf("%v", r)
		}
	}()
	return fn()
}

// NewPromise returns a Promise that run settles from a goroutine of its
// own, so run may block on other promises (Await).
func NewPromise(run func(resolve func(js.Value), reject func(error))) js.Value {
	executor := js.FuncOf(func(_ js.Value, a []js.Value) any {
		resolve, reject := a[0], a[1]
		go run(func(v js.Value) { resolve.Invoke(v) }, func(err error) {
			reject.Invoke(js.Global().Get("Error").New(err.Error()))
		})
		return nil
	})
	defer executor.Release() // the Promise constructor calls it at once
	return js.Global().Get("Promise").New(executor)
}

// Deferred returns a Promise and what resolves it (from any goroutine).
func Deferred() (js.Value, func()) {
	var resolve js.Value
	executor := js.FuncOf(func(_ js.Value, a []js.Value) any { resolve = a[0]; return nil })
	defer executor.Release() // the Promise constructor calls it at once
	p := js.Global().Get("Promise").New(executor)
	return p, func() { resolve.Invoke() }
}

// BytesToJS copies b into a new Uint8Array.
func BytesToJS(b []byte) js.Value {
	a := js.Global().Get("Uint8Array").New(len(b))
	js.CopyBytesToJS(a, b)
	return a
}
