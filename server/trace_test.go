package server

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
)

// TestTraceOfRequestAndMeta: the conversation a request names by header,
// and a tool call by _meta (which wins); malformed names are invalid
// errors naming their source.
func TestTraceOfRequestAndMeta(t *testing.T) {
	for _, tc := range []struct {
		headers []string
		want    string
		bad     bool
	}{
		{nil, "", false},
		{[]string{"agent:main:telegram:dm:42"}, "agent:main:telegram:dm:42", false},
		{[]string{"a", "b"}, "", true},
		{[]string{strings.Repeat("k", contract.MaxConversationBytes+1)}, "", true},
		{[]string{"a\tb"}, "", true},
	} {
		r := httptest.NewRequest("POST", "/v1/executor/ticks", nil)
		r.Pattern = "POST /v1/executor/ticks"
		for _, h := range tc.headers {
			r.Header.Add(contract.HeaderConversation, h)
		}
		tr, err := traceOf(r)
		if tc.bad {
			if contract.KindOf(err) != contract.KindInvalid || !strings.Contains(err.Error(), contract.HeaderConversation) {
				t.Errorf("%q: %v, want an invalid error naming the header", tc.headers, err)
			}
			continue
		}
		if err != nil || tr.Conversation != tc.want || tr.Route != "POST /v1/executor/ticks" {
			t.Errorf("%q: %+v %v", tc.headers, tr, err)
		}
	}

	base := contract.Trace{Conversation: "from-header", Route: "POST /mcp"}
	tr, err := traceOfMeta(base, "execute_intents", map[string]any{"conversation": "from-meta", "run_id": "run-1"})
	if err != nil || tr != (contract.Trace{Conversation: "from-meta", RunID: "run-1", Route: "mcp execute_intents"}) {
		t.Errorf("meta: %+v %v", tr, err)
	}
	if tr, err := traceOfMeta(base, "t", nil); err != nil || tr.Conversation != "from-header" || tr.Route != "mcp t" {
		t.Errorf("no meta: %+v %v", tr, err)
	}
	for _, meta := range []map[string]any{{"conversation": 7}, {"conversation": ""}, {"run_id": strings.Repeat("r", 121)}, {"run_id": "a\nb"}} {
		if _, err := traceOfMeta(base, "t", meta); contract.KindOf(err) != contract.KindInvalid || !strings.Contains(err.Error(), "_meta.") {
			t.Errorf("%v: %v, want an invalid error naming the _meta field", meta, err)
		}
	}
}
