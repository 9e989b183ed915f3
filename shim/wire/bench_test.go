package wire

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/caduceus-dev/caduceus/contract/contracttest"
)

// agentBody is a coding agent's chat completions request after rounds
// tool calls: a system prompt, four tools with their schemas, the user's
// ask, then per round an assistant tool call and its ~2 KB result (a file,
// a test log), and the user's next ask.
func agentBody(rounds int) []byte {
	tool := func(name, desc string) string {
		return fmt.Sprintf(`{"type":"function","function":{"name":%q,"description":%q,"parameters":{"type":"object","properties":{"path":{"type":"string","description":"The file to act on, relative to the repository root."},"content":{"type":"string"}},"required":["path"]}}}`, name, desc)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `{"model":"gpt-4.1","stream":true,"temperature":0.2,"messages":[{"role":"system","content":%q},`,
		strings.Repeat("You are a careful engineer working in a Go repository. Run the tests before you answer. ", 12))
	b.WriteString(`{"role":"user","content":"The deploy of the api service fails after the last merge. Can you look at deploy/app.yaml?"},`)
	result := strings.Repeat(`ok  \tgithub.com/acme/app/internal/store\t0.412s\n`, 45)
	for i := range rounds {
		fmt.Fprintf(&b, `{"role":"assistant","content":null,"tool_calls":[{"id":"call_%d","type":"function","function":{"name":"Read","arguments":"{\"path\":\"internal/store/file%d.go\"}"}}]},`, i, i)
		fmt.Fprintf(&b, `{"role":"tool","tool_call_id":"call_%d","content":"%s"},`, i, result)
	}
	b.WriteString(`{"role":"assistant","content":"The tests pass; the image tag in deploy/app.yaml is one release behind."},`)
	b.WriteString(`{"role":"user","content":[{"type":"text","text":"Bump it to 1.4.3 and deploy."}]}],`)
	fmt.Fprintf(&b, `"tools":[%s,%s,%s,%s]}`, tool("Read", "Read a file."), tool("Edit", "Replace a file's content."),
		tool("Write", "Write a new file."), tool("Bash", "Run a shell command."))
	return []byte(b.String())
}

// chat8KBody is an 8 KB chat completions request: a system prompt and one
// long user message.
func chat8KBody() []byte {
	var words strings.Builder
	for i := 0; words.Len() < 7600; i++ {
		fmt.Fprintf(&words, "line %d of the build log shows the service compiled and tests passed. ", i)
	}
	return fmt.Appendf(nil, `{"model":"gpt-4o","temperature":0.2,"messages":[{"role":"system","content":"You are a careful engineer."},{"role":"user","content":%q}]}`,
		words.String()+" now please deploy it")
}

// BenchmarkChatParse measures decoding a chat completions body into chatIn
// (a coding agent's request early and later in its session, one long
// message):
// the fast path ("hand": parseChatFast as the proxy calls it, on a body
// contract.CheckJSON accepted; "hand_validating": with its own validation
// pass, as Parse calls it) against json.Unmarshal ("encoding_json").
func BenchmarkChatParse(b *testing.B) {
	for _, body := range []struct {
		name string
		b    []byte
	}{{"agent_2_rounds", agentBody(2)}, {"agent_10_rounds", agentBody(10)}, {"8k", chat8KBody()}} {
		var in chatIn
		if !json.Valid(body.b) || !parseChatFast(body.b, &in, false) {
			b.Fatalf("%s: the fast path declined the body", body.name)
		}
		b.Run(body.name+"/hand", func(b *testing.B) {
			contracttest.Loop(b, func() {
				var in chatIn
				if !parseChatFast(body.b, &in, true) {
					b.Fatal("declined")
				}
			})
		})
		b.Run(body.name+"/hand_validating", func(b *testing.B) {
			contracttest.Loop(b, func() {
				var in chatIn
				if !parseChatFast(body.b, &in, false) {
					b.Fatal("declined")
				}
			})
		})
		b.Run(body.name+"/encoding_json", func(b *testing.B) {
			contracttest.Loop(b, func() {
				var in chatIn
				if err := json.Unmarshal(body.b, &in); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// BenchmarkPeekModel measures reading a request's model before anything
// else (PeekModel, the span scanner of scan.go: "hand") against
// json.Unmarshal into a struct of the one field ("encoding_json").
func BenchmarkPeekModel(b *testing.B) {
	body := agentBody(2)
	b.Run("hand", func(b *testing.B) {
		contracttest.Loop(b, func() {
			if PeekModel(body) != "gpt-4.1" {
				b.Fatal("model")
			}
		})
	})
	b.Run("encoding_json", func(b *testing.B) {
		contracttest.Loop(b, func() {
			var v struct {
				Model string `json:"model"`
			}
			if json.Unmarshal(body, &v) != nil || v.Model != "gpt-4.1" {
				b.Fatal("model")
			}
		})
	})
}

// BenchmarkMembers measures finding an answer's usage (Members, as the
// gateway's meter reads every answer: "hand") against json.Unmarshal into
// a map of raw members ("encoding_json"), on a chat completions answer.
func BenchmarkMembers(b *testing.B) {
	body := fmt.Appendf(nil, `{"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion","created":1741569952,"model":"gpt-4.1-2025-04-14","choices":[{"index":0,"message":{"role":"assistant","content":%q,"refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1117,"completion_tokens":182,"total_tokens":1299,"prompt_tokens_details":{"cached_tokens":1024,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"service_tier":"default"}`,
		strings.Repeat("I bumped the image tag in deploy/app.yaml to 1.4.3 and ran the deploy; the rollout finished. ", 8))
	keys := []string{"usage", "response", "message", "choices"}
	b.Run("hand", func(b *testing.B) {
		contracttest.Loop(b, func() {
			if ms, ok := Members(body, keys...); !ok || ms[0] == nil {
				b.Fatal("usage")
			}
		})
	})
	b.Run("encoding_json", func(b *testing.B) {
		contracttest.Loop(b, func() {
			var m map[string]json.RawMessage
			if json.Unmarshal(body, &m) != nil || m["usage"] == nil {
				b.Fatal("usage")
			}
		})
	})
}
