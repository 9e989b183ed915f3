package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

func TestProblemHidesInternalDetail(t *testing.T) {
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/x", nil)
	WriteProblem(rec, req, errors.New("pq: password authentication failed for user root at 10.0.0.5"))
	var p Problem
	json.Unmarshal(rec.Body.Bytes(), &p)
	if rec.Code != 500 || p.Detail != "internal error" || strings.Contains(rec.Body.String(), "password") {
		t.Errorf("internal problem leaked: %d %s", rec.Code, rec.Body.String())
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("content type %q", ct)
	}
}

func TestProblemOfContractErrors(t *testing.T) {
	cases := []struct {
		err    error
		status int
		code   string
		field  string
	}{
		{contract.FieldError("scopes", "bad_scopes", "unknown scope"), 400, "bad_scopes", "scopes"},
		{contract.Denyf("missing_scope", "needs admin"), 403, "missing_scope", ""},
		{contract.NotFoundf("no_route", "no"), 404, "no_route", ""},
		{contract.Conflictf("stale_revision", "stale"), 409, "stale_revision", ""},
		{&contract.Error{Kind: contract.KindUnauthenticated, Code: "missing_key"}, 401, "missing_key", ""},
		{contract.PreconditionRequiredf(contract.CodeIfMatchRequired, "send If-Match"), 428, "if_match_required", "If-Match"},
	}
	for _, c := range cases {
		p := ProblemOf(c.err, "/v1/x")
		if p.Status != c.status || p.Code != c.code || p.Field != c.field || p.Type != problemBase+c.code || p.Title != http.StatusText(c.status) {
			t.Errorf("%v: %+v", c.err, p)
		}
	}
	rec := httptest.NewRecorder()
	WriteProblem(rec, httptest.NewRequest("GET", "/", nil), cases[4].err)
	if rec.Header().Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
}

func TestTokenFrom(t *testing.T) {
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("x-api-key", "cad_b")
	if TokenFrom(r) != "cad_b" {
		t.Error("x-api-key ignored")
	}
	r.Header.Set("Authorization", "bearer  cad_a ")
	if TokenFrom(r) != "cad_a" {
		t.Errorf("bearer (any case) should win: %q", TokenFrom(r))
	}
	r.Header.Set("Authorization", "Basic abc")
	if TokenFrom(r) != "cad_b" {
		t.Errorf("Basic auth is not a key: %q", TokenFrom(r))
	}
}

func TestClipKeepsRunes(t *testing.T) {
	s := strings.Repeat("é", 150) // 300 bytes
	c := Clip(s, 201)
	if len(c) != 200 || !strings.HasPrefix(s, c) {
		t.Errorf("clip cut a rune: %d bytes", len(c))
	}
	if Clip("short", 200) != "short" {
		t.Error("clip changed a short string")
	}
}

// TestOutcomeOfStatus: the audit outcome of a proxied answer's status
// agrees with contract.Kind.Outcome for the kinds that have those statuses.
func TestOutcomeOfStatus(t *testing.T) {
	for status, want := range map[int]contract.Outcome{
		0: contract.OutcomeAllow, 200: contract.OutcomeAllow, 400: contract.OutcomeDeny, 403: contract.OutcomeDeny,
		404: contract.OutcomeNotFound, 409: contract.OutcomeConflict, 428: contract.OutcomeConflict, 500: contract.OutcomeDeny,
	} {
		if got := OutcomeOfStatus(status); got != want {
			t.Errorf("OutcomeOfStatus(%d) = %s, want %s", status, got, want)
		}
	}
	for _, k := range []contract.Kind{contract.KindNotFound, contract.KindConflict, contract.KindPrecondition} {
		if got, want := OutcomeOfStatus(k.HTTPStatus()), k.Outcome(); got != want {
			t.Errorf("kind %s: OutcomeOfStatus(%d) = %s, Kind.Outcome = %s", k, k.HTTPStatus(), got, want)
		}
	}
}

// TestStoreUnavailableIsA503: an error whose cause is a store that cannot
// be reached (here a refused connection, wrapped as gates wrap it) is
// answered 503 store_unavailable with Retry-After and a message that says
// so, not 500 internal; an internal error of another cause stays a 500
// without Retry-After.
func TestStoreUnavailableIsA503(t *testing.T) {
	refused := func(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
	Classify := func(err error) *contract.Error { return classify(err, refused) }
	down := contract.Internal(fmt.Errorf("store: begin: %w", syscall.ECONNREFUSED))
	if e := Classify(down); !e.IsUnavailable() {
		t.Fatalf("classify(%v) = %v, want store_unavailable", down, e)
	}
	if e := classify(down, nil); e.IsUnavailable() {
		t.Fatalf("classify without Config.Unavailable = %v, want internal", e)
	}
	rec := httptest.NewRecorder()
	WriteProblem(rec, httptest.NewRequest("GET", "/v1/x", nil), Classify(down))
	var p Problem
	json.Unmarshal(rec.Body.Bytes(), &p)
	if rec.Code != 503 || p.Code != contract.CodeStoreUnavailable || rec.Header().Get("Retry-After") != RetryAfterUnavailable ||
		!strings.Contains(p.Detail, "unavailable") || strings.Contains(rec.Body.String(), "refused") {
		t.Errorf("store down: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	rec = httptest.NewRecorder()
	WriteProblem(rec, httptest.NewRequest("GET", "/v1/x", nil), Classify(errors.New("something broke")))
	if rec.Code != 500 || rec.Header().Get("Retry-After") != "" {
		t.Errorf("other internal error: %d %v", rec.Code, rec.Header())
	}
}
