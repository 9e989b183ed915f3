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

// ProblemOf turns an error into the problem sent to the caller. Internal
// errors say only "internal error".
func ProblemOf(err error, instance string) Problem {
	e := contract.AsError(err)
	status := e.Kind.HTTPStatus()
	if e.Code == contract.CodeUnsupportedMedia {
		status = http.StatusUnsupportedMediaType
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
	if e.Kind == contract.KindInternal {
		p.Detail, p.Field = "internal error", ""
	}
	return p
}

// WriteProblem writes err as application/problem+json.
func WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	p := ProblemOf(err, r.URL.Path)
	if p.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="caduceus"`)
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
