package shim_test

import (
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// TestResponsesTextFormatEligibility: the Responses API's text.format, sent
// by the official SDK, decides a direct answer's eligibility as chat
// completions' response_format does: a text that fits the schema is
// answered directly, one that does not goes upstream.
func TestResponsesTextFormatEligibility(t *testing.T) {
	e := newEnv(t, nil)
	e.provision(t, "key-a", `{"id":"PROV-JSON","triggers":{"keyword":{"any":["refund policy"]}},"action":"respond_directly","response":{"text":"{\"days\": 14}"}}`)
	ask := func(format responses.ResponseFormatTextConfigUnionParam) string {
		t.Helper()
		c := openaiClient(e, "key-a", nil)
		resp, err := c.Responses.New(t.Context(), responses.ResponseNewParams{Model: "gpt-5",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("refund policy?")},
			Text:  responses.ResponseTextConfigParam{Format: format}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.OutputText()
	}
	schema := func(s map[string]any) responses.ResponseFormatTextConfigUnionParam {
		return responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "answer", Schema: s}}
	}
	if got := ask(schema(map[string]any{"type": "object", "required": []string{"days"}, "properties": map[string]any{"days": map[string]any{"type": "integer"}}})); got != `{"days": 14}` {
		t.Fatalf("text.format json_schema the text fits: %q", got)
	}
	if got := ask(schema(map[string]any{"type": "object", "required": []string{"weeks"}})); got != upstreamText {
		t.Fatalf("text.format json_schema the text does not fit: %q, want the upstream's answer", got)
	}
	obj := shared.ResponseFormatJSONObjectParam{}
	if got := ask(responses.ResponseFormatTextConfigUnionParam{OfJSONObject: &obj}); got != `{"days": 14}` {
		t.Fatalf("text.format json_object: %q", got)
	}
	rs := e.receipts(t, "key-a") // newest first
	if len(rs) != 3 || len(rs[1].Skipped) != 1 || rs[1].Skipped[0].Reason != "response_format_mismatch" {
		t.Fatalf("receipts: %+v", rs)
	}
}
