package translate

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Converse is the wire of Amazon Bedrock's Converse API: a chat
// completions client is carried to it by ChatToConverse, ConverseToChat
// and a ConverseStream; its errors by ConverseError. A messages or
// Responses client goes through chat's shape (shim/provider).
const Converse wire.Protocol = "converse"

// Converse's request shapes, as a translation writes them.
type (
	bRequest struct {
		Messages        []bMessage   `json:"messages"`
		System          []bBlock     `json:"system,omitempty"`
		InferenceConfig *bInference  `json:"inferenceConfig,omitempty"`
		ToolConfig      *bToolConfig `json:"toolConfig,omitempty"`
		// AdditionalModelRequestFields carries what Converse has no member
		// for to the model: a Claude model's thinking.
		AdditionalModelRequestFields map[string]any `json:"additionalModelRequestFields,omitempty"`
	}
	bMessage struct {
		Role    string   `json:"role"`
		Content []bBlock `json:"content"`
	}
	bBlock struct {
		Text       *string      `json:"text,omitempty"`
		Image      *bImage      `json:"image,omitempty"`
		ToolUse    *bToolUse    `json:"toolUse,omitempty"`
		ToolResult *bToolResult `json:"toolResult,omitempty"`
		// ReasoningContent is a reasoning block: its text and signature,
		// or its redacted content (base64).
		ReasoningContent *bReasoning `json:"reasoningContent,omitempty"`
	}
	bReasoning struct {
		ReasoningText   *bReasoningText `json:"reasoningText,omitempty"`
		RedactedContent string          `json:"redactedContent,omitempty"`
	}
	bReasoningText struct {
		Text      string `json:"text"`
		Signature string `json:"signature,omitempty"`
	}
	bImage struct {
		Format string `json:"format"`
		Source struct {
			Bytes string `json:"bytes"`
		} `json:"source"`
	}
	bToolUse struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	}
	bToolResult struct {
		ToolUseID string   `json:"toolUseId"`
		Content   []bBlock `json:"content"`
	}
	bInference struct {
		MaxTokens     int64           `json:"maxTokens,omitempty"`
		Temperature   json.RawMessage `json:"temperature,omitempty"`
		TopP          json.RawMessage `json:"topP,omitempty"`
		StopSequences []string        `json:"stopSequences,omitempty"`
	}
	bToolConfig struct {
		Tools      []bTool `json:"tools"`
		ToolChoice any     `json:"toolChoice,omitempty"`
	}
	bTool struct {
		ToolSpec struct {
			Name        string `json:"name"`
			Description string `json:"description,omitempty"`
			InputSchema struct {
				JSON json.RawMessage `json:"json"`
			} `json:"inputSchema"`
		} `json:"toolSpec"`
	}
)

// ChatToConverse translates a chat completions request into a Converse
// request (the model goes in the URL). It goes through the Anthropic
// translation, whose shape Converse's follows (system apart, user and
// assistant alternating, tool uses and results as blocks): what Anthropic
// cannot carry is refused the same way, and no empty text block is sent
// (Converse refuses one).
func ChatToConverse(body []byte, o Options) ([]byte, error) {
	a, e := chatToAnthropic(body, o)
	if e != nil {
		return nil, e
	}
	out := bRequest{Messages: []bMessage{}}
	for _, s := range a.System {
		if s.Text != nil && *s.Text != "" {
			out.System = append(out.System, bBlock{Text: s.Text})
		}
	}
	for i, m := range a.Messages {
		var blocks []bBlock
		for j, b := range m.Content {
			bb, e := converseBlock(b, fmt.Sprintf("messages[%d].content[%d]", i, j))
			if e != nil {
				return nil, e
			}
			if bb != nil {
				blocks = append(blocks, *bb)
			}
		}
		if len(blocks) > 0 {
			out.Messages = append(out.Messages, bMessage{Role: m.Role, Content: blocks})
		}
	}
	out.InferenceConfig = &bInference{MaxTokens: a.MaxTokens, Temperature: a.Temperature, TopP: a.TopP, StopSequences: a.StopSequences}
	if a.Thinking != nil {
		out.AdditionalModelRequestFields = map[string]any{"thinking": a.Thinking}
	}
	if len(a.Tools) > 0 && (a.ToolChoice == nil || a.ToolChoice.Type != "none") {
		tc := &bToolConfig{}
		for _, t := range a.Tools {
			var bt bTool
			bt.ToolSpec.Name, bt.ToolSpec.Description, bt.ToolSpec.InputSchema.JSON = t.Name, t.Description, t.InputSchema
			tc.Tools = append(tc.Tools, bt)
		}
		if a.ToolChoice != nil {
			switch a.ToolChoice.Type {
			case "auto":
				tc.ToolChoice = map[string]any{"auto": struct{}{}}
			case "any":
				tc.ToolChoice = map[string]any{"any": struct{}{}}
			case "tool":
				tc.ToolChoice = map[string]any{"tool": map[string]string{"name": a.ToolChoice.Name}}
			}
		}
		out.ToolConfig = tc
	}
	return mustJSON(out), nil
}

// converseBlock is an Anthropic block as Converse's (nil: an empty text).
func converseBlock(b aBlock, at string) (*bBlock, *Error) {
	switch b.Type {
	case "text":
		if b.Text == nil || *b.Text == "" {
			return nil, nil
		}
		return &bBlock{Text: b.Text}, nil
	case "image":
		if b.Source == nil || b.Source.Type != "base64" {
			return nil, refuse(at, "a Bedrock route takes an image as a data: URL, not a link")
		}
		img := &bImage{Format: strings.TrimPrefix(b.Source.MediaType, "image/")}
		img.Source.Bytes = b.Source.Data
		return &bBlock{Image: img}, nil
	case "tool_use":
		input := b.Input
		if isNull(input) {
			input = json.RawMessage("{}")
		}
		return &bBlock{ToolUse: &bToolUse{ToolUseID: b.ID, Name: b.Name, Input: input}}, nil
	case "tool_result":
		text := ""
		if b.Content != nil {
			text = *b.Content
		}
		if text == "" {
			text = " " // Converse refuses an empty text block
		}
		return &bBlock{ToolResult: &bToolResult{ToolUseID: b.ToolUseID, Content: []bBlock{{Text: &text}}}}, nil
	case "thinking":
		r := &bReasoning{ReasoningText: &bReasoningText{}}
		if b.Thinking != nil {
			r.ReasoningText.Text = *b.Thinking
		}
		if b.Signature != nil {
			r.ReasoningText.Signature = *b.Signature
		}
		return &bBlock{ReasoningContent: r}, nil
	case "redacted_thinking":
		return &bBlock{ReasoningContent: &bReasoning{RedactedContent: b.Data}}, nil
	}
	return nil, refuse(at+".type", "%q is not carried to a Bedrock route", b.Type)
}

// Converse's answer, as a translation reads it.
type (
	bAnswer struct {
		Output struct {
			Message *bMessage `json:"message"`
		} `json:"output"`
		StopReason string         `json:"stopReason"`
		Usage      *ConverseUsage `json:"usage"`
	}
	// ConverseUsage is a Converse answer's (or a stream's metadata's)
	// usage.
	ConverseUsage struct {
		InputTokens           int64 `json:"inputTokens"`
		OutputTokens          int64 `json:"outputTokens"`
		CacheReadInputTokens  int64 `json:"cacheReadInputTokens"`
		CacheWriteInputTokens int64 `json:"cacheWriteInputTokens"`
	}
)

// chat is Converse's usage as chat's: the prompt counts the cached tokens
// (read and written) too.
func (u ConverseUsage) chat() *cUsage {
	prompt := u.InputTokens + u.CacheReadInputTokens + u.CacheWriteInputTokens
	return &cUsage{PromptTokens: prompt, CompletionTokens: u.OutputTokens, TotalTokens: prompt + u.OutputTokens,
		PromptTokensDetails: &cCachedUsage{CachedTokens: u.CacheReadInputTokens}}
}

// converseFinish is a Converse stopReason as chat's finish_reason.
func converseFinish(stop string) string {
	switch stop {
	case "max_tokens", "model_context_window_exceeded":
		return "length"
	case "tool_use":
		return "tool_calls"
	case "guardrail_intervened", "content_filtered":
		return "content_filter"
	}
	return "stop"
}

// ConverseToChat translates a Converse answer into a chat completion.
func ConverseToChat(body []byte, created int64) ([]byte, error) {
	var a bAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, errors.New("translate: the upstream's answer is not JSON")
	}
	if a.Output.Message == nil {
		return nil, errors.New("translate: the Converse answer has no message")
	}
	var deltas []cDelta
	for i, c := range a.Output.Message.Content {
		switch {
		case c.Text != nil:
			deltas = append(deltas, cDelta{Content: c.Text})
		case c.ToolUse != nil:
			deltas = append(deltas, cDelta{ToolCalls: []cToolDelta{{Index: i, ID: c.ToolUse.ToolUseID, Type: "function",
				Function: cArgsDelta{Name: c.ToolUse.Name, Arguments: string(c.ToolUse.Input)}}}})
		case c.ReasoningContent != nil:
			deltas = append(deltas, converseReasoning(*c.ReasoningContent)...)
		}
	}
	out := cCompletion{ID: "chatcmpl-bedrock", Object: "chat.completion", Created: created,
		Choices: []cChoice{{Message: foldDeltas(deltas), FinishReason: converseFinish(a.StopReason)}}}
	if a.Usage != nil {
		out.Usage = a.Usage.chat()
	}
	return mustJSON(out), nil
}

// ConverseError is a Bedrock error answer ({"message": ...}, its type in
// the X-Amzn-Errortype header, given as typ) in OpenAI's envelope.
func ConverseError(status int, typ string, body []byte) []byte {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Message != "" {
		typ, _, _ = strings.Cut(typ, ":")
		return errorEnvelope(wire.ChatCompletions, status, typ, e.Message)
	}
	return ErrorAnswer(wire.ChatCompletions, status, body)
}

// ConverseStream translates a ConverseStream (each event named by its
// :event-type: messageStart, contentBlockStart, contentBlockDelta,
// contentBlockStop, messageStop, metadata) into a chat stream. Converse's
// stream has no terminal event for chat: End closes the chat stream.
type ConverseStream struct {
	created      int64
	includeUsage bool
	started      bool
	finish       string
	tools        map[int64]int // content block index -> chat tool call index
	usage        *ConverseUsage
	done         bool
}

// NewConverseStream starts a translation of one streamed answer.
func NewConverseStream(includeUsage bool, created int64) *ConverseStream {
	return &ConverseStream{created: created, includeUsage: includeUsage, tools: map[int64]int{}}
}

func (s *ConverseStream) chunk(d cDelta, finish *string) wire.SSE {
	return event("", mustJSON(cChunk{ID: "chatcmpl-bedrock", Object: "chat.completion.chunk", Created: s.created,
		Choices: []cChunkChoice{{Delta: d, FinishReason: finish}}}))
}

// Event is the chat events of one Converse event.
func (s *ConverseStream) Event(ev wire.SSE) []wire.SSE {
	if s.done {
		return nil
	}
	var e struct {
		ContentBlockIndex int64 `json:"contentBlockIndex"`
		Start             *struct {
			ToolUse *struct {
				ToolUseID string `json:"toolUseId"`
				Name      string `json:"name"`
			} `json:"toolUse"`
		} `json:"start"`
		Delta *struct {
			Text    *string `json:"text"`
			ToolUse *struct {
				Input string `json:"input"`
			} `json:"toolUse"`
			// A stream's reasoning delta: text, signature or redacted
			// content, one at a time.
			ReasoningContent *struct {
				Text            string `json:"text"`
				Signature       string `json:"signature"`
				RedactedContent string `json:"redactedContent"`
			} `json:"reasoningContent"`
		} `json:"delta"`
		StopReason string         `json:"stopReason"`
		Usage      *ConverseUsage `json:"usage"`
	}
	if json.Unmarshal(ev.Data, &e) != nil {
		return nil
	}
	var out []wire.SSE
	if !s.started {
		s.started = true
		out = append(out, s.chunk(cDelta{Role: "assistant", Content: new(string)}, nil))
	}
	switch ev.Name {
	case "contentBlockStart":
		if e.Start != nil && e.Start.ToolUse != nil {
			i := len(s.tools)
			s.tools[e.ContentBlockIndex] = i
			out = append(out, s.chunk(cDelta{ToolCalls: []cToolDelta{{Index: i, ID: e.Start.ToolUse.ToolUseID, Type: "function",
				Function: cArgsDelta{Name: e.Start.ToolUse.Name}}}}, nil))
		}
	case "contentBlockDelta":
		switch {
		case e.Delta == nil:
		case e.Delta.Text != nil && *e.Delta.Text != "":
			out = append(out, s.chunk(cDelta{Content: e.Delta.Text}, nil))
		case e.Delta.ToolUse != nil:
			if i, ok := s.tools[e.ContentBlockIndex]; ok {
				out = append(out, s.chunk(cDelta{ToolCalls: []cToolDelta{{Index: i, Function: cArgsDelta{Arguments: e.Delta.ToolUse.Input}}}}, nil))
			}
		case e.Delta.ReasoningContent != nil:
			rc := e.Delta.ReasoningContent
			r := bReasoning{RedactedContent: rc.RedactedContent}
			if rc.Text != "" || rc.Signature != "" {
				r.ReasoningText = &bReasoningText{rc.Text, rc.Signature}
			}
			for _, d := range converseReasoning(r) {
				out = append(out, s.chunk(d, nil))
			}
		}
	case "messageStop":
		s.finish = converseFinish(e.StopReason)
		f := s.finish
		out = append(out, s.chunk(cDelta{}, &f))
	case "metadata":
		s.usage = e.Usage
	}
	return out
}

// End closes the chat stream: its finish when no messageStop came, the
// usage chunk when the client asked, and [DONE].
func (s *ConverseStream) End() []wire.SSE {
	if s.done {
		return nil
	}
	s.done = true
	var out []wire.SSE
	if s.finish == "" {
		f := "stop"
		out = append(out, s.chunk(cDelta{}, &f))
	}
	if s.includeUsage && s.usage != nil {
		out = append(out, event("", mustJSON(cChunk{ID: "chatcmpl-bedrock", Object: "chat.completion.chunk", Created: s.created,
			Choices: []cChunkChoice{}, Usage: s.usage.chat()})))
	}
	return append(out, event("", []byte("[DONE]")))
}

// converseReasoning is a reasoning block (or a stream's reasoning delta)
// as chat deltas: its text, then its signature or its redacted content as
// a thinking block.
func converseReasoning(r bReasoning) []cDelta {
	var out []cDelta
	if t := r.ReasoningText; t != nil {
		if t.Text != "" {
			text := t.Text
			out = append(out, cDelta{ReasoningContent: &text})
		}
		if t.Signature != "" {
			out = append(out, cDelta{ThinkingBlocks: []thinkingBlock{{Type: "thinking", Signature: t.Signature}}})
		}
	}
	if r.RedactedContent != "" {
		out = append(out, cDelta{ThinkingBlocks: []thinkingBlock{{Type: "redacted_thinking", Data: r.RedactedContent}}})
	}
	return out
}
