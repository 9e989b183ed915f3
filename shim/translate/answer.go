package translate

import (
	"encoding/json"
	"errors"
	"strings"
)

// Anthropic's answer, as a translation reads it.
type (
	inAnswer struct {
		ID         string    `json:"id"`
		Type       string    `json:"type"`
		Model      string    `json:"model"`
		Content    []inBlock `json:"content"`
		StopReason string    `json:"stop_reason"`
		Usage      *aUsage   `json:"usage"`
	}
	aUsage struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	}
)

// Chat completions answer shapes, as a translation writes them.
type (
	cCompletion struct {
		ID      string    `json:"id"`
		Object  string    `json:"object"`
		Created int64     `json:"created"`
		Model   string    `json:"model"`
		Choices []cChoice `json:"choices"`
		Usage   *cUsage   `json:"usage,omitempty"`
	}
	cChoice struct {
		Index        int       `json:"index"`
		Message      cAnswered `json:"message"`
		Logprobs     *struct{} `json:"logprobs"`
		FinishReason string    `json:"finish_reason"`
	}
	cAnswered struct {
		Role      string      `json:"role"`
		Content   *string     `json:"content"`
		Refusal   *string     `json:"refusal"`
		ToolCalls []cToolCall `json:"tool_calls,omitempty"`
		// Reasoning in chat's shape (thinking.go).
		ReasoningContent *string         `json:"reasoning_content,omitempty"`
		ThinkingBlocks   []thinkingBlock `json:"thinking_blocks,omitempty"`
	}
	cUsage struct {
		PromptTokens        int64         `json:"prompt_tokens"`
		CompletionTokens    int64         `json:"completion_tokens"`
		TotalTokens         int64         `json:"total_tokens"`
		PromptTokensDetails *cCachedUsage `json:"prompt_tokens_details,omitempty"`
		// CompletionTokensDetails counts the reasoning tokens among the
		// completion's, where the upstream says (Gemini's thoughts).
		CompletionTokensDetails *cReasoningUsage `json:"completion_tokens_details,omitempty"`
	}
	cCachedUsage struct {
		CachedTokens int64 `json:"cached_tokens"`
	}
	cReasoningUsage struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	}
)

// finishReason is an Anthropic stop_reason as chat's finish_reason.
func finishReason(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "refusal":
		return "content_filter"
	}
	return "stop" // end_turn, stop_sequence, pause_turn
}

// stopReason is chat's finish_reason as an Anthropic stop_reason.
func stopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// chatUsage is Anthropic's usage as chat's: the prompt counts every input
// token, cached ones (read or written) too, as OpenAI's does.
func (u aUsage) chat() *cUsage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	return &cUsage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens,
		PromptTokensDetails: &cCachedUsage{CachedTokens: u.CacheReadInputTokens}}
}

// messageToCompletion translates an Anthropic message into a chat
// completion.
func messageToCompletion(body []byte, created int64) ([]byte, error) {
	var a inAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, errors.New("translate: the upstream's message is not JSON")
	}
	if a.Type != "message" {
		return nil, errors.New("translate: the upstream's answer is not a message")
	}
	var texts []string
	var calls []cToolCall
	var thinking []thinkingBlock
	for _, b := range a.Content {
		switch b.Type {
		case "thinking":
			thinking = append(thinking, thinkingBlock{Type: "thinking", Thinking: b.Thinking, Signature: b.Signature})
		case "redacted_thinking":
			thinking = append(thinking, thinkingBlock{Type: "redacted_thinking", Data: b.Data})
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			args := "{}"
			if !isNull(b.Input) {
				args = string(b.Input)
			}
			calls = append(calls, cToolCall{ID: b.ID, Type: "function", Function: cFunction{Name: b.Name, Arguments: args}})
		}
	}
	msg := cAnswered{Role: "assistant", ToolCalls: calls, ThinkingBlocks: thinking, ReasoningContent: reasoningOf(thinking)}
	if len(texts) > 0 || len(calls) == 0 {
		s := strings.Join(texts, "")
		msg.Content = &s
	}
	out := cCompletion{ID: a.ID, Object: "chat.completion", Created: created, Model: a.Model,
		Choices: []cChoice{{Message: msg, FinishReason: finishReason(a.StopReason)}}}
	if a.Usage != nil {
		out.Usage = a.Usage.chat()
	}
	return mustJSON(out), nil
}

// Chat completions answer shapes, as a translation reads them.
type (
	inCompletion struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content          *string         `json:"content"`
				Refusal          *string         `json:"refusal"`
				ReasoningContent *string         `json:"reasoning_content"`
				ThinkingBlocks   []thinkingBlock `json:"thinking_blocks"`
				ToolCalls        []struct {
					ID       string    `json:"id"`
					Function cFunction `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *inUsage `json:"usage"`
	}
	inUsage struct {
		PromptTokens        int64 `json:"prompt_tokens"`
		CompletionTokens    int64 `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails *struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
)

// Anthropic answer shapes, as a translation writes them.
type (
	aAnswer struct {
		ID           string   `json:"id"`
		Type         string   `json:"type"`
		Role         string   `json:"role"`
		Model        string   `json:"model"`
		Content      []aBlock `json:"content"`
		StopReason   *string  `json:"stop_reason"`
		StopSequence *string  `json:"stop_sequence"`
		Usage        aUsageW  `json:"usage"`
	}
	// aUsageW is Anthropic's usage as written (every count present).
	aUsageW struct {
		InputTokens              int64 `json:"input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
	}
)

// anthropic is chat's usage as Anthropic's: cached tokens beside the
// input, not inside it.
func (u *inUsage) anthropic() aUsageW {
	if u == nil {
		return aUsageW{}
	}
	var cached int64
	if u.PromptTokensDetails != nil {
		cached = u.PromptTokensDetails.CachedTokens
	}
	return aUsageW{InputTokens: max(0, u.PromptTokens-cached), CacheReadInputTokens: cached, OutputTokens: u.CompletionTokens}
}

// completionToMessage translates a chat completion into an Anthropic
// message (its first choice: a translated request asks for one).
func completionToMessage(body []byte) ([]byte, error) {
	var c inCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, errors.New("translate: the upstream's completion is not JSON")
	}
	out := aAnswer{ID: c.ID, Type: "message", Role: "assistant", Model: c.Model, Content: []aBlock{}, Usage: c.Usage.anthropic()}
	stop := "end_turn"
	if len(c.Choices) > 0 {
		ch := c.Choices[0]
		out.Content = append(out.Content, answeredThinking(ch.Message.ThinkingBlocks, ch.Message.ReasoningContent)...)
		text := ""
		if ch.Message.Content != nil {
			text = *ch.Message.Content
		} else if ch.Message.Refusal != nil {
			text = *ch.Message.Refusal
		}
		if text != "" {
			out.Content = append(out.Content, textBlock(text))
		}
		for _, tc := range ch.Message.ToolCalls {
			out.Content = append(out.Content, aBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: toolInput(tc.Function.Arguments)})
		}
		stop = stopReason(ch.FinishReason)
	}
	out.StopReason = &stop
	return mustJSON(out), nil
}

// toolInput is a tool call's arguments as a tool_use block's input: the
// object they encode, or, when they encode none (a model's malformed
// JSON), an empty object.
func toolInput(args string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(args), &obj) != nil || obj == nil {
		return json.RawMessage("{}")
	}
	return json.RawMessage(mustJSON(obj))
}

// answeredThinking is a chat answer's reasoning as Anthropic blocks: its
// thinking_blocks, else its reasoning_content as one thinking block
// without a signature.
func answeredThinking(blocks []thinkingBlock, reasoning *string) []aBlock {
	if len(blocks) == 0 && reasoning != nil && *reasoning != "" {
		blocks = []thinkingBlock{{Type: "thinking", Thinking: *reasoning}}
	}
	return anthropicThinking(blocks)
}

// foldDeltas is the answer deltas make: the text (nil: none), the tool
// calls, and the reasoning (each signature ending a thinking block of
// the reasoning text before it; text after the last signature a block
// without one).
func foldDeltas(deltas []cDelta) cAnswered {
	msg := cAnswered{Role: "assistant"}
	var text, thought strings.Builder
	seen := false
	for _, d := range deltas {
		if d.Content != nil {
			text.WriteString(*d.Content)
			seen = true
		}
		if d.ReasoningContent != nil {
			thought.WriteString(*d.ReasoningContent)
		}
		for _, b := range d.ThinkingBlocks {
			if b.Type == "thinking" {
				b.Thinking = thought.String()
				thought.Reset()
			}
			msg.ThinkingBlocks = append(msg.ThinkingBlocks, b)
		}
		for _, tc := range d.ToolCalls {
			var c cToolCall
			c.ID, c.Type, c.Function.Name, c.Function.Arguments = tc.ID, "function", tc.Function.Name, tc.Function.Arguments
			msg.ToolCalls = append(msg.ToolCalls, c)
		}
	}
	if thought.Len() > 0 {
		msg.ThinkingBlocks = append(msg.ThinkingBlocks, thinkingBlock{Type: "thinking", Thinking: thought.String()})
	}
	if seen {
		s := text.String()
		msg.Content = &s
	}
	msg.ReasoningContent = reasoningOf(msg.ThinkingBlocks)
	return msg
}
