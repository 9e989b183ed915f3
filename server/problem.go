package server

import (
	"encoding/json"
	"net/http"

	"github.com/caduceus-dev/caduceus/contract"
)

// Problem is an RFC 9457 problem details document, with the contract error
// code and the offending field as extension members.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	Code     string `json:"code,omitempty"`
	Field    string `json:"field,omitempty"`
}

// problemBase prefixes problem type URIs; each code is its own type.
const problemBase = "https://caduceus.dev/problems/"

// RetryAfterUnavailable is the Retry-After, in seconds, of a 503
// store_unavailable answer (contract.Unavailable).
const RetryAfterUnavailable = "1"

// ProblemOf turns an error into the problem sent to the caller. Internal
// errors say only "internal error", but for store_unavailable
// (contract.Unavailable), which is 503 with its own message.
func ProblemOf(err error, instance string) Problem {
	e := contract.AsError(err)
	status := e.Kind.HTTPStatus()
	switch {
	case e.Code == contract.CodeUnsupportedMedia:
		status = http.StatusUnsupportedMediaType
	case e.IsUnavailable():
		status = http.StatusServiceUnavailable
	}
	p := Problem{
		Type:     problemBase + e.Code,
		Title:    http.StatusText(status),
		Status:   status,
		Detail:   e.Message,
		Instance: instance,
		Code:     e.Code,
		Field:    e.Field,
	}
	if e.Code == "" {
		p.Type = "about:blank"
		p.Code = e.Kind.String()
	}
	if e.Kind == contract.KindInternal && !e.IsUnavailable() {
		p.Detail, p.Field = "internal error", ""
	}
	return p
}

// WriteProblem writes err as application/problem+json (with
// Retry-After for store_unavailable).
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := ProblemOf(err, r.URL.Path)
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="caduceus"`)
	}
	if contract.AsError(err).IsUnavailable() {
		w.Header().Set("Retry-After", RetryAfterUnavailable)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p)
}

// WriteJSON writes v as JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}
