package tradergate_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/trader"
)

// TestApplyRouteReadsABodyUpToTheLimitWhole: the apply route hands the
// trader a body of exactly MaxRequestBytes whole (it is decided), and one
// byte more is answered body_too_large by the trader, not cut into bad JSON.
func TestApplyRouteReadsABodyUpToTheLimitWhole(t *testing.T) {
	hs, _ := gateOver(t)
	h := hs["POST /v1/trader/decisions"]
	d := decision(nil)
	// Spaces before the closing brace: the body's last byte is the one that
	// makes it JSON.
	at := d[:len(d)-1] + strings.Repeat(" ", trader.MaxRequestBytes-len(d)) + "}"
	for _, c := range []struct {
		name, body string
		code       int
		errors     []string
	}{
		{"at the limit", at, http.StatusOK, []string{}},
		{"one byte over", at[:len(at)-1] + " }", http.StatusBadRequest, []string{trader.CodeBodyTooLarge}},
	} {
		got := do(h, hermes, http.MethodPost, "/v1/trader/decisions", c.body, nil)
		var resp trader.Response
		if got.err != nil || got.w.Code != c.code || json.Unmarshal(got.w.Body.Bytes(), &resp) != nil {
			t.Fatalf("%s (%d bytes): %d %.200s, %v", c.name, len(c.body), got.w.Code, got.w.Body, got.err)
		}
		if !slices.Equal(resp.ErrorCodes(), c.errors) {
			t.Errorf("%s: errors %v, want %v", c.name, resp.ErrorCodes(), c.errors)
		}
	}
}
