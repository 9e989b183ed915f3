package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The members of a chat completions request, and what becomes of each on
// an Anthropic route.
var (
	// chatCarried are translated.
	chatCarried = map[string]bool{"model": true, "messages": true, "max_tokens": true, "max_completion_tokens": true,
		"temperature": true, "top_p": true, "stop": true, "stream": true, "stream_options": true, "tools": true,
		"tool_choice": true, "parallel_tool_calls": true, "user": true, "n": true, "response_format": true,
		"logprobs": true, "modalities": true, "thinking": true, "reasoning_effort": true}
	// chatDropped change nothing a client can see, or have no Anthropic
	// counterpart whose absence changes the answer's meaning.
	chatDropped = map[string]bool{"seed": true, "frequency_penalty": true, "presence_penalty": true, "logit_bias": true,
		"store": true, "metadata": true, "service_tier": true, "prompt_cache_key": true, "safety_identifier": true}
)

// Anthropic's request shapes, as a translation writes them.
type (
	aRequest struct {
		Model         string          `json:"model"`
		System        []aBlock        `json:"system,omitempty"`
		Messages      []aMessage      `json:"messages"`
		MaxTokens     int64           `json:"max_tokens"`
		Temperature   json.RawMessage `json:"temperature,omitempty"`
		TopP          json.RawMessage `json:"top_p,omitempty"`
		StopSequences []string        `json:"stop_sequences,omitempty"`
		Stream        bool            `json:"stream,omitempty"`
		Tools         []aTool         `json:"tools,omitempty"`
		ToolChoice    *aToolChoice    `json:"tool_choice,omitempty"`
		Metadata      *aMetadata      `json:"metadata,omitempty"`
		Thinking      *aThinking      `json:"thinking,omitempty"`
	}
	aMessage struct {
		Role    string   `json:"role"`
		Content []aBlock `json:"content"`
	}
	aBlock struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text,omitempty"`
		Source    *aSource        `json:"source,omitempty"`
		ID        string          `json:"id,omitempty"`
		Name      string          `json:"name,omitempty"`
		Input     json.RawMessage `json:"input,omitempty"`
		ToolUseID string          `json:"tool_use_id,omitempty"`
		Content   *string         `json:"content,omitempty"`
		Thinking  *string         `json:"thinking,omitempty"`
		Signature *string         `json:"signature,omitempty"`
		Data      string          `json:"data,omitempty"`
	}
	aSource struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type,omitempty"`
		Data      string `json:"data,omitempty"`
		URL       string `json:"url,omitempty"`
	}
	aTool struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	aToolChoice struct {
		Type                   string `json:"type"`
		Name                   string `json:"name,omitempty"`
		DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
	}
	aMetadata struct {
		UserID string `json:"user_id"`
	}
)

// Chat completions request shapes, as a translation reads them.
type (
	chatMessage struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCalls  []chatToolCall  `json:"tool_calls"`
		ToolCallID string          `json:"tool_call_id"`
		// Thinking holds thinking_blocks (thinking.go).
		Thinking json.RawMessage `json:"thinking_blocks"`
	}
	chatToolCall struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	chatPart struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		Refusal  string `json:"refusal"`
		ImageURL struct {
			URL string `json:"url"`
		} `json:"image_url"`
	}
	chatTool struct {
		Type     string `json:"type"`
		Function struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
)

func textBlock(s string) aBlock { return aBlock{Type: "text", Text: &s} }

// chatToMessages translates a chat completions request into an Anthropic
// messages request.
func chatToMessages(body []byte, o Options) ([]byte, error) {
	out, e := chatToAnthropic(body, o)
	if e != nil {
		return nil, e
	}
	return mustJSON(out), nil
}

// chatToAnthropic is chatToMessages's request before it is encoded (the
// Converse translation takes it from there).
func chatToAnthropic(body []byte, o Options) (aRequest, *Error) {
	var out aRequest
	m, e := requestMembers(body, o, &out.Model, chatCarried, chatDropped,
		"not supported when a chat completions request is served by an Anthropic route")
	if e != nil {
		return aRequest{}, e
	}
	if e := chatUncarried(m); e != nil {
		return aRequest{}, e
	}
	if e := chatSettings(m, o, &out); e != nil {
		return aRequest{}, e
	}
	if e := chatTools(m, &out); e != nil {
		return aRequest{}, e
	}
	var msgs []json.RawMessage
	if e := decode(m["messages"], &msgs, "messages", "a list of messages"); e != nil || len(msgs) == 0 {
		return aRequest{}, refuse("messages", "want a non-empty list of messages")
	}
	for i, raw := range msgs {
		if e := chatMessageTo(&out, raw, fmt.Sprintf("messages[%d]", i)); e != nil {
			return aRequest{}, e
		}
	}
	if len(out.Messages) == 0 {
		return aRequest{}, refuse("messages", "no user or assistant message: an Anthropic route needs one")
	}
	return out, nil
}

// oneTextAnswer refuses what a chat completions request asks that route
// (an Anthropic route, a Gemini route) cannot answer: more than one
// choice, log probabilities, other modalities than text.
func oneTextAnswer(m map[string]json.RawMessage, route string) *Error {
	if raw := m["n"]; !isNull(raw) {
		var n int64
		if e := decode(raw, &n, "n", "an integer"); e != nil {
			return e
		}
		if n != 1 {
			return refuse("n", "%d choices: %s answers one (n: 1)", n, route)
		}
	}
	if raw := m["logprobs"]; !isNull(raw) && string(raw) != "false" {
		return refuse("logprobs", "%s reports no log probabilities", route)
	}
	if raw := m["modalities"]; !isNull(raw) {
		var mods []string
		if e := decode(raw, &mods, "modalities", "a list of strings"); e != nil {
			return e
		}
		for i, mod := range mods {
			if mod != "text" {
				return refuse(fmt.Sprintf("modalities[%d]", i), "%q: %s answers in text only", mod, route)
			}
		}
	}
	return nil
}

// chatUncarried refuses what a chat completions request asks that an
// Anthropic route cannot answer: oneTextAnswer's, and a structured
// response format.
func chatUncarried(m map[string]json.RawMessage) *Error {
	if e := oneTextAnswer(m, "an Anthropic route"); e != nil {
		return e
	}
	if raw := m["response_format"]; !isNull(raw) {
		var rf struct {
			Type string `json:"type"`
		}
		if e := decode(raw, &rf, "response_format", "an object"); e != nil {
			return e
		}
		if rf.Type != "text" {
			return refuse("response_format.type", "%q is not supported when served by an Anthropic route", rf.Type)
		}
	}
	return nil
}

// chatSettings carries the output bound, the sampling values, stop,
// stream and user over to out.
func chatSettings(m map[string]json.RawMessage, o Options, out *aRequest) *Error {
	out.MaxTokens = o.MaxTokens
	if out.MaxTokens <= 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		if raw := m[k]; !isNull(raw) {
			var n int64
			if e := decode(raw, &n, k, "an integer"); e != nil {
				return e
			}
			if n < 1 {
				return refuse(k, "%d: want at least 1", n)
			}
			out.MaxTokens = n
			break
		}
	}
	var e *Error
	if out.Temperature, e = number(m, "temperature"); e != nil {
		return e
	}
	if out.TopP, e = number(m, "top_p"); e != nil {
		return e
	}
	if raw := m["stop"]; !isNull(raw) {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			out.StopSequences = []string{one}
		} else if e := decode(raw, &out.StopSequences, "stop", "a string or a list of strings"); e != nil {
			return e
		}
	}
	if raw := m["stream"]; !isNull(raw) {
		if e := decode(raw, &out.Stream, "stream", "a boolean"); e != nil {
			return e
		}
	}
	var e2 *Error
	if out.Thinking, e2 = requestThinking(m, out.MaxTokens); e2 != nil {
		return e2
	}
	if raw := m["user"]; !isNull(raw) {
		var u string
		if e := decode(raw, &u, "user", "a string"); e != nil {
			return e
		}
		if u != "" {
			out.Metadata = &aMetadata{UserID: u}
		}
	}
	return nil
}

// chatTools translates tools, tool_choice and parallel_tool_calls.
func chatTools(m map[string]json.RawMessage, out *aRequest) *Error {
	if raw := m["tools"]; !isNull(raw) {
		var tools []chatTool
		if e := decode(raw, &tools, "tools", "a list of tools"); e != nil {
			return e
		}
		for i, t := range tools {
			at := fmt.Sprintf("tools[%d]", i)
			if t.Type != "function" {
				return refuse(at+".type", "%q: only function tools are translated", t.Type)
			}
			if t.Function.Name == "" {
				return refuse(at+".function.name", "required")
			}
			schema := t.Function.Parameters
			if isNull(schema) {
				schema = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			out.Tools = append(out.Tools, aTool{Name: t.Function.Name, Description: t.Function.Description, InputSchema: schema})
		}
	}
	if raw := m["tool_choice"]; !isNull(raw) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			switch s {
			case "none":
				out.ToolChoice = &aToolChoice{Type: "none"}
			case "auto":
				out.ToolChoice = &aToolChoice{Type: "auto"}
			case "required":
				out.ToolChoice = &aToolChoice{Type: "any"}
			default:
				return refuse("tool_choice", "%q: want none, auto, required or a function", s)
			}
		} else {
			var tc struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if e := decode(raw, &tc, "tool_choice", "a string or an object"); e != nil {
				return e
			}
			if tc.Type != "function" || tc.Function.Name == "" {
				return refuse("tool_choice", "only a function tool choice with a name is translated")
			}
			out.ToolChoice = &aToolChoice{Type: "tool", Name: tc.Function.Name}
		}
	}
	if raw := m["parallel_tool_calls"]; !isNull(raw) {
		var par bool
		if e := decode(raw, &par, "parallel_tool_calls", "a boolean"); e != nil {
			return e
		}
		if !par && len(out.Tools) > 0 {
			if out.ToolChoice == nil {
				out.ToolChoice = &aToolChoice{Type: "auto"}
			}
			if out.ToolChoice.Type != "none" {
				out.ToolChoice.DisableParallelToolUse = true
			}
		}
	}
	if len(out.Tools) == 0 && out.ToolChoice != nil && out.ToolChoice.Type != "none" {
		return refuse("tool_choice", "set without tools")
	}
	if len(out.Tools) == 0 {
		out.ToolChoice = nil
	}
	return nil
}

// add appends blocks to the conversation as role, merged into the last
// message when it has the same role (Anthropic alternates user and
// assistant).
func (r *aRequest) add(role string, blocks ...aBlock) {
	if len(blocks) == 0 {
		return
	}
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == role {
		r.Messages[n-1].Content = append(r.Messages[n-1].Content, blocks...)
		return
	}
	r.Messages = append(r.Messages, aMessage{Role: role, Content: blocks})
}

// chatMessageTo translates one chat message into out.
func chatMessageTo(out *aRequest, raw json.RawMessage, at string) *Error {
	msg, e := chatMessageOf(raw, at, "not supported when served by an Anthropic route")
	if e != nil {
		return e
	}
	switch msg.Role {
	case "system", "developer":
		texts, e := chatTexts(msg.Content, at+".content")
		if e != nil {
			return e
		}
		for _, t := range texts {
			out.System = append(out.System, textBlock(t))
		}
	case "user":
		blocks, e := chatUserContent(msg.Content, at+".content")
		if e != nil {
			return e
		}
		if len(blocks) == 0 {
			return refuse(at+".content", "empty")
		}
		out.add("user", blocks...)
	case "assistant":
		thinking, e := chatThinking(msg.Thinking, at+".thinking_blocks")
		if e != nil {
			return e
		}
		blocks := anthropicThinking(thinking)
		if !isNull(msg.Content) {
			texts, e := chatTexts(msg.Content, at+".content")
			if e != nil {
				return e
			}
			for _, t := range texts {
				blocks = append(blocks, textBlock(t))
			}
		}
		for k, tc := range msg.ToolCalls {
			tat := fmt.Sprintf("%s.tool_calls[%d]", at, k)
			if tc.Type != "" && tc.Type != "function" {
				return refuse(tat+".type", "%q: only function tool calls are translated", tc.Type)
			}
			if tc.ID == "" || tc.Function.Name == "" {
				return refuse(tat, "a tool call needs its id and function.name")
			}
			input := json.RawMessage(strings.TrimSpace(tc.Function.Arguments))
			if len(input) == 0 {
				input = json.RawMessage("{}")
			}
			var obj map[string]json.RawMessage
			if json.Unmarshal(input, &obj) != nil || obj == nil {
				return refuse(tat+".function.arguments", "not a JSON object")
			}
			blocks = append(blocks, aBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: mustJSON(obj)})
		}
		if len(blocks) == 0 {
			return nil // an empty assistant turn says nothing
		}
		out.add("assistant", blocks...)
	case "tool":
		if msg.ToolCallID == "" {
			return refuse(at+".tool_call_id", "required")
		}
		texts, e := chatTexts(msg.Content, at+".content")
		if e != nil {
			return e
		}
		s := strings.Join(texts, "\n")
		out.add("user", aBlock{Type: "tool_result", ToolUseID: msg.ToolCallID, Content: &s})
	default:
		return refuse(at+".role", "%q is not translated (want system, developer, user, assistant or tool)", msg.Role)
	}
	return nil
}

// chatMessageOf reads one chat message at at, refusing (with refusal) the
// members no other wire carries: audio, and the deprecated function_call.
func chatMessageOf(raw json.RawMessage, at, refusal string) (chatMessage, *Error) {
	mm, e := object(raw, at)
	if e != nil {
		return chatMessage{}, e
	}
	for _, k := range []string{"audio", "function_call"} {
		if !isNull(mm[k]) {
			return chatMessage{}, refuse(at+"."+k, "%s", refusal)
		}
	}
	var msg chatMessage
	if e := decode(raw, &msg, at, "a message"); e != nil {
		return chatMessage{}, e
	}
	return msg, nil
}

// chatTexts reads content that may only hold text: a string, or a list of
// text (and refusal) parts. Empty texts are left out (Anthropic refuses
// empty text blocks).
func chatTexts(raw json.RawMessage, at string) ([]string, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []string{s}, nil
	}
	var parts []chatPart
	if e := decode(raw, &parts, at, "a string or a list of content parts"); e != nil {
		return nil, e
	}
	var out []string
	for j, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, p.Text)
			}
		case "refusal":
			if p.Refusal != "" {
				out = append(out, p.Refusal)
			}
		default:
			return nil, refuse(fmt.Sprintf("%s[%d].type", at, j), "%q is not supported here when served by an Anthropic route", p.Type)
		}
	}
	return out, nil
}

// userParts reads a user message's content, a string or a list of parts,
// as parts: a string is one text part ("" none).
func userParts(raw json.RawMessage, at string) ([]chatPart, *Error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []chatPart{{Type: "text", Text: s}}, nil
	}
	var parts []chatPart
	if e := decode(raw, &parts, at, "a string or a list of content parts"); e != nil {
		return nil, e
	}
	return parts, nil
}

// chatUserContent reads a user message's content: text and images.
func chatUserContent(raw json.RawMessage, at string) ([]aBlock, *Error) {
	parts, e := userParts(raw, at)
	if e != nil {
		return nil, e
	}
	var out []aBlock
	for j, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, textBlock(p.Text))
			}
		case "image_url":
			src, e := imageSource(p.ImageURL.URL, pat+".image_url.url")
			if e != nil {
				return nil, e
			}
			out = append(out, aBlock{Type: "image", Source: src})
		default:
			return nil, refuse(pat+".type", "%q is not supported when served by an Anthropic route", p.Type)
		}
	}
	return out, nil
}

// imageSource is an image URL as Anthropic's source: a data: URL as base64
// data, an http(s) URL as a url source.
func imageSource(url, at string) (*aSource, *Error) {
	if rest, ok := strings.CutPrefix(url, "data:"); ok {
		meta, data, ok := strings.Cut(rest, ",")
		mediaType, base64, _ := strings.Cut(meta, ";")
		if !ok || base64 != "base64" || data == "" {
			return nil, refuse(at, "a data: URL must be data:<media type>;base64,<data>")
		}
		switch mediaType {
		case "image/jpeg", "image/png", "image/gif", "image/webp":
		default:
			return nil, refuse(at, "media type %q: an Anthropic route takes image/jpeg, image/png, image/gif or image/webp", mediaType)
		}
		return &aSource{Type: "base64", MediaType: mediaType, Data: data}, nil
	}
	if strings.HasPrefix(url, "https://") || strings.HasPrefix(url, "http://") {
		return &aSource{Type: "url", URL: url}, nil
	}
	return nil, refuse(at, "want an http(s) or a data: URL")
}
