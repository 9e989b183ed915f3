package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// terminal reports whether ev ends its stream: chat's [DONE], Anthropic's
// message_stop, the Responses API's response.completed (or incomplete,
// or failed).
func terminal(ev wire.SSE) bool {
	switch ev.Name {
	case "message_stop", "response.completed", "response.incomplete", "response.failed":
		return true
	}
	return bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]"))
}

// answerCall is a call whose upstream answered with a success: what its
// whole answer (whole) or its stream (stream) is passed on with.
type answerCall struct {
	call
	g    *Gateway
	w    Writer
	mt   provider.Meter
	resp *http.Response
}

// whole passes on a whole (JSON) answer, translated when the call is.
func (a *answerCall) whole(ctx context.Context) outcome {
	g, w, req, routeName, id, price, body, capture, x, mt, resp := a.g, a.w, a.req, a.route, a.id, a.price, a.body, a.capture, a.x, a.mt, a.resp
	b, err := readAll(resp.Body, g.cfg.MaxAnswer)
	if err != nil {
		if ctx.Err() != nil {
			return g.canceled(mt, true, price, body)
		}
		g.cfg.Logger.Warn("gateway: upstream answer broke off", "route", routeName, "model", id, "err", err)
		return uncertain(resp.StatusCode)
	}
	answer, hdr := b, resp.Header
	if x != nil {
		if answer, hdr, err = x.answer(resp.StatusCode, b, resp.Header); err != nil {
			g.cfg.Logger.Warn("gateway: upstream answer not translatable", "route", routeName, "model", id, "err", err)
			return uncertain(resp.StatusCode)
		}
	}
	if w.Filter != nil {
		answer = w.Filter.Whole(answer)
	}
	writeAnswer(w, hdr, resp.StatusCode, answer)
	o := g.charged(resp.StatusCode, mt, b, price, id)
	if req.Protocol == wire.Responses {
		o.responseID = responseID(b)
	}
	if capture > 0 && len(answer) <= capture {
		o.captured, o.contentType = answer, resp.Header.Get("Content-Type")
	}
	return o
}

// stream passes on a stream event by event (translated when the call is),
// holding back its terminal event (call.holdFirst, call.strip).
func (a *answerCall) stream(ctx context.Context, sr provider.Events) outcome {
	g, w, req, routeName, id, price, body, x, mt, resp := a.g, a.w, a.req, a.route, a.id, a.price, a.body, a.x, a.mt, a.resp
	holdFirst, strip := a.holdFirst, a.strip
	var first *wire.SSE
	if holdFirst {
		ev, err := sr.Next()
		if err != nil || ev.Incomplete {
			if ctx.Err() != nil {
				return g.canceled(mt, true, price, body)
			}
			return uncertain(resp.StatusCode)
		}
		first = &ev
	}
	writeHeader(w, resp.Header, resp.StatusCode)
	fl, _ := w.ResponseWriter.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	out := &streamOut{w: w, fl: fl, capture: a.capture}
	broken := false
	respID := ""
	for {
		var ev wire.SSE
		if first != nil {
			ev, first = *first, nil
		} else {
			var err error
			if ev, err = sr.Next(); err != nil || ev.Incomplete {
				switch {
				case ctx.Err() != nil:
					out.gone = true // the client went away: the call is stopped
				case err == nil || !errors.Is(err, io.EOF):
					// Cut off: the client's stream is cut as well.
					g.cfg.Logger.Warn("gateway: upstream stream broke off", "route", routeName, "model", id, "err", err)
					broken = true
				case x != nil:
					out.emit(w.filtered(x.stream.End())) // ended cleanly without its terminal event
				}
				break
			}
		}
		mt.Delta(ev.Data)
		if req.Protocol == wire.Responses && respID == "" {
			respID = responseID(ev.Data)
		}
		if mt.Observe(ev.Data) && strip {
			continue // the usage chunk the client did not ask for
		}
		if strip && ev.Name == "" && ev.ID == "" && bytes.Contains(ev.Data, []byte(`"usage"`)) {
			if data, ok := withoutNullUsage(ev.Data); ok {
				ev.Raw = wire.Event("", data)
			}
		}
		if !out.emit(w.filtered(x.events(ev))) {
			break
		}
	}
	o := g.charged(resp.StatusCode, mt, nil, price, id)
	o.final, o.responseID = out.final, respID
	if out.capture > 0 && out.final != nil && !broken && !out.gone {
		o.captured, o.contentType = append([]byte{}, out.captured...), resp.Header.Get("Content-Type")
	}
	switch {
	case broken:
		o.outcome, o.broken = "broken", true
	case out.gone:
		o.outcome = "canceled"
	}
	if _, _, final := mt.Usage(); (broken || out.gone) && o.settle && !final {
		// Cut short before its usage came: what was generated, estimated.
		o.cost, o.estimated = int64(price.Cost(mt.Estimate(len(body)))), true
	}
	return o
}

// streamOut is a stream on its way to the client: what emit wrote of it.
type streamOut struct {
	w        Writer
	fl       http.Flusher // nil: the writer does not flush
	capture  int          // the most kept for the cache; -1: too long to keep
	captured []byte       // the events kept
	final    []byte       // the terminal event, held back
	gone     bool         // the client went away
}

// emit writes the client's events, holding the terminal one back; false
// once the stream is over for the client.
func (o *streamOut) emit(evs []wire.SSE) bool {
	for _, ev := range evs {
		if o.w.Hash != nil {
			o.w.Hash.Write(ev.Raw)
		}
		if terminal(ev) {
			o.final = ev.Raw
			return false
		}
		if o.capture > 0 {
			if len(o.captured)+len(ev.Raw) > o.capture {
				o.capture = -1 // too long to keep
			} else {
				o.captured = append(o.captured, ev.Raw...)
			}
		}
		if _, err := o.w.Write(ev.Raw); err != nil {
			o.gone = true // the client went away: closing the body stops the call
			return false
		}
	}
	if o.fl != nil && len(evs) > 0 {
		o.fl.Flush()
	}
	return true
}

// writeHeader writes status with the upstream's header from (less
// dropResponseHeaders), after w.BeforeHeader has seen it.
func writeHeader(w Writer, from http.Header, status int) {
	setHeader(w, from)
	w.WriteHeader(status)
}

// setHeader sets the answer's headers on w: from's, less the hop-by-hop
// ones, then w.BeforeHeader's.
func setHeader(w Writer, from http.Header) {
	hdr := w.Header()
	for k, v := range from {
		if !dropResponseHeaders[k] {
			hdr[k] = v
		}
	}
	if w.BeforeHeader != nil {
		w.BeforeHeader(hdr)
	}
}

// passOn writes an upstream answer (an error, a token count) as it came.
func (g *Gateway) passOn(w Writer, o outcome) {
	writeAnswer(w, o.errHeader, o.status, o.errAnswer)
}

// writeAnswer writes a whole answer: writeHeader, then body, which w.Hash
// also reads; or, with w.Hold, sets its headers and hands it to Hold.
func writeAnswer(w Writer, from http.Header, status int, body []byte) {
	if w.Hash != nil {
		w.Hash.Write(body)
	}
	if w.Hold != nil {
		setHeader(w, from)
		w.Hold(status, body)
		return
	}
	writeHeader(w, from, status)
	_, _ = w.Write(body)
}
