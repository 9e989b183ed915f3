package provider

import (
	"testing"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

func TestDeltaBytes(t *testing.T) {
	cases := []struct {
		p    wire.Protocol
		data string
		want int64
	}{
		{wire.ChatCompletions, `{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`, 0},
		{wire.ChatCompletions, `{"choices":[{"index":0,"delta":{"content":"Hello"}}]}`, 5},
		{wire.ChatCompletions, `{"choices":[{"index":0,"delta":{"content":"a\"b\\n"}},{"index":1,"delta":{"content":"xy"}}]}`, 5 + 2},
		{wire.ChatCompletions, `{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"q\":1}"}}]}}]}`, 7},
		{wire.ChatCompletions, `{"choices":[],"usage":{"prompt_tokens":5}}`, 0},
		{wire.Responses, `{"type":"response.output_text.delta","item_id":"m","output_index":0,"content_index":0,"delta":"Hi there"}`, 8},
		{wire.Responses, `{"type":"response.output_text.done","text":"Hi there"}`, 0},
		{wire.Messages, `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`, 5},
		{wire.Messages, `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`, 5},
		{wire.Messages, `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`, 3},
		{wire.Messages, `{"type":"content_block_delta","delta":{"text":"cut`, 3},
		{wire.Messages, `{"type":"content_block_delta","delta":{"text":"\`, 1},
	}
	for _, c := range cases {
		if got := DeltaBytes(c.p, []byte(c.data)); got != c.want {
			t.Errorf("DeltaBytes(%s, %s) = %d, want %d", c.p, c.data, got, c.want)
		}
	}
}

// FuzzDeltaBytes: any event data counts between zero and its length.
func FuzzDeltaBytes(f *testing.F) {
	f.Add(`{"choices":[{"delta":{"content":"a\"b"}}]}`)
	f.Add(`{"delta":"x\`)
	f.Add(`"text":"`)
	f.Fuzz(func(t *testing.T, data string) {
		for _, p := range wire.Protocols {
			if n := DeltaBytes(p, []byte(data)); n < 0 || n > int64(len(data)) {
				t.Fatalf("DeltaBytes(%s, %q) = %d", p, data, n)
			}
		}
	})
}
