package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// HeaderTokenCount marks a count_tokens answer the server estimated itself
// ("estimate") rather than got from the provider.
const HeaderTokenCount = "X-Caduceus-Token-Count"

// countTokens answers POST /v1/messages/count_tokens in Anthropic's shape:
// forwarded through the gateway to a route the key is granted for the
// model (counting costs nothing, so nothing is reserved), or — without
// gateway routes, as in offline mode — estimated as a quarter of the
// request's text bytes, rounded up, and marked with
// X-Caduceus-Token-Count: estimate. Refusals use Anthropic's envelope.
func (s *Server) countTokens(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	fail := func(caller contract.Caller, status int, code, msg string, retry bool) {
		if !retry {
			sw.Header().Set("X-Should-Retry", "false")
		}
		wire.WriteError(sw, wire.Messages, status, code, msg)
		if caller.Identity.TenantSlot != "" {
			s.record(r.Context(), caller, "shim.count_tokens", &Call{Resource: "count_tokens", Reason: code}, outcomeOfStatus(status))
		}
		s.count(r, start, outcomeOfStatus(status))
	}
	caller, err := s.authenticate(r)
	if err != nil {
		e := contract.AsError(err)
		fail(caller, e.Kind.HTTPStatus(), e.Code, e.Message, false)
		return
	}
	if err := caller.RequireScope("counting tokens", contract.ScopeRoute); err != nil {
		e := contract.AsError(err)
		fail(caller, e.Kind.HTTPStatus(), e.Code, e.Message, false)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(sw, r.Body, s.cfg.MaxLLMBodyBytes))
	if err != nil {
		fail(caller, http.StatusBadRequest, "invalid_request", "cannot read the request body", false)
		return
	}
	if err := contract.CheckJSON(body); err != nil {
		e := contract.AsError(err)
		fail(caller, e.Kind.HTTPStatus(), e.Code, e.Code+": "+e.Message, false)
		return
	}
	if shim.IsContributorModel(wire.PeekModel(body)) {
		fail(caller, http.StatusForbidden, shim.CodeContributorRefused, "contributor-tier models are refused", false)
		return
	}
	if s.cfg.Gateway != nil {
		res := s.cfg.Gateway.CountTokens(r.Context(), gateway.Writer{ResponseWriter: sw}, gateway.Request{Protocol: wire.Messages,
			Caller: caller, Body: body, Header: r.Header, RawQuery: r.URL.RawQuery})
		if f := res.Refusal; f != nil {
			fail(caller, f.Status, f.Code, f.Message, f.Retry)
			return
		}
		s.record(r.Context(), caller, "shim.count_tokens", &Call{Resource: "count_tokens"}, outcomeOfStatus(res.Status))
		s.count(r, start, outcomeOfStatus(res.Status))
		return
	}
	req, err := wire.Parse(wire.Messages, body)
	if err != nil {
		fail(caller, http.StatusBadRequest, "invalid_request", err.Error(), false)
		return
	}
	n := (len(req.System) + len(req.AllText()) + 3) / 4
	b, _ := json.Marshal(map[string]int{"input_tokens": n})
	sw.Header().Set("Content-Type", "application/json")
	sw.Header().Set(HeaderTokenCount, "estimate")
	sw.Header().Set("Content-Length", strconv.Itoa(len(b)))
	sw.WriteHeader(http.StatusOK)
	sw.Write(b)
	s.record(r.Context(), caller, "shim.count_tokens", &Call{Resource: "count_tokens"}, contract.OutcomeAllow)
	s.count(r, start, contract.OutcomeAllow)
}
