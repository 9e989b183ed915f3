//go:build js && wasm

// Package fetch is the Worker's bridge between the Fetch API and net/http:
// a JavaScript Request served by an http.Handler and answered with a
// Response (streamed from the handler's first flush), and the promise
// helpers the Worker's Go side awaits JavaScript with.
package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"syscall/js"
)

var (
	jsResponse = js.Global().Get("Response")
	jsHeaders  = js.Global().Get("Headers")
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
	var r *http.Request
	var err error
	if b, ok := Helpers(); ok {
		var stop func()
		r, stop, err = requestOf(ctx, b, req, cancel)
		defer stop()
	} else {
		if stop := onAbort(req.Get("signal"), cancel); stop != nil {
			defer stop()
		}
		r, err = request(ctx, req)
	}
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

// requestOf reads a Fetch API Request into an *http.Request with the
// helpers (b): one call for its method, URL, headers and signal, and one
// await for its body. stop stops listening to its signal.
func requestOf(ctx context.Context, b, req js.Value, cancel func()) (r *http.Request, stop func(), err error) {
	id := aborts.add(cancel)
	stop = func() { aborts.remove(id) }
	var parts []any
	if err := json.Unmarshal([]byte(b.Call("request", req, id).String()), &parts); err != nil || len(parts) != 5 {
		return nil, stop, fmt.Errorf("reading the request: %v", err)
	}
	switch parts[4] {
	case "aborted":
		cancel()
		stop()
	case "none":
		stop()
	}
	var body []byte
	if parts[3] == true {
		id, wait := AwaitID()
		b.Call("body", req, id)
		a, err := wait()
		if err != nil {
			return nil, stop, fmt.Errorf("reading the request body: %w", err)
		}
		body = make([]byte, a.Get("byteLength").Int())
		js.CopyBytesToGo(body, a)
	}
	method, _ := parts[0].(string)
	url, _ := parts[1].(string)
	r, err = http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, stop, err
	}
	hs, _ := parts[2].([]any)
	for _, h := range hs {
		if kv, ok := h.([]any); ok && len(kv) == 2 {
			k, _ := kv[0].(string)
			v, _ := kv[1].(string)
			r.Header.Add(k, v)
		}
	}
	r.RemoteAddr = r.Header.Get("Cf-Connecting-Ip")
	return r, stop, nil
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
		js.CopyBytesToGo(body, jsUint8Array.New(ab))
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
	if noBody(w.status) {
		w.resolve(w.response(js.Null()))
		return
	}
	ts := js.Global().Get("TransformStream").New()
	w.stream = ts.Get("writable").Call("getWriter")
	w.resolve(w.response(ts.Get("readable")))
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
	w.resolve(w.response(body))
}

// abort ends a streamed Response abnormally: its body errors instead of
// ending.
func (w *responseWriter) abort() {
	if w.stream.Type() == js.TypeObject {
		Await(w.stream.Call("abort", jsError_.New("caduceus edge: stream aborted")))
	}
}

// response is the Response of body with the status and header sent.
func (w *responseWriter) response(body js.Value) js.Value {
	b, ok := Helpers()
	if !ok {
		return jsResponse.New(body, w.init())
	}
	h, err := headerJSON(w.sent)
	if err != nil {
		return jsResponse.New(body, w.init())
	}
	return b.Call("response", body, w.status, h)
}

// headerJSON is h as the helpers take headers: [[name, value], ...].
func headerJSON(h http.Header) (string, error) {
	pairs := make([][2]string, 0, len(h))
	for k, vs := range h {
		for _, v := range vs {
			pairs = append(pairs, [2]string{k, v})
		}
	}
	b, err := json.Marshal(pairs)
	return string(b), err
}

func (w *responseWriter) init() map[string]any {
	h := jsHeaders.New()
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
