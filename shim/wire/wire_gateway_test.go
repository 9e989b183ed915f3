package wire

import (
	"strings"
	"testing"
)

// TestMessagesTextBesideToolResultIsUserText: Anthropic clients send the
// user's next words in the same message as the tool results; the triggers
// must see them.
func TestMessagesTextBesideToolResultIsUserText(t *testing.T) {
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[
		{"role":"user","content":"list the files"},
		{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"a.txt"},{"type":"text","text":"now deploy it"}]}]}`
	r, err := Parse(Messages, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if got := r.LastUserText(); got != "now deploy it" {
		t.Fatalf("last user text %q", got)
	}
	only := strings.Replace(body, `,{"type":"text","text":"now deploy it"}`, "", 1)
	if r, _ = Parse(Messages, []byte(only)); r.LastUserText() != "list the files" {
		t.Fatalf("a tool_result alone is not user text: %q", r.LastUserText())
	}
}

// TestTypeErrorsNameNoGoType: a wrongly typed field is described in JSON
// terms, never with a Go type name.
func TestTypeErrorsNameNoGoType(t *testing.T) {
	for _, body := range []string{
		`{"model":"gpt-4o","messages":"hello"}`,
		`{"model":"gpt-4o","messages":[{"role":"user","content":5}]}`,
		`{"model":5,"messages":[]}`,
	} {
		_, err := Parse(ChatCompletions, []byte(body))
		if err == nil {
			t.Fatalf("%s accepted", body)
		}
		if strings.Contains(err.Error(), "wire.") || strings.Contains(err.Error(), "[]") || strings.Contains(err.Error(), "struct") {
			t.Errorf("%s: %v names a Go type", body, err)
		}
	}
}
