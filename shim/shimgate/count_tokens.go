package shimgate

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/server"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// HeaderTokenCount marks a count_tokens answer the server estimated itself
// ("estimate") rather than got from the provider.
const HeaderTokenCount = "X-Caduceus-Token-Count"

// countTokens answers POST /v1/messages/count_tokens in Anthropic's shape,
// through the wrapper (key, route scope, input rule, audit record, count;
// its refusals in Anthropic's envelope): forwarded through the gateway to a
// route the key is granted for the model (counting costs nothing, so
// nothing is reserved), or — without gateway routes, as in offline mode —
// estimated as a quarter of the request's text bytes, rounded up, and
// marked with X-Caduceus-Token-Count: estimate.
func (g *Gate) countTokens(w http.ResponseWriter, r *http.Request, c *server.Call) error {
	body, err := countBody(r)
	if err != nil {
		return err
	}
	if g.cfg.Gateway != nil {
		res := g.cfg.Gateway.CountTokens(r.Context(), gateway.Writer{ResponseWriter: w}, gateway.Request{Protocol: wire.Messages,
			Caller: c.Caller, Body: body, Header: r.Header, RawQuery: r.URL.RawQuery})
		return answered(w, wire.Messages, c, res)
	}
	req, err := wire.Parse(wire.Messages, body.Raw)
	if err != nil {
		return contract.Invalidf("invalid_request", "%s", err.Error())
	}
	n := (len(req.System) + len(req.AllText()) + 3) / 4
	b, _ := json.Marshal(map[string]int{"input_tokens": n})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(HeaderTokenCount, "estimate")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}
