package provider

import (
	"encoding/json"
	"testing"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestUsageDetails: OpenAI's detail objects count when present and as zero
// when absent or null.
func TestUsageDetails(t *testing.T) {
	for _, c := range []struct {
		p    wire.Protocol
		in   string
		want upstream.Usage
	}{
		{wire.ChatCompletions, `{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":5}}`,
			upstream.Usage{Input: 60, CachedInput: 40, Output: 20, Reasoning: 5}},
		{wire.ChatCompletions, `{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":null,"completion_tokens_details":null}`,
			upstream.Usage{Input: 100, Output: 20}},
		{wire.ChatCompletions, `{"prompt_tokens":100,"completion_tokens":20}`, upstream.Usage{Input: 100, Output: 20}},
		{wire.Responses, `{"input_tokens":100,"output_tokens":20,"input_tokens_details":{"cached_tokens":30},"output_tokens_details":{"reasoning_tokens":7}}`,
			upstream.Usage{Input: 70, CachedInput: 30, Output: 20, Reasoning: 7}},
		{wire.Responses, `{"input_tokens":100,"output_tokens":20,"input_tokens_details":null,"output_tokens_details":null}`,
			upstream.Usage{Input: 100, Output: 20}},
	} {
		var ru rawUsage
		if err := json.Unmarshal([]byte(c.in), &ru); err != nil {
			t.Fatal(err)
		}
		if got := ru.usage(c.p); got != c.want {
			t.Errorf("%s %s: %+v, want %+v", c.p, c.in, got, c.want)
		}
	}
}
