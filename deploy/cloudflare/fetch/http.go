//go:build js && wasm

// Package fetch is the Worker's bridge between the Fetch API and net/http:
// a JavaScript Request served by an http.Handler and answered with a
// Response (streamed from the handler's first flush), and the promise
// helpers the Worker's Go side awaits JavaScript with.
package fetch

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"syscall/js"
)

// Handle serves one Fetch API Request with h and resolves the Response.
// A handler that never flushes is answered with its whole body at once; one
// that flushes (a stream) gets a streamed Response from its first flush on,
// each later write passed on as it comes. The request's context is
// canceled when its Fetch signal aborts (the client left), as net/http
// cancels it at serve. A handler that panics with http.ErrAbortHandler
// after its stream began has its stream aborted, not closed, so the client
// sees it end abnormally (the shim writes the wire's own error event
// first). Handle returns when the handler has, recorded turns included.
func Handle(h http.Handler, req js.Value, resolve func(js.Value), reject func(error)) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if stop := onAbort(req.Get("signal"), cancel); stop != nil {
		defer stop()
	}
	r, err := request(ctx, req)
	if err != nil {
		reject(err)
		return
	}
	w := &responseWriter{header: http.Header{}, resolve: resolve}
	defer func() {
		p := recover()
		switch {
		case p == nil:
			w.finish()
		case w.started:
			if p != http.ErrAbortHandler {
				fmt.Fprintf(os.Stderr, "caduceus edge: %v\n", p)
			}
			w.abort()
		default:
			w.header, w.status, w.buf = http.Header{"Content-Type": {"text/plain; charset=utf-8"}}, http.StatusInternalServerError, bytes.Buffer{}
			fmt.Fprintf(&w.buf, "caduceus edge: %v\n", p)
			w.finish()
		}
	}()
	h.ServeHTTP(w, r)
}

// onAbort calls cancel when signal (a Fetch AbortSignal) aborts, and
// returns what stops listening; nil when there is no signal.
func onAbort(signal js.Value, cancel func()) (stop func()) {
	if signal.Type() != js.TypeObject {
		return nil
	}
	if signal.Get("aborted").Truthy() {
		cancel()
		return nil
	}
	f := js.FuncOf(func(js.Value, []js.Value) any { cancel(); return nil })
	signal.Call("addEventListener", "abort", f)
	return func() {
		signal.Call("removeEventListener", "abort", f)
		f.Release()
	}
}

// request reads a Fetch API Request into an *http.Request.
func request(ctx context.Context, req js.Value) (*http.Request, error) {
	var body []byte
	if b := req.Get("body"); b.Type() == js.TypeObject {
		ab, err := Await(req.Call("arrayBuffer"))
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
		body = make([]byte, ab.Get("byteLength").Int())
		js.CopyBytesToGo(body, js.Global().Get("Uint8Array").New(ab))
	}
	r, err := http.NewRequestWithContext(ctx, req.Get("method").String(), req.Get("url").String(), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	it := req.Get("headers").Call("entries")
	for {
		n := it.Call("next")
		if n.Get("done").Bool() {
			break
		}
		kv := n.Get("value")
		r.Header.Add(kv.Index(0).String(), kv.Index(1).String())
	}
	r.RemoteAddr = r.Header.Get("Cf-Connecting-Ip")
	return r, nil
}

// responseWriter is the http.ResponseWriter and http.Flusher of one
// request.
type responseWriter struct {
	header  http.Header
	sent    http.Header // the header as it was at WriteHeader
	status  int
	buf     bytes.Buffer // the body until the first flush
	resolve func(js.Value)
	started bool     // the Response was resolved
	stream  js.Value // its body's writer, when streaming
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	w.status, w.sent = code, w.header.Clone()
}

func (w *responseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if !w.started {
		return w.buf.Write(p)
	}
	if w.stream.Type() != js.TypeObject {
		return len(p), nil // a status without a body
	}
	if _, err := Await(w.stream.Call("write", BytesToJS(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush starts the streamed Response (and sends what was written so far).
func (w *responseWriter) Flush() {
	w.WriteHeader(http.StatusOK)
	if w.started {
		return
	}
	w.started = true
	init := w.init()
	if noBody(w.status) {
		w.resolve(js.Global().Get("Response").New(js.Null(), init))
		return
	}
	ts := js.Global().Get("TransformStream").New()
	w.stream = ts.Get("writable").Call("getWriter")
	w.resolve(js.Global().Get("Response").New(ts.Get("readable"), init))
	if w.buf.Len() > 0 {
		b := bytes.Clone(w.buf.Bytes())
		w.buf.Reset()
		w.Write(b)
	}
}

// finish answers a handler that never flushed with its whole body, or
// closes the stream of one that did.
func (w *responseWriter) finish() {
	w.WriteHeader(http.StatusOK)
	if w.started {
		if w.stream.Type() == js.TypeObject {
			Await(w.stream.Call("close"))
		}
		return
	}
	w.started = true
	body := js.Null()
	if !noBody(w.status) {
		body = BytesToJS(w.buf.Bytes())
	}
	w.resolve(js.Global().Get("Response").New(body, w.init()))
}

// abort ends a streamed Response abnormally: its body errors instead of
// ending.
func (w *responseWriter) abort() {
	if w.stream.Type() == js.TypeObject {
		Await(w.stream.Call("abort", js.Global().Get("Error").New("caduceus edge: stream aborted")))
	}
}

func (w *responseWriter) init() map[string]any {
	h := js.Global().Get("Headers").New()
	for k, vs := range w.sent {
		for _, v := range vs {
			h.Call("append", k, v)
		}
	}
	return map[string]any{"status": w.status, "headers": h}
}

// noBody reports whether a Response with status may not carry a body.
func noBody(status int) bool {
	return status == http.StatusNoContent || status == http.StatusResetContent || status == http.StatusNotModified || status < 200
}
