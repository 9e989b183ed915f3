package gateway

import (
	"cmp"
	"net/http"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// A plan step with translate: true may serve a client of another wire: its
// route's provider carries the request there (provider.Translator), its
// attempts meter the upstream's usage in the upstream's own wire (so spend
// settles exactly as a native turn's), and write the answer, its stream
// event by event, and its errors in the client's wire. The receipt names
// both wires.

// leg is how one attempt's answer reaches the client: nil natively, or
// translated from the upstream's wire.
type leg struct {
	tr           provider.Translator
	up           wire.Protocol   // the wire the upstream speaks
	includeUsage bool            // a chat client asked for the usage chunk
	stream       provider.Stream // a streamed answer's translation
	now          int64           // unix seconds, a chat completion's created
}

// providerOf is the provider of route.
func (f *forwarding) providerOf(route string) provider.Provider {
	return provider.For(f.cfg.Routes[route].Kind)
}

// servable keeps the steps of a model that may serve a client of protocol
// p: those whose provider speaks p, and translated ones whose provider
// can carry p. It reports whether a translated step was kept.
func servable(c upstream.Config, p wire.Protocol, model string, steps []upstream.Step) (kept []upstream.Step, translated bool) {
	for _, st := range steps {
		m := st.Members()[0]
		pv, asked := provider.For(c.Routes[m.Route].Kind), cmp.Or(m.Model, model)
		switch {
		case pv.Speaks(p, asked):
			kept = append(kept, st)
		case st.Translate && pv.Translator(p, asked) != nil:
			kept, translated = append(kept, st), true
		}
	}
	return kept, translated
}

// translated reports whether step i is served over another wire.
func (f *forwarding) translated(i int) bool {
	return !f.open && !f.providerOf(f.steps[i].Route).Speaks(f.req.Protocol, f.asked(i))
}

// asked is the model step i asks its upstream for.
func (f *forwarding) asked(i int) string { return cmp.Or(f.steps[i].Model, f.model) }

// translation checks, before any upstream call, that the request can be
// carried to the other wire; when it cannot, translated steps are skipped,
// and a request no native step serves is refused naming the field.
func (f *forwarding) translation() *Refusal {
	for i := range f.steps {
		if !f.translated(i) {
			continue
		}
		if _, err := f.providerOf(f.steps[i].Route).Translator(f.req.Protocol, f.asked(i)).Request(f.body.Raw, "", 0); err != nil {
			f.untranslatable = true
			for i := range f.steps {
				if !f.translated(i) {
					return nil
				}
			}
			return &Refusal{Status: http.StatusBadRequest, Code: CodeInvalidRequest,
				Message: "shim: " + err.Error() + " (the model is served over the other wire, translated)"}
		}
		break
	}
	return nil
}

// translatedBody is the request as step i's upstream takes it: translated,
// asking for the step's model, with max_tokens from price when the client
// gave no bound.
func (f *forwarding) translatedBody(i int, price upstream.Price, now int64) (wire.Body, *leg, bool) {
	model := f.asked(i)
	tr := f.providerOf(f.steps[i].Route).Translator(f.req.Protocol, f.asked(i))
	b, err := tr.Request(f.body.Raw, model, price.MaxOutputTokens)
	if err != nil {
		return wire.Body{}, nil, false
	}
	return wire.Body{Raw: b}, &leg{tr: tr, up: tr.Upstream(), now: now, includeUsage: f.req.Parsed.IncludeUsage}, true
}

// renew starts the translation of a new try's stream (whether or not
// its request asked to stream: an upstream's answer decides).
func (x *leg) renew() {
	x.stream = x.tr.Stream(x.includeUsage, x.now)
}

// answer is an upstream's whole answer as the client takes it: a 2xx
// translated (an error when it is not one the upstream's wire has), any
// other status as an error envelope.
func (x *leg) answer(status int, b []byte, hdr http.Header) ([]byte, http.Header, error) {
	if status < 200 || status > 299 {
		b, hdr = x.errorAnswer(status, b, hdr)
		return b, hdr, nil
	}
	t, err := x.tr.Answer(b, x.now)
	return t, hdr, err
}

// errorAnswer is an upstream error answer as the client takes it.
func (x *leg) errorAnswer(status int, b []byte, hdr http.Header) ([]byte, http.Header) {
	if x == nil {
		return b, hdr
	}
	hdr = hdr.Clone()
	hdr.Set("Content-Type", "application/json")
	return x.tr.ErrorAnswer(status, b), hdr
}

// events are the client's events for one upstream event.
func (x *leg) events(ev wire.SSE) []wire.SSE {
	if x == nil {
		return []wire.SSE{ev}
	}
	return x.stream.Event(ev)
}
