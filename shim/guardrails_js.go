//go:build js

package shim

import (
	"net/http"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// The edge (the Cloudflare Worker, js/wasm) offers no guardrails
// (docs/guardrails.md): it links no detectors, so it can set no
// Config.Scanner, and guardrails.go's policy is nil for every turn there.
// These stand in for guardrails.go so that the Worker does not link the
// redactors (guard's) and the answer filter (shim/guardrail) it never runs.

// guardrailsOff panics when cfg asks for guardrails (a wiring bug: the
// edge has no detectors to give Config.Scanner).
func guardrailsOff(cfg Config) {
	if cfg.Scanner != nil && cfg.Guardrails != nil {
		panic("shim: the js/wasm build offers no guardrails (Config.Scanner and Config.Guardrails are set)")
	}
}

// guarding is empty: no turn has guardrails.
type guarding struct{}

// guardRequest returns t's request as it is.
func (s *Service) guardRequest(w http.ResponseWriter, t *turn, p wire.Protocol) (*wire.Request, bool) {
	return t.req, true
}

// answerFilter is nil: no answer is filtered.
func (t *turn) answerFilter(p wire.Protocol) gateway.AnswerFilter { return nil }

// guardRecords records nothing: the receipt has no guardrails.
func (t *turn) guardRecords() {}
