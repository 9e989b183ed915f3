//go:build js && wasm

package fetch

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall/js"
)

// The JavaScript globals the bridge uses, looked up once: each lookup is
// a call across to JavaScript and a js.Value with a finalizer.
var (
	jsUint8Array = js.Global().Get("Uint8Array")
	jsPromise    = js.Global().Get("Promise")
	jsError_     = js.Global().Get("Error")
)

// helpers is worker.mjs's caduceusBridge: the JavaScript side of the
// bridge, which does in one call what would take many from Go. A program
// started without it (not by worker.mjs) has none, and the bridge makes
// each call itself.
var helpers = sync.OnceValue(func() js.Value {
	b := js.Global().Get("caduceusBridge")
	if b.Type() != js.TypeObject {
		return js.Undefined()
	}
	b.Set("settle", js.FuncOf(func(_ js.Value, a []js.Value) any {
		waiting.settle(a[0].Int(), a[1].Bool(), a[2])
		return nil
	}))
	b.Set("aborted", js.FuncOf(func(_ js.Value, a []js.Value) any {
		aborts.fire(a[0].Int())
		return nil
	}))
	return b
})

// Helpers is worker.mjs's caduceusBridge, and whether the program has it.
func Helpers() (js.Value, bool) {
	b := helpers()
	return b, b.Type() == js.TypeObject
}

type settled struct {
	v   js.Value
	err error
}

// waiting are the promises awaited through the helpers, by id.
var waiting = &awaits{chans: map[int]chan settled{}}

type awaits struct {
	mu    sync.Mutex
	next  int
	chans map[int]chan settled
}

func (w *awaits) add() (int, chan settled) {
	ch := make(chan settled, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	w.chans[w.next] = ch
	return w.next, ch
}

func (w *awaits) settle(id int, ok bool, v js.Value) {
	w.mu.Lock()
	ch := w.chans[id]
	delete(w.chans, id)
	w.mu.Unlock()
	if ch == nil {
		return
	}
	if ok {
		ch <- settled{v: v}
	} else {
		ch <- settled{err: jsError(v)}
	}
}

// AwaitID is what Await does with the helpers, for a helper that settles
// the promise it makes itself: it returns an id to hand the helper and
// what waits for its settling.
func AwaitID() (int, func() (js.Value, error)) {
	id, ch := waiting.add()
	return id, func() (js.Value, error) {
		s := <-ch
		return s.v, s.err
	}
}

// Forget drops an id from AwaitID whose helper threw before it could
// settle it.
func Forget(id int) {
	waiting.mu.Lock()
	delete(waiting.chans, id)
	waiting.mu.Unlock()
}

// aborts are the requests' cancels, by id, that their signal's abort
// calls.
var aborts = &cancels{fns: map[int]func(){}}

type cancels struct {
	mu   sync.Mutex
	next int
	fns  map[int]func()
}

func (c *cancels) add(cancel func()) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	c.fns[c.next] = cancel
	return c.next
}

func (c *cancels) remove(id int) {
	c.mu.Lock()
	delete(c.fns, id)
	c.mu.Unlock()
}

func (c *cancels) fire(id int) {
	c.mu.Lock()
	f := c.fns[id]
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// Await blocks the calling goroutine (never the JavaScript event loop's
// callback) until p settles, and returns its value or its rejection.
func Await(p js.Value) (js.Value, error) {
	if b, ok := Helpers(); ok {
		id, wait := AwaitID()
		func() {
			defer func() {
				if r := recover(); r != nil {
					Forget(id)
					panic(r)
				}
			}()
			b.Call("await", p, id)
		}()
		return wait()
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
	if b, ok := Helpers(); ok {
		id := promises.add()
		p := b.Call("promise", id)
		spawn(func() {
			run(func(v js.Value) { b.Call("resolve", id, v) }, func(err error) { b.Call("reject", id, err.Error()) })
		})
		return p
	}
	executor := js.FuncOf(func(_ js.Value, a []js.Value) any {
		resolve, reject := a[0], a[1]
		go run(func(v js.Value) { resolve.Invoke(v) }, func(err error) {
			reject.Invoke(jsError_.New(err.Error()))
		})
		return nil
	})
	defer executor.Release() // the Promise constructor calls it at once
	return jsPromise.New(executor)
}

// spawn runs f on a goroutine of its own: an idle one that ran an earlier
// f, or a new one. Under js/wasm a goroutine that ends gives its stack back
// and the next starts from the smallest, which a request's calls then grow
// again, copying it at each doubling; a goroutine kept for the next request
// keeps the stack it grew. At most maxIdle wait; the others end.
func spawn(f func()) {
	select {
	case idle <- f:
	default:
		go func() {
			for {
				f()
				if idleN.Add(1) > maxIdle {
					idleN.Add(-1)
					return
				}
				f = <-idle
				idleN.Add(-1)
			}
		}()
	}
}

const maxIdle = 64

var (
	// idle hands a function to a goroutine waiting for one (spawn).
	idle = make(chan func())
	// idleN counts the goroutines waiting on idle.
	idleN atomic.Int32
)

// promises numbers the promises made through the helpers.
var promises = &counter{}

type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

// Deferred returns a Promise and what resolves it (from any goroutine).
func Deferred() (js.Value, func()) {
	if b, ok := Helpers(); ok {
		id := promises.add()
		return b.Call("promise", id), func() { b.Call("resolve", id, js.Undefined()) }
	}
	var resolve js.Value
	executor := js.FuncOf(func(_ js.Value, a []js.Value) any { resolve = a[0]; return nil })
	defer executor.Release() // the Promise constructor calls it at once
	p := jsPromise.New(executor)
	return p, func() { resolve.Invoke() }
}

// BytesToJS copies b into a new Uint8Array.
func BytesToJS(b []byte) js.Value {
	a := jsUint8Array.New(len(b))
	js.CopyBytesToJS(a, b)
	return a
}
