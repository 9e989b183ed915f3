package server

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
)

// The helpers a gate's handlers share: reading and checking a request,
// writing its answer.

// Clip cuts s to at most n bytes, on a rune boundary.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// ReadBody reads a request body (bounded by the wrapper's MaxBytesReader).
func ReadBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, err
		}
		return nil, contract.Invalidf("bad_body", "cannot read the request body: %v", err)
	}
	return b, nil
}

// QueryLimit reads ?limit=: def when absent, else an integer from 1 to max
// (an invalid bad_limit error otherwise).
func QueryLimit(r *http.Request, def, max int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max {
		return 0, contract.FieldError("limit", "bad_limit", "limit must be an integer from 1 to %d", max)
	}
	return n, nil
}

// OutcomeOfStatus is the audit outcome of an answer with HTTP status.
func OutcomeOfStatus(status int) contract.Outcome {
	switch {
	case status == 0 || status < 400:
		return contract.OutcomeAllow
	case status == http.StatusNotFound:
		return contract.OutcomeNotFound
	case status == http.StatusConflict, status == http.StatusPreconditionRequired:
		return contract.OutcomeConflict
	default:
		return contract.OutcomeDeny
	}
}

// IfMatch reads If-Match as a revision; absent means 0 ("create only").
func IfMatch(r *http.Request) (contract.Revision, error) {
	v := strings.Trim(strings.TrimSpace(r.Header.Get("If-Match")), `"`)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, contract.FieldError("If-Match", "bad_if_match", "If-Match must be a revision number >= 1, got %q", v)
	}
	return contract.Revision(n), nil
}

// DecodeStrict decodes one JSON value from body into v, refusing unknown
// fields and trailing data (an invalid bad_json error naming the problem).
func DecodeStrict(body []byte, v any) error {
	switch err := contract.DecodeStrict(body, v); {
	case errors.Is(err, contract.ErrTrailingData):
		return contract.Invalidf("bad_json", "the body has data after the JSON value")
	case err != nil:
		return contract.Invalidf("bad_json", "the body is not valid: %v", err)
	}
	return nil
}

// PutRequest reads a revisioned PUT: the If-Match revision and the strict
// JSON body; idOf points at the body's id field, which must be empty (it is
// filled from the path) or equal to the path's id.
func PutRequest[T any](r *http.Request, idField string, idOf func(*T) *string) (T, contract.Revision, error) {
	var v T
	rev, err := IfMatch(r)
	if err != nil {
		return v, 0, err
	}
	body, err := ReadBody(r)
	if err != nil {
		return v, 0, err
	}
	if err := DecodeStrict(body, &v); err != nil {
		return v, 0, err
	}
	id, pathID := idOf(&v), r.PathValue("id")
	if *id == "" {
		*id = pathID
	}
	if *id != pathID {
		return v, 0, contract.FieldError(idField, "id_mismatch", "the body's %s %q is not the path's %q", idField, *id, pathID)
	}
	return v, rev, nil
}

// AnswerOK writes v as the call's 200 JSON answer, or returns err when the
// call that made v failed.
func AnswerOK(w http.ResponseWriter, v any, err error) error {
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, v)
}
