package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// wireFake is a provider that checks what it is sent as the real one
// would (Anthropic: max_tokens, alternating roles starting with the user,
// tool results answering the assistant's tool_use blocks; OpenAI: tool
// messages answering the assistant's tool calls) and answers in its own
// wire, whole or streamed: a call of the weather tool when it is offered
// and has no result yet, else text. Usage: 1000 input tokens, 400 of them
// cached, 100 output.
type wireFake struct {
	kind  string // "openai" or "anthropic"
	calls atomic.Int32
	last  atomic.Value // the last request body
	fail  atomic.Int32 // answer this status with the provider's error envelope
}

func (f *wireFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[]}`)
		return
	}
	f.calls.Add(1)
	b, _ := io.ReadAll(r.Body)
	f.last.Store(string(b))
	fail := func(status int, typ, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if f.kind == "anthropic" {
			fmt.Fprintf(w, `{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_011"}`, typ, msg)
		} else {
			fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":null,"code":%q}}`, msg, typ)
		}
	}
	if code := int(f.fail.Load()); code != 0 {
		typ := map[int]string{400: "invalid_request_error", 529: "overloaded_error", 429: "rate_limit_exceeded"}[code]
		fail(code, typ, "the fake "+f.kind+" refuses this")
		return
	}
	var req struct {
		Model         string            `json:"model"`
		Stream        bool              `json:"stream"`
		MaxTokens     int64             `json:"max_tokens"`
		Tools         []json.RawMessage `json:"tools"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Role       string                `json:"role"`
			Content    json.RawMessage       `json:"content"`
			ToolCalls  []struct{ ID string } `json:"tool_calls"`
			ToolCallID string                `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &req); err != nil {
		fail(400, "invalid_request_error", "not JSON")
		return
	}
	answered := false // the tool's result is in the conversation
	if f.kind == "anthropic" {
		if !strings.HasSuffix(r.URL.Path, "/v1/messages") || r.Header.Get("X-Api-Key") == "" || r.Header.Get("Anthropic-Version") == "" {
			fail(404, "not_found_error", "not here: "+r.URL.Path)
			return
		}
		if req.MaxTokens < 1 {
			fail(400, "invalid_request_error", "max_tokens: Field required")
			return
		}
		toolUses := map[string]bool{}
		for i, m := range req.Messages {
			if want := []string{"user", "assistant"}[i%2]; m.Role != want {
				fail(400, "invalid_request_error", fmt.Sprintf("messages.%d.role: want %s (roles must alternate, starting with user)", i, want))
				return
			}
			var blocks []struct {
				Type      string `json:"type"`
				ID        string `json:"id"`
				ToolUseID string `json:"tool_use_id"`
			}
			json.Unmarshal(m.Content, &blocks)
			for _, bl := range blocks {
				switch {
				case bl.Type == "tool_use":
					toolUses[bl.ID] = true
				case bl.Type == "tool_result" && !toolUses[bl.ToolUseID]:
					fail(400, "invalid_request_error", "tool_result without its tool_use")
					return
				case bl.Type == "tool_result":
					answered = true
				}
			}
		}
	} else {
		if !strings.HasSuffix(r.URL.Path, "/v1/chat/completions") || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			fail(404, "not_found", "not here: "+r.URL.Path)
			return
		}
		calls := map[string]bool{}
		for i, m := range req.Messages {
			for _, c := range m.ToolCalls {
				calls[c.ID] = true
			}
			if m.Role == "tool" {
				if !calls[m.ToolCallID] {
					fail(400, "invalid_request_error", fmt.Sprintf("messages.[%d]: tool message without its tool call", i))
					return
				}
				answered = true
			}
		}
	}
	tool := len(req.Tools) > 0 && !answered
	text := "It is 18C in Paris, and the picture is a cat."
	if f.kind == "anthropic" {
		f.anthropic(w, req.Model, req.Stream, tool, text)
	} else {
		f.openai(w, req.Model, req.Stream, req.StreamOptions.IncludeUsage, tool, text)
	}
}

// anthropic answers as Anthropic's Messages API does.
func (f *wireFake) anthropic(w http.ResponseWriter, model string, stream, tool bool, text string) {
	if !stream {
		content, stop := fmt.Sprintf(`[{"type":"text","text":%q}]`, text), "end_turn"
		if tool {
			content, stop = `[{"type":"text","text":"Let me check."},{"type":"tool_use","id":"toolu_01A","name":"weather","input":{"city":"Paris"}}]`, "tool_use"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_01X","type":"message","role":"assistant","model":%q,"content":%s,"stop_reason":%q,"stop_sequence":null,"usage":{"input_tokens":600,"cache_creation_input_tokens":0,"cache_read_input_tokens":400,"output_tokens":100,"service_tier":"standard"}}`, model, content, stop)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	ev := func(name, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data) }
	ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01X","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":600,"cache_creation_input_tokens":0,"cache_read_input_tokens":400,"output_tokens":1}}}`, model))
	ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	ev("ping", `{"type": "ping"}`)
	stop := "end_turn"
	if tool {
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Let me check."}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_01A","name":"weather","input":{}}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":""}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"city\": "}}`)
		ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`)
		ev("content_block_stop", `{"type":"content_block_stop","index":1}`)
		stop = "tool_use"
	} else {
		half := len(text) / 2
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, text[:half]))
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, text[half:]))
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
	}
	ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":100}}`, stop))
	ev("message_stop", `{"type":"message_stop"}`)
}

// openai answers as OpenAI's chat completions API does.
func (f *wireFake) openai(w http.ResponseWriter, model string, stream, includeUsage, tool bool, text string) {
	const usage = `{"prompt_tokens":1000,"completion_tokens":100,"total_tokens":1100,"prompt_tokens_details":{"cached_tokens":400,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`
	if !stream {
		msg, finish := fmt.Sprintf(`{"role":"assistant","content":%q,"refusal":null,"annotations":[]}`, text), "stop"
		if tool {
			msg, finish = `{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}],"refusal":null,"annotations":[]}`, "tool_calls"
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-B9","object":"chat.completion","created":1741569952,"model":%q,"choices":[{"index":0,"message":%s,"logprobs":null,"finish_reason":%q}],"usage":%s,"service_tier":"default","system_fingerprint":"fp_1"}`, model, msg, finish, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	u := ""
	if includeUsage {
		u = `,"usage":null`
	}
	chunk := func(delta, finish string) {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-B9\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":%q,\"system_fingerprint\":\"fp_1\",\"choices\":[{\"index\":0,\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}]%s}\n\n", model, delta, finish, u)
	}
	chunk(`{"role":"assistant","content":"","refusal":null}`, "null")
	finish := `"stop"`
	if tool {
		chunk(`{"tool_calls":[{"index":0,"id":"call_abc","type":"function","function":{"name":"weather","arguments":""}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]}`, "null")
		chunk(`{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]}`, "null")
		finish = `"tool_calls"`
	} else {
		half := len(text) / 2
		chunk(fmt.Sprintf(`{"content":%q}`, text[:half]), "null")
		chunk(fmt.Sprintf(`{"content":%q}`, text[half:]), "null")
	}
	chunk(`{}`, finish)
	if includeUsage {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-B9\",\"object\":\"chat.completion.chunk\",\"created\":1741569952,\"model\":%q,\"system_fingerprint\":\"fp_1\",\"choices\":[],\"usage\":%s}\n\n", model, usage)
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// pngB64 is a 1x1 PNG, base64.
const pngB64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

// TestShimTranslateExample: the translation configuration docs/shim.md
// shows, served by `caduceus serve` with its routes pointed at fake
// providers, through the official SDKs on both ends: the OpenAI SDK
// reaching Claude and the Anthropic SDK reaching GPT-4.1, whole and
// streamed, each with an image, a tool call and its result; usage as the
// upstream reported it, settled at the route's price; receipts naming both
// wires; an upstream's errors as the client SDK's error type with their
// status; an untranslatable request refused before any call; a failover
// from OpenAI to Claude across the wires.
func TestShimTranslateExample(t *testing.T) {
	eachStore(t, func(t *testing.T, serveArgs ...string) {
		ups := map[string]*wireFake{}
		conf := shimDocBlock(t, "shim-translate-example")
		for from, kind := range map[string]string{"https://api.openai.com/v1": "openai", "https://api.anthropic.com": "anthropic"} {
			f := &wireFake{kind: kind}
			f.last.Store("")
			ups[kind] = f
			srv := httptest.NewServer(f)
			t.Cleanup(srv.Close)
			if !strings.Contains(conf, from) {
				t.Fatalf("the example no longer names %s", from)
			}
			conf = strings.Replace(conf, from, srv.URL+map[string]string{"openai": "/v1"}[kind], 1)
		}
		file := filepath.Join(t.TempDir(), "caduceus.yaml")
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant"}
		in := startEnv(t, func(k string) string { return env[k] }, append([]string{"--config", file}, serveArgs...)...)
		code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route",
			"--models", "openai/gpt-4.1,anthropic/claude-sonnet-4-5"}, storeArgsOf(in, serveArgs)...)...)
		if code != 0 {
			t.Fatalf("keys create: %s", errOut)
		}
		key := strings.TrimSpace(out)
		keyID := strings.Split(key, "_")[1]
		oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		ac := anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
		var receipts []string // of the translated turns

		// Both models are listed to both SDKs: each is served over both
		// wires.
		for _, hdr := range [][]string{nil, {"Anthropic-Version", "2023-06-01"}} {
			_, body := in.do(t, "GET", "/v1/models", key, nil, hdr...)
			var ids []string
			for _, m := range body["data"].([]any) {
				ids = append(ids, m.(map[string]any)["id"].(string))
			}
			if strings.Join(ids, ",") != "claude-sonnet-4-5,gpt-4.1" {
				t.Errorf("models (%v): %v", hdr, ids)
			}
		}

		t.Run("openai sdk to claude", func(t *testing.T) {
			chatToClaude(t, oc, ups["anthropic"], &receipts)
		})
		t.Run("anthropic sdk to gpt-4.1", func(t *testing.T) {
			messagesToGPT(t, ac, ups["openai"], ups["anthropic"], &receipts)
		})

		// Every translated turn's receipt names both wires, and its
		// attempt the upstream's.
		code, body := in.do(t, "GET", "/v1/receipts?limit=100", key, nil)
		if code != 200 {
			t.Fatalf("receipts: %d %v", code, body)
		}
		byID := map[string]map[string]any{}
		for _, r := range body["receipts"].([]any) {
			m := r.(map[string]any)
			byID[m["id"].(string)] = m
		}
		for _, id := range receipts {
			rc := byID[id]
			if rc == nil {
				t.Fatalf("receipt %s not listed", id)
			}
			wantUp := map[string]string{"chat_completions": "messages", "messages": "chat_completions"}[rc["protocol"].(string)]
			atts := rc["spend"].(map[string]any)["attempts"].([]any)
			last := atts[len(atts)-1].(map[string]any)
			if rc["upstream_wire"] != wantUp || last["wire"] != wantUp || rc["decision"] != "forward" {
				t.Errorf("receipt %s: protocol %v upstream_wire %v attempt %v; want the upstream wire %s", id, rc["protocol"], rc["upstream_wire"], last, wantUp)
			}
		}

		// Spend per identity, settled from the usage at each route's price:
		// Claude 600 input, 400 cached, 100 output at $3/$0.30/$15 per
		// million = 3420 µ$; GPT-4.1 the same tokens at $2/$0.50/$8 =
		// 2200 µ$. Six answered turns each (the error turns settle nothing).
		_, sp := in.do(t, "GET", "/v1/spend?key="+keyID, key, nil)
		got := map[string][2]int64{}
		for _, r := range sp["spend"].([]any) {
			m := r.(map[string]any)
			got[m["model"].(string)] = [2]int64{int64(m["attempts"].(float64)), int64(m["settled_microdollars"].(float64))}
		}
		// Claude: four translated turns, its 529 (nothing settled) and the
		// messages turn with top_k it served as it is; GPT-4.1: four
		// translated turns and its 400 (nothing settled).
		if got["anthropic/claude-sonnet-4-5"] != [2]int64{6, 5 * 3420} || got["openai/gpt-4.1"] != [2]int64{5, 4 * 2200} {
			t.Errorf("spend %v; want anthropic/claude-sonnet-4-5 6 attempts 17100 µ$, openai/gpt-4.1 5 attempts 8800 µ$", got)
		}

		// Across the wires: OpenAI down, a chat client's gpt-4.1 is
		// answered by Claude, translated.
		ups["openai"].fail.Store(503)
		var hr *http.Response
		resp, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}, option.WithResponseInto(&hr))
		if err != nil || !strings.HasPrefix(resp.Choices[0].Message.Content, "It is 18C") || resp.Usage.PromptTokens != 1000 {
			t.Fatalf("failover to Claude: %+v %v", resp, err)
		}
		if m := lastBody(ups["anthropic"]); !strings.Contains(m, `"model":"claude-sonnet-4-5"`) {
			t.Errorf("the failover asked Claude for %s", m)
		}
		_, body = in.do(t, "GET", "/v1/receipts?limit=100", key, nil)
		for _, r := range body["receipts"].([]any) {
			if m := r.(map[string]any); m["id"] == hr.Header.Get("X-Caduceus-Receipt") {
				atts := m["spend"].(map[string]any)["attempts"].([]any)
				first, second := atts[0].(map[string]any), atts[1].(map[string]any)
				if m["upstream_wire"] != "messages" || first["outcome"] != "definite" || first["wire"] != nil ||
					second["route"] != "anthropic" || second["wire"] != "messages" || second["settled_microdollars"].(float64) != 3420 {
					t.Errorf("failover receipt: %v", m)
				}
			}
		}
	})
}

func lastBody(f *wireFake) string { return f.last.Load().(string) }

// chatToClaude drives claude-sonnet-4-5 with the OpenAI SDK.
func chatToClaude(t *testing.T, oc openai.Client, up *wireFake, receipts *[]string) {
	weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "weather", Description: openai.String("The weather in a city now"),
		Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}})
	first := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("Be brief."),
		openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is the weather in Paris, and what is in this picture?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + pngB64}),
		}),
	}
	params := openai.ChatCompletionNewParams{Model: "claude-sonnet-4-5", Messages: first, Tools: []openai.ChatCompletionToolUnionParam{weather}}
	var hr *http.Response
	resp, err := oc.Chat.Completions.New(t.Context(), params, option.WithResponseInto(&hr))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	*receipts = append(*receipts, hr.Header.Get("X-Caduceus-Receipt"))
	msg := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Function.Name != "weather" ||
		msg.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` || msg.ToolCalls[0].ID != "toolu_01A" || msg.Content != "Let me check." {
		t.Fatalf("tool call: %+v", resp)
	}
	if u := resp.Usage; u.PromptTokens != 1000 || u.CompletionTokens != 100 || u.TotalTokens != 1100 || u.PromptTokensDetails.CachedTokens != 400 {
		t.Errorf("usage %+v; want 1000 prompt (400 cached), 100 completion", u)
	}
	// What Claude got: Anthropic's shapes.
	var sent struct {
		System    []map[string]any `json:"system"`
		MaxTokens int64            `json:"max_tokens"`
		Messages  []struct {
			Role    string           `json:"role"`
			Content []map[string]any `json:"content"`
		} `json:"messages"`
		Tools []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal([]byte(lastBody(up)), &sent); err != nil {
		t.Fatal(err)
	}
	img := sent.Messages[0].Content[1]
	if len(sent.System) != 1 || sent.System[0]["text"] != "Be brief." || sent.MaxTokens != 64000 || img["type"] != "image" ||
		img["source"].(map[string]any)["data"] != pngB64 || img["source"].(map[string]any)["media_type"] != "image/png" ||
		sent.Tools[0]["name"] != "weather" || sent.Tools[0]["input_schema"] == nil {
		t.Errorf("Claude was sent %s", lastBody(up))
	}

	// The tool's result: Claude gets it as a tool_result, and answers.
	second := append(append([]openai.ChatCompletionMessageParamUnion{}, first...), msg.ToParam(), openai.ToolMessage("18C and sunny", msg.ToolCalls[0].ID))
	params.Messages = second
	resp, err = oc.Chat.Completions.New(t.Context(), params, option.WithResponseInto(&hr))
	if err != nil || resp.Choices[0].Message.Content != "It is 18C in Paris, and the picture is a cat." || resp.Choices[0].FinishReason != "stop" {
		t.Fatalf("after the tool result: %+v %v", resp, err)
	}
	*receipts = append(*receipts, hr.Header.Get("X-Caduceus-Receipt"))
	if b := lastBody(up); !strings.Contains(b, `{"type":"tool_result","tool_use_id":"toolu_01A","content":"18C and sunny"}`) ||
		!strings.Contains(b, `{"type":"tool_use","id":"toolu_01A","name":"weather","input":{"city":"Paris"}}`) {
		t.Errorf("Claude was sent %s", b)
	}

	// Streamed, the same two turns, through the SDK's accumulator.
	for i, msgs := range [][]openai.ChatCompletionMessageParamUnion{first, second} {
		params.Messages = msgs
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := oc.Chat.Completions.NewStreaming(t.Context(), params, option.WithResponseInto(&hr))
		acc := openai.ChatCompletionAccumulator{}
		var finished []openai.FinishedChatCompletionToolCall
		for stream.Next() {
			acc.AddChunk(stream.Current())
			if tc, ok := acc.JustFinishedToolCall(); ok {
				finished = append(finished, tc)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		*receipts = append(*receipts, hr.Header.Get("X-Caduceus-Receipt"))
		c := acc.Choices[0]
		if i == 0 && (c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` ||
			len(finished) != 1 || finished[0].Name != "weather" || c.Message.Content != "Let me check.") {
			t.Errorf("streamed tool call: %+v finished %+v", c, finished)
		}
		if i == 1 && (c.FinishReason != "stop" || c.Message.Content != "It is 18C in Paris, and the picture is a cat.") {
			t.Errorf("streamed answer: %+v", c)
		}
		if u := acc.Usage; u.PromptTokens != 1000 || u.CompletionTokens != 100 || u.PromptTokensDetails.CachedTokens != 400 {
			t.Errorf("streamed usage %+v", u)
		}
	}

	// Claude's error, as the OpenAI SDK's error with its status.
	up.fail.Store(529)
	_, err = oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "claude-sonnet-4-5",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 529 || oe.Code != "overloaded_error" || oe.Message != "the fake anthropic refuses this" {
		t.Errorf("Claude's 529: %v", err)
	}
	up.fail.Store(0)

	// What Anthropic cannot carry: refused before any call, naming it.
	calls := up.calls.Load()
	_, err = oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "claude-sonnet-4-5", N: openai.Int(2),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	if !errors.As(err, &oe) || oe.StatusCode != 400 || oe.Code != "invalid_request" || !strings.Contains(oe.Message, "n: 2 choices") || up.calls.Load() != calls {
		t.Errorf("n: 2: %v (calls %d -> %d)", err, calls, up.calls.Load())
	}
}

// messagesToGPT drives gpt-4.1 with the Anthropic SDK.
// claude serves gpt-4.1 natively when the translated step cannot.
func messagesToGPT(t *testing.T, ac anthropic.Client, up, claude *wireFake, receipts *[]string) {
	weather := anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}, "weather")
	first := []anthropic.MessageParam{anthropic.NewUserMessage(
		anthropic.NewTextBlock("What is the weather in Paris, and what is in this picture?"),
		anthropic.NewImageBlockBase64("image/png", pngB64),
	)}
	params := anthropic.MessageNewParams{Model: "gpt-4.1", MaxTokens: 300, System: []anthropic.TextBlockParam{{Text: "Be brief."}},
		Messages: first, Tools: []anthropic.ToolUnionParam{weather}}
	var hr *http.Response
	msg, err := ac.Messages.New(t.Context(), params, aoption.WithResponseInto(&hr))
	if err != nil {
		t.Fatalf("messages: %v", err)
	}
	*receipts = append(*receipts, hr.Header.Get("X-Caduceus-Receipt"))
	if msg.StopReason != "tool_use" || len(msg.Content) != 1 || msg.Content[0].Type != "tool_use" || msg.Content[0].Name != "weather" ||
		string(msg.Content[0].Input) != `{"city":"Paris"}` || msg.Content[0].ID != "call_abc" {
		t.Fatalf("tool use: %+v", msg)
	}
	if u := msg.Usage; u.InputTokens != 600 || u.CacheReadInputTokens != 400 || u.OutputTokens != 100 {
		t.Errorf("usage %+v; want 600 input, 400 cache read, 100 output", u)
	}
	var sent struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		MaxCompletionTokens int64            `json:"max_completion_tokens"`
		Tools               []map[string]any `json:"tools"`
	}
	if err := json.Unmarshal([]byte(lastBody(up)), &sent); err != nil {
		t.Fatal(err)
	}
	if len(sent.Messages) != 2 || sent.Messages[0].Role != "system" || !strings.Contains(string(sent.Messages[1].Content), `"url":"data:image/png;base64,`+pngB64+`"`) ||
		sent.MaxCompletionTokens != 300 || sent.Tools[0]["type"] != "function" {
		t.Errorf("OpenAI was sent %s", lastBody(up))
	}

	second := append(append([]anthropic.MessageParam{}, first...), msg.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(msg.Content[0].ID, "18C and sunny", false)))
	params.Messages = second
	msg, err = ac.Messages.New(t.Context(), params, aoption.WithResponseInto(&hr))
	if err != nil || msg.StopReason != "end_turn" || len(msg.Content) != 1 || msg.Content[0].Text != "It is 18C in Paris, and the picture is a cat." {
		t.Fatalf("after the tool result: %+v %v", msg, err)
	}
	*receipts = append(*receipts, hr.Header.Get("X-Caduceus-Receipt"))
	if b := lastBody(up); !strings.Contains(b, `{"role":"tool","content":"18C and sunny","tool_call_id":"call_abc"}`) ||
		!strings.Contains(b, `"tool_calls":[{"id":"call_abc","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]`) {
		t.Errorf("OpenAI was sent %s", b)
	}

	for i, msgs := range [][]anthropic.MessageParam{first, second} {
		params.Messages = msgs
		stream := ac.Messages.NewStreaming(t.Context(), params, aoption.WithResponseInto(&hr))
		acc := anthropic.Message{}
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatalf("accumulate: %v", err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		*receipts = append(*receipts, hr.Header.Get("X-Caduceus-Receipt"))
		if i == 0 && (acc.StopReason != "tool_use" || len(acc.Content) != 1 || acc.Content[0].Name != "weather" || string(acc.Content[0].Input) != `{"city":"Paris"}`) {
			t.Errorf("streamed tool use: %+v", acc)
		}
		if i == 1 && (acc.StopReason != "end_turn" || len(acc.Content) != 1 || acc.Content[0].Text != "It is 18C in Paris, and the picture is a cat.") {
			t.Errorf("streamed answer: %+v", acc)
		}
		if u := acc.Usage; u.InputTokens != 600 || u.CacheReadInputTokens != 400 || u.OutputTokens != 100 {
			t.Errorf("streamed usage %+v", u)
		}
		if !strings.Contains(lastBody(up), `"stream_options":{"include_usage":true}`) {
			t.Errorf("the stream did not ask for its usage: %s", lastBody(up))
		}
	}

	// OpenAI's error, as the Anthropic SDK's error with its status.
	up.fail.Store(400)
	_, err = ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "gpt-4.1", MaxTokens: 10,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), `"type":"invalid_request_error","message":"the fake openai refuses this"`) {
		t.Errorf("OpenAI's 400: %v", err)
	}
	up.fail.Store(0)

	// What OpenAI cannot carry skips the translated step: the plan's
	// Claude step serves this messages client as it is.
	calls := up.calls.Load()
	msg, err = ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "gpt-4.1", MaxTokens: 1100, Thinking: anthropic.ThinkingConfigParamOfEnabled(1024),
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}, aoption.WithResponseInto(&hr))
	if err != nil || msg.Content[0].Text != "It is 18C in Paris, and the picture is a cat." || up.calls.Load() != calls ||
		!strings.Contains(lastBody(claude), `"thinking":{"budget_tokens":1024,"type":"enabled"}`) || !strings.Contains(lastBody(claude), `"model":"claude-sonnet-4-5"`) {
		t.Errorf("thinking: %+v %v (OpenAI calls %d -> %d; Claude sent %s)", msg, err, calls, up.calls.Load(), lastBody(claude))
	}
}
