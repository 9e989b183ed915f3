package edge

import (
	"context"
	"io"
	"net/http"
)

// upstreamTransport is the edge's transport for upstream calls: rt, with
// each answer's body closed when its request's context ends (the client
// left), and the reads it ends returning the context's error, whatever rt
// does. net/http's own Fetch transport on js/wasm aborts a call only while
// it waits for the headers, so with it alone a client that left a whole
// request would keep its upstream call, and the handler, running to the end
// of the answer, and a read cut by the close would pass for the answer's
// end.
type upstreamTransport struct{ rt http.RoundTripper }

func (t upstreamTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	ctx, body := r.Context(), resp.Body
	stop := context.AfterFunc(ctx, func() { body.Close() })
	resp.Body = ctxBody{ReadCloser: body, ctx: ctx, stop: stop}
	return resp, nil
}

// ctxBody is an answer's body that ends with its context's error once the
// context is done, however the read ended.
type ctxBody struct {
	io.ReadCloser
	ctx  context.Context
	stop func() bool
}

func (b ctxBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil {
		if cerr := b.ctx.Err(); cerr != nil {
			return n, cerr
		}
	}
	return n, err
}

func (b ctxBody) Close() error {
	b.stop()
	return b.ReadCloser.Close()
}
