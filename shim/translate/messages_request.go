package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The members of an Anthropic messages request, and what becomes of each
// on an OpenAI chat completions route.
var (
	messagesCarried = map[string]bool{"model": true, "messages": true, "system": true, "max_tokens": true,
		"temperature": true, "top_p": true, "stop_sequences": true, "stream": true, "tools": true,
		"tool_choice": true, "metadata": true, "thinking": true}
	messagesDropped = map[string]bool{"service_tier": true, "cache_control": true}
)

// Chat completions request shapes, as a translation writes them.
type (
	cRequest struct {
		Model               string          `json:"model"`
		Messages            []cMessage      `json:"messages"`
		MaxCompletionTokens int64           `json:"max_completion_tokens,omitempty"`
		Temperature         json.RawMessage `json:"temperature,omitempty"`
		TopP                json.RawMessage `json:"top_p,omitempty"`
		Stop                []string        `json:"stop,omitempty"`
		Stream              bool            `json:"stream,omitempty"`
		StreamOptions       *cStreamOptions `json:"stream_options,omitempty"`
		Tools               []cTool         `json:"tools,omitempty"`
		ToolChoice          any             `json:"tool_choice,omitempty"`
		ParallelToolCalls   *bool           `json:"parallel_tool_calls,omitempty"`
		User                string          `json:"user,omitempty"`
		ResponseFormat      any             `json:"response_format,omitempty"`
		// Reasoning, for a route that reads it in chat's shape
		// (Options.Reasoning; thinking.go).
		Thinking        *aThinking `json:"thinking,omitempty"`
		ReasoningEffort string     `json:"reasoning_effort,omitempty"`
	}
	cStreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	}
	cMessage struct {
		Role       string      `json:"role"`
		Content    any         `json:"content"` // string, []cPart or nil
		ToolCalls  []cToolCall `json:"tool_calls,omitempty"`
		ToolCallID string      `json:"tool_call_id,omitempty"`
		// ThinkingBlocks: an assistant message's reasoning, sent on only
		// to a route that reads it (Options.Reasoning).
		ThinkingBlocks []thinkingBlock `json:"thinking_blocks,omitempty"`
	}
	cPart struct {
		Type     string     `json:"type"`
		Text     string     `json:"text,omitempty"`
		ImageURL *cImageURL `json:"image_url,omitempty"`
	}
	cImageURL struct {
		URL string `json:"url"`
	}
	cToolCall struct {
		ID       string    `json:"id"`
		Type     string    `json:"type"`
		Function cFunction `json:"function"`
	}
	cFunction struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	cTool struct {
		Type     string      `json:"type"`
		Function cToolSchema `json:"function"`
	}
	cToolSchema struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	}
)

// Anthropic request shapes, as a translation reads them.
type (
	inMessage struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	inBlock struct {
		Type      string          `json:"type"`
		Text      string          `json:"text"`
		Source    *inSource       `json:"source"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
		Thinking  string          `json:"thinking"`
		Signature string          `json:"signature"`
		Data      string          `json:"data"`
	}
	inSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	}
	inTool struct {
		Type        string          `json:"type"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
)

// messagesToChat translates an Anthropic messages request into a chat
// completions request. A stream always asks for its usage
// (stream_options.include_usage), which the translated stream reports in
// message_delta as Anthropic does.
func messagesToChat(body []byte, o Options) ([]byte, error) {
	var out cRequest
	m, e := requestMembers(body, o, &out.Model, messagesCarried, messagesDropped,
		"not supported when a messages request is served by an OpenAI route")
	if e != nil {
		return nil, e
	}
	if raw := m["max_tokens"]; !isNull(raw) {
		if e := decode(raw, &out.MaxCompletionTokens, "max_tokens", "an integer"); e != nil {
			return nil, e
		}
		if out.MaxCompletionTokens < 1 {
			return nil, refuse("max_tokens", "%d: want at least 1", out.MaxCompletionTokens)
		}
	}
	if out.Temperature, e = number(m, "temperature"); e != nil {
		return nil, e
	}
	if out.TopP, e = number(m, "top_p"); e != nil {
		return nil, e
	}
	if raw := m["stop_sequences"]; !isNull(raw) {
		if e := decode(raw, &out.Stop, "stop_sequences", "a list of strings"); e != nil {
			return nil, e
		}
	}
	if raw := m["stream"]; !isNull(raw) {
		if e := decode(raw, &out.Stream, "stream", "a boolean"); e != nil {
			return nil, e
		}
		if out.Stream {
			out.StreamOptions = &cStreamOptions{IncludeUsage: true}
		}
	}
	if raw := m["metadata"]; !isNull(raw) {
		var md struct {
			UserID string `json:"user_id"`
		}
		if e := decode(raw, &md, "metadata", "an object"); e != nil {
			return nil, e
		}
		out.User = md.UserID
	}
	th, e := requestThinking(m, 0)
	if e != nil {
		return nil, e
	}
	if th != nil && !o.Reasoning {
		return nil, refuse("thinking", "extended thinking is not translated to an OpenAI route")
	}
	out.Thinking = th
	if e := messagesTools(m, &out); e != nil {
		return nil, e
	}
	if raw := m["system"]; !isNull(raw) {
		texts, e := anthropicTexts(raw, "system")
		if e != nil {
			return nil, e
		}
		if len(texts) > 0 {
			out.Messages = append(out.Messages, cMessage{Role: "system", Content: strings.Join(texts, "\n\n")})
		}
	}
	var msgs []inMessage
	if e := decode(m["messages"], &msgs, "messages", "a list of messages"); e != nil || len(msgs) == 0 {
		return nil, refuse("messages", "want a non-empty list of messages")
	}
	for i, msg := range msgs {
		if e := anthropicMessageTo(&out, msg, fmt.Sprintf("messages[%d]", i), o.Reasoning); e != nil {
			return nil, e
		}
	}
	return mustJSON(out), nil
}

// messagesTools translates tools and tool_choice.
func messagesTools(m map[string]json.RawMessage, out *cRequest) *Error {
	if raw := m["tools"]; !isNull(raw) {
		var tools []inTool
		if e := decode(raw, &tools, "tools", "a list of tools"); e != nil {
			return e
		}
		for i, t := range tools {
			at := fmt.Sprintf("tools[%d]", i)
			if t.Type != "" && t.Type != "custom" {
				return refuse(at+".type", "%q: Anthropic's server tools are not translated to an OpenAI route", t.Type)
			}
			if t.Name == "" {
				return refuse(at+".name", "required")
			}
			schema := t.InputSchema
			if isNull(schema) {
				return refuse(at+".input_schema", "required")
			}
			out.Tools = append(out.Tools, cTool{Type: "function", Function: cToolSchema{Name: t.Name, Description: t.Description, Parameters: schema}})
		}
	}
	if raw := m["tool_choice"]; !isNull(raw) {
		var tc struct {
			Type                   string `json:"type"`
			Name                   string `json:"name"`
			DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
		}
		if e := decode(raw, &tc, "tool_choice", "an object"); e != nil {
			return e
		}
		switch tc.Type {
		case "auto":
			out.ToolChoice = "auto"
		case "any":
			out.ToolChoice = "required"
		case "none":
			out.ToolChoice = "none"
		case "tool":
			if tc.Name == "" {
				return refuse("tool_choice.name", "required")
			}
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		default:
			return refuse("tool_choice.type", "%q: want auto, any, tool or none", tc.Type)
		}
		if tc.DisableParallelToolUse && len(out.Tools) > 0 {
			f := false
			out.ParallelToolCalls = &f
		}
	}
	if len(out.Tools) == 0 {
		out.ToolChoice = nil
	}
	return nil
}

// anthropicTexts reads content that may only hold text: a string or a list
// of text blocks.
func anthropicTexts(raw json.RawMessage, at string) ([]string, *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var blocks []inBlock
	if e := decode(raw, &blocks, at, "a string or a list of content blocks"); e != nil {
		return nil, e
	}
	var out []string
	for j, b := range blocks {
		if b.Type != "text" {
			return nil, refuse(fmt.Sprintf("%s[%d].type", at, j), "%q is not supported here when served by an OpenAI route", b.Type)
		}
		if b.Text != "" {
			out = append(out, b.Text)
		}
	}
	return out, nil
}

// anthropicMessageTo translates one Anthropic message into out: a user
// message's tool results become tool messages (first, as OpenAI wants them
// right after the assistant's tool calls), its text and images a user
// message; an assistant message's text and tool_use blocks one assistant
// message.
func anthropicMessageTo(out *cRequest, msg inMessage, at string, reasoning bool) *Error {
	var blocks []inBlock
	var s string
	if json.Unmarshal(msg.Content, &s) == nil {
		blocks = []inBlock{{Type: "text", Text: s}}
	} else if e := decode(msg.Content, &blocks, at+".content", "a string or a list of content blocks"); e != nil {
		return e
	}
	switch msg.Role {
	case "user":
		var parts []cPart
		for j, b := range blocks {
			bat := fmt.Sprintf("%s.content[%d]", at, j)
			switch b.Type {
			case "text":
				if b.Text != "" {
					parts = append(parts, cPart{Type: "text", Text: b.Text})
				}
			case "image":
				url, e := imageURL(b.Source, bat+".source")
				if e != nil {
					return e
				}
				parts = append(parts, cPart{Type: "image_url", ImageURL: &cImageURL{URL: url}})
			case "tool_result":
				if b.ToolUseID == "" {
					return refuse(bat+".tool_use_id", "required")
				}
				var text string
				if !isNull(b.Content) {
					texts, e := anthropicTexts(b.Content, bat+".content")
					if e != nil {
						return e
					}
					text = strings.Join(texts, "\n")
				}
				if b.IsError {
					text = "Error: " + text
				}
				out.Messages = append(out.Messages, cMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: text})
			default:
				return refuse(bat+".type", "%q is not supported when served by an OpenAI route", b.Type)
			}
		}
		switch {
		case len(parts) == 0:
		case len(parts) == 1 && parts[0].Type == "text":
			out.Messages = append(out.Messages, cMessage{Role: "user", Content: parts[0].Text})
		default:
			out.Messages = append(out.Messages, cMessage{Role: "user", Content: parts})
		}
	case "assistant":
		return anthropicAssistant(out, blocks, at, reasoning)
	default:
		return refuse(at+".role", "%q: want user or assistant", msg.Role)
	}
	return nil
}

// imageURL is an Anthropic image source as an image URL: base64 data as a
// data: URL, a url source as itself.
func imageURL(src *inSource, at string) (string, *Error) {
	if src == nil {
		return "", refuse(at, "required")
	}
	switch src.Type {
	case "base64":
		if src.MediaType == "" || src.Data == "" {
			return "", refuse(at, "a base64 source needs media_type and data")
		}
		return "data:" + src.MediaType + ";base64," + src.Data, nil
	case "url":
		if !strings.HasPrefix(src.URL, "https://") && !strings.HasPrefix(src.URL, "http://") {
			return "", refuse(at+".url", "want an http(s) URL")
		}
		return src.URL, nil
	}
	return "", refuse(at+".type", "%q is not supported when served by an OpenAI route", src.Type)
}

// anthropicAssistant translates an assistant message's blocks into one
// assistant message of out: text joined, tool_use blocks as tool calls,
// thinking blocks carried when the route reads them (reasoning).
func anthropicAssistant(out *cRequest, blocks []inBlock, at string, reasoning bool) *Error {
	var texts []string
	var calls []cToolCall
	var thinking []thinkingBlock
	for j, b := range blocks {
		bat := fmt.Sprintf("%s.content[%d]", at, j)
		switch b.Type {
		case "text":
			if b.Text != "" {
				texts = append(texts, b.Text)
			}
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return refuse(bat, "a tool_use block needs its id and name")
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(b.Input, &obj) != nil || obj == nil {
				return refuse(bat+".input", "want a JSON object")
			}
			calls = append(calls, cToolCall{ID: b.ID, Type: "function", Function: cFunction{Name: b.Name, Arguments: string(mustJSON(obj))}})
		case "thinking", "redacted_thinking":
			// An earlier turn's reasoning: an OpenAI route cannot read
			// it; a route that can gets it back in chat's shape.
			if reasoning {
				thinking = append(thinking, thinkingBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature, Data: b.Data})
			}
		default:
			return refuse(bat+".type", "%q is not supported when served by an OpenAI route", b.Type)
		}
	}
	if len(texts) == 0 && len(calls) == 0 && len(thinking) == 0 {
		return nil
	}
	cm := cMessage{Role: "assistant", ToolCalls: calls, ThinkingBlocks: thinking}
	if len(texts) > 0 {
		cm.Content = strings.Join(texts, "")
	}
	out.Messages = append(out.Messages, cm)
	return nil
}
