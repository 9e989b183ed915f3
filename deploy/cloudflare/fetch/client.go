//go:build js && wasm

package fetch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall/js"
)

// Transport is the Worker's http.RoundTripper for upstream calls: the
// Fetch API through the bridge's helpers (worker.mjs's caduceusBridge),
// which hand over a request in one call and an answer's head, with its
// whole body when it is JSON, in one settle; a streamed body comes a chunk
// a settle. A JSON body that breaks off is read as it would be from
// net/http: the head is answered, and the body's read fails. net/http's own Fetch transport crosses once for each header
// of each side and makes two callbacks for each read. Without the helpers
// (a program not started by worker.mjs) it is Fallback, or
// http.DefaultTransport.
//
// The call is aborted when the request's context ends, while it waits for
// the head and while its body is read; the body's reads then return the
// context's error.
type Transport struct {
	Fallback http.RoundTripper
}

func (t Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	b, ok := Helpers()
	if !ok {
		if t.Fallback != nil {
			return t.Fallback.RoundTrip(req)
		}
		return http.DefaultTransport.RoundTrip(req)
	}
	var body js.Value = js.Null()
	if req.Body != nil {
		data, err := io.ReadAll(req.Body)
		req.Body.Close() // RoundTrip closes the body, on errors too
		if err != nil {
			return nil, err
		}
		if len(data) > 0 {
			body = BytesToJS(data)
		}
	}
	headers, err := headerJSON(req.Header)
	if err != nil {
		return nil, err
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	id, wait := AwaitID()
	if err := CatchJS(func() error { b.Call("fetch", id, req.Method, req.URL.String(), headers, body); return nil }); err != nil {
		Forget(id)
		return nil, fmt.Errorf("net/http: fetch() failed: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { b.Call("abort", id) })
	v, err := wait()
	if err != nil {
		stop()
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, fmt.Errorf("net/http: fetch() failed: %w", err)
	}
	resp, whole, err := responseOf(v, req)
	if err != nil {
		stop()
		b.Call("close", id)
		return nil, err
	}
	if whole != nil {
		stop()
		resp.Body = io.NopCloser(bytes.NewReader(whole))
		return resp, nil
	}
	if broke := v.Index(2); broke.Type() == js.TypeString {
		stop()
		resp.Body = &callBody{ctx: ctx, err: fmt.Errorf("net/http: fetch() body: %s", broke.String())}
		return resp, nil
	}
	resp.Body = &callBody{b: b, id: id, ctx: ctx, stop: stop}
	return resp, nil
}

// responseOf reads the helper's settled [head, whole body, broke] into a
// Response; whole is nil when the body is to be read chunk by chunk.
func responseOf(v js.Value, req *http.Request) (resp *http.Response, whole []byte, err error) {
	var head struct {
		status  int
		headers [][2]string
		url     string
	}
	// The array's three members decode into the pointers it holds.
	parts := []any{&head.status, &head.headers, &head.url}
	if err := json.Unmarshal([]byte(v.Index(0).String()), &parts); err != nil || len(parts) != 3 {
		return nil, nil, fmt.Errorf("net/http: fetch() answered an unreadable head: %v", err)
	}
	h := make(http.Header, len(head.headers))
	for _, kv := range head.headers {
		h.Add(kv[0], kv[1])
	}
	if w := v.Index(1); w.Type() == js.TypeObject {
		whole = make([]byte, w.Get("byteLength").Int())
		js.CopyBytesToGo(whole, w)
	}
	length := int64(-1)
	if cl := h.Get("Content-Length"); cl != "" {
		n, err := strconv.ParseInt(cl, 10, 64)
		if err != nil || n < 0 {
			return nil, nil, fmt.Errorf("net/http: invalid Content-Length header: %q", cl)
		}
		length = n
	}
	uncompressed := false
	if strings.EqualFold(h.Get("Content-Encoding"), "gzip") {
		// The Fetch API decodes the body and leaves the header.
		h.Del("Content-Encoding")
		h.Del("Content-Length")
		length, uncompressed = -1, true
	}
	if whole != nil {
		length = int64(len(whole))
	}
	if head.url != "" {
		if u, err := url.Parse(head.url); err == nil {
			req = req.Clone(req.Context())
			req.URL = u
		}
	}
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", head.status, http.StatusText(head.status)),
		StatusCode:    head.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		ContentLength: length,
		Uncompressed:  uncompressed,
		Request:       req,
	}, whole, nil
}

// callBody is a streamed answer's body: each read takes the stream's next
// chunk through the helpers. Once err is set (the end, a failure, Close)
// the call is over and its reads return err: io.EOF after the end, else
// the context's error when the context has ended.
type callBody struct {
	b       js.Value
	id      int
	ctx     context.Context
	stop    func() bool
	pending []byte
	err     error
}

func (r *callBody) Read(p []byte) (int, error) {
	if len(r.pending) == 0 {
		if r.err != nil {
			if cerr := r.ctx.Err(); cerr != nil && r.err != io.EOF {
				return 0, cerr
			}
			return 0, r.err // a body read to its end answers EOF again, as net/http's do
		}
		id, wait := AwaitID()
		r.b.Call("read", r.id, id)
		v, err := wait()
		switch {
		case r.ctx.Err() != nil:
			r.err = r.ctx.Err()
		case err != nil:
			r.err = err
		case v.Type() != js.TypeObject:
			r.err = io.EOF
		default:
			r.pending = make([]byte, v.Get("byteLength").Int())
			js.CopyBytesToGo(r.pending, v)
		}
		if r.err != nil {
			r.stop()
			return 0, r.err
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

func (r *callBody) Close() error {
	if r.err == nil {
		r.stop()
		r.err = http.ErrBodyReadAfterClose
		r.b.Call("close", r.id)
	}
	return nil
}
