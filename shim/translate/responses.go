package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// A Responses API client is carried to a route of another wire through
// chat's shape: ResponsesToChat makes its request a chat completions
// request, ChatToResponse makes a chat completion its Response, and a
// ResponsesStream makes a chat stream its stream of response events; a
// provider chains them with its chat translation (Anthropic's, Gemini's).

// The members of a Responses request, and what becomes of each.
var (
	responsesCarried = map[string]bool{"model": true, "input": true, "instructions": true, "max_output_tokens": true,
		"temperature": true, "top_p": true, "stream": true, "tools": true, "tool_choice": true, "parallel_tool_calls": true,
		"text": true, "previous_response_id": true, "include": true, "background": true, "reasoning": true}
	responsesDropped = map[string]bool{"metadata": true, "user": true, "store": true, "truncation": true, "service_tier": true,
		"prompt_cache_key": true, "safety_identifier": true, "stream_options": true}
)

// rItem is one item of a Responses request's input.
type rItem struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Output    json.RawMessage `json:"output"`
	// A reasoning item's summary and opaque content.
	Summary          []rSummary `json:"summary"`
	EncryptedContent string     `json:"encrypted_content"`
}

// rSummary is a reasoning item's summary part.
type rSummary struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// ResponsesToChat translates a Responses API request into a chat
// completions request (model o.Model, else the client's). An *Error names
// what cannot be carried: a previous_response_id (a translated route keeps
// no conversation), built-in tools, a kind of input item chat has no
// place for.
func ResponsesToChat(body []byte, o Options) ([]byte, error) {
	var out cRequest
	m, e := requestMembers(body, o, &out.Model, responsesCarried, responsesDropped,
		"not supported when a Responses request is served by a route of another wire")
	if e != nil {
		return nil, e
	}
	for _, k := range []string{"previous_response_id", "background"} {
		if raw := m[k]; !isNull(raw) && string(raw) != "false" {
			return nil, refuse(k, "not carried to a route of another wire: send the whole conversation as input")
		}
	}
	if raw := m["include"]; !isNull(raw) {
		var include []string
		if e := decode(raw, &include, "include", "a list of strings"); e != nil {
			return nil, e
		}
		for i, inc := range include {
			// Reasoning's opaque content is always in a translated answer.
			if inc != "reasoning.encrypted_content" {
				return nil, refuse(fmt.Sprintf("include[%d]", i), "%q is not carried to a route of another wire", inc)
			}
		}
	}
	if raw := m["reasoning"]; !isNull(raw) {
		var r struct {
			Effort *string `json:"effort"`
		}
		if e := decode(raw, &r, "reasoning", "an object"); e != nil {
			return nil, e
		}
		if r.Effort != nil {
			out.ReasoningEffort = *r.Effort
		}
	}
	if raw := m["instructions"]; !isNull(raw) {
		var s string
		if e := decode(raw, &s, "instructions", "a string"); e != nil {
			return nil, e
		}
		if s != "" {
			out.Messages = append(out.Messages, cMessage{Role: "system", Content: s})
		}
	}
	if e := responsesInput(m["input"], &out); e != nil {
		return nil, e
	}
	if e := responsesSettings(m, &out); e != nil {
		return nil, e
	}
	return mustJSON(out), nil
}

// responsesInput carries the input: a string as one user message, items
// as chat messages (function calls merged into one assistant message).
func responsesInput(raw json.RawMessage, out *cRequest) *Error {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		out.Messages = append(out.Messages, cMessage{Role: "user", Content: s})
		return nil
	}
	var items []rItem
	if e := decode(raw, &items, "input", "a string or a list of items"); e != nil || len(items) == 0 {
		return refuse("input", "want a string or a non-empty list of items")
	}
	// pending is the reasoning of the assistant turn the next items make.
	var pending []thinkingBlock
	assistant := func(m cMessage) cMessage {
		m.ThinkingBlocks, pending = append(m.ThinkingBlocks, pending...), nil
		return m
	}
	for i, it := range items {
		at := fmt.Sprintf("input[%d]", i)
		switch it.Type {
		case "", "message":
			msg, e := responsesMessage(it, at)
			if e != nil {
				return e
			}
			if msg.Role == "assistant" {
				msg = assistant(msg)
			}
			out.Messages = append(out.Messages, msg)
		case "function_call":
			var tc cToolCall
			tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments = it.CallID, "function", it.Name, it.Arguments
			if n := len(out.Messages); n > 0 && out.Messages[n-1].Role == "assistant" && out.Messages[n-1].Content == nil {
				out.Messages[n-1] = assistant(out.Messages[n-1])
				out.Messages[n-1].ToolCalls = append(out.Messages[n-1].ToolCalls, tc)
			} else {
				out.Messages = append(out.Messages, assistant(cMessage{Role: "assistant", ToolCalls: []cToolCall{tc}}))
			}
		case "function_call_output":
			var text string
			if json.Unmarshal(it.Output, &text) != nil {
				texts, e := responsesTexts(it.Output, at+".output")
				if e != nil {
					return e
				}
				text = strings.Join(texts, "\n")
			}
			out.Messages = append(out.Messages, cMessage{Role: "tool", ToolCallID: it.CallID, Content: text})
		case "reasoning":
			// A reasoning item of an earlier answer goes back with the
			// assistant turn it led to; one without its opaque content
			// (which the upstream checks) cannot, and is left out.
			if it.EncryptedContent != "" {
				var text strings.Builder
				for _, s := range it.Summary {
					text.WriteString(s.Text)
				}
				pending = append(pending, fromOpaque(text.String(), it.EncryptedContent))
			}
		default:
			return refuse(at+".type", "%q is not carried to a route of another wire", it.Type)
		}
	}
	return nil
}

// responsesMessage is a message item as a chat message.
func responsesMessage(it rItem, at string) (cMessage, *Error) {
	role := it.Role
	switch role {
	case "user", "assistant", "system":
	case "developer":
		role = "system"
	default:
		return cMessage{}, refuse(at+".role", "%q: want user, assistant, system or developer", it.Role)
	}
	var s string
	if json.Unmarshal(it.Content, &s) == nil {
		return cMessage{Role: role, Content: s}, nil
	}
	var parts []struct {
		Type     string `json:"type"`
		Text     string `json:"text"`
		ImageURL string `json:"image_url"`
	}
	if e := decode(it.Content, &parts, at+".content", "a string or a list of content parts"); e != nil {
		return cMessage{}, e
	}
	var out []cPart
	for j, p := range parts {
		switch p.Type {
		case "input_text", "output_text":
			out = append(out, cPart{Type: "text", Text: p.Text})
		case "input_image":
			if p.ImageURL == "" {
				return cMessage{}, refuse(fmt.Sprintf("%s.content[%d].image_url", at, j), "want an image URL (a file id is not carried)")
			}
			out = append(out, cPart{Type: "image_url", ImageURL: &cImageURL{URL: p.ImageURL}})
		default:
			return cMessage{}, refuse(fmt.Sprintf("%s.content[%d].type", at, j), "%q is not carried to a route of another wire", p.Type)
		}
	}
	if role != "user" {
		// Chat takes text alone from the system and the assistant.
		var b strings.Builder
		for _, p := range out {
			if p.Type != "text" {
				return cMessage{}, refuse(at+".content", "only text in a %s message", role)
			}
			b.WriteString(p.Text)
		}
		return cMessage{Role: role, Content: b.String()}, nil
	}
	return cMessage{Role: role, Content: out}, nil
}

// responsesTexts reads a list of text parts.
func responsesTexts(raw json.RawMessage, at string) ([]string, *Error) {
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if e := decode(raw, &parts, at, "a string or a list of text parts"); e != nil {
		return nil, e
	}
	var out []string
	for j, p := range parts {
		if p.Type != "input_text" && p.Type != "output_text" {
			return nil, refuse(fmt.Sprintf("%s[%d].type", at, j), "%q: only text is carried here", p.Type)
		}
		out = append(out, p.Text)
	}
	return out, nil
}

// responsesSettings carries the output bound, sampling, stream, tools,
// tool_choice and the text format.
func responsesSettings(m map[string]json.RawMessage, out *cRequest) *Error {
	if raw := m["max_output_tokens"]; !isNull(raw) {
		if e := decode(raw, &out.MaxCompletionTokens, "max_output_tokens", "an integer"); e != nil {
			return e
		}
	}
	var e *Error
	if out.Temperature, e = number(m, "temperature"); e != nil {
		return e
	}
	if out.TopP, e = number(m, "top_p"); e != nil {
		return e
	}
	if raw := m["stream"]; !isNull(raw) {
		if e := decode(raw, &out.Stream, "stream", "a boolean"); e != nil {
			return e
		}
		if out.Stream {
			out.StreamOptions = &cStreamOptions{IncludeUsage: true}
		}
	}
	if raw := m["parallel_tool_calls"]; !isNull(raw) {
		var par bool
		if e := decode(raw, &par, "parallel_tool_calls", "a boolean"); e != nil {
			return e
		}
		out.ParallelToolCalls = &par
	}
	if raw := m["tools"]; !isNull(raw) {
		var tools []struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if e := decode(raw, &tools, "tools", "a list of tools"); e != nil {
			return e
		}
		for i, t := range tools {
			if t.Type != "function" || t.Name == "" {
				return refuse(fmt.Sprintf("tools[%d]", i), "only function tools with a name are carried to a route of another wire")
			}
			out.Tools = append(out.Tools, cTool{Type: "function", Function: cToolSchema{Name: t.Name, Description: t.Description, Parameters: t.Parameters}})
		}
	}
	if raw := m["tool_choice"]; !isNull(raw) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			out.ToolChoice = s
		} else {
			var tc struct {
				Type string `json:"type"`
				Name string `json:"name"`
			}
			if e := decode(raw, &tc, "tool_choice", "a string or an object"); e != nil {
				return e
			}
			if tc.Type != "function" || tc.Name == "" {
				return refuse("tool_choice", "only a function tool choice with a name is carried")
			}
			out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": tc.Name}}
		}
	}
	return responsesFormat(m["text"], out)
}

// responsesFormat carries text.format (json_schema, json_object) as chat's
// response_format; a verbosity is not carried.
func responsesFormat(raw json.RawMessage, out *cRequest) *Error {
	if isNull(raw) {
		return nil
	}
	var t struct {
		Format *struct {
			Type   string          `json:"type"`
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"format"`
		Verbosity string `json:"verbosity"`
	}
	if e := decode(raw, &t, "text", "an object"); e != nil {
		return e
	}
	if t.Verbosity != "" && t.Verbosity != "medium" {
		return refuse("text.verbosity", "not carried to a route of another wire")
	}
	if t.Format == nil || t.Format.Type == "text" {
		return nil
	}
	switch t.Format.Type {
	case "json_object":
		out.ResponseFormat = map[string]any{"type": "json_object"}
	case "json_schema":
		js := map[string]any{"name": t.Format.Name, "schema": t.Format.Schema}
		if t.Format.Strict != nil {
			js["strict"] = *t.Format.Strict
		}
		out.ResponseFormat = map[string]any{"type": "json_schema", "json_schema": js}
	default:
		return refuse("text.format.type", "%q: want text, json_object or json_schema", t.Format.Type)
	}
	return nil
}

// Response shapes, as a translation writes them.
type (
	rResponse struct {
		ID                string        `json:"id"`
		Object            string        `json:"object"`
		CreatedAt         int64         `json:"created_at"`
		Status            string        `json:"status"`
		Model             string        `json:"model"`
		Output            []rOutputItem `json:"output"`
		Usage             *rUsage       `json:"usage,omitempty"`
		IncompleteDetails *struct {
			Reason string `json:"reason"`
		} `json:"incomplete_details"`
		Error             any    `json:"error"`
		ParallelToolCalls bool   `json:"parallel_tool_calls"`
		ToolChoice        string `json:"tool_choice"`
		Tools             []any  `json:"tools"`
	}
	rOutputItem struct {
		Type      string  `json:"type"`
		ID        string  `json:"id"`
		Status    string  `json:"status"`
		Role      string  `json:"role,omitempty"`
		Content   []rPart `json:"content,omitempty"`
		CallID    string  `json:"call_id,omitempty"`
		Name      string  `json:"name,omitempty"`
		Arguments *string `json:"arguments,omitempty"`
		// A reasoning item's summary (present, if empty) and opaque
		// content (the thinking block's signature, or its redacted data).
		Summary          *[]rSummary `json:"summary,omitempty"`
		EncryptedContent *string     `json:"encrypted_content,omitempty"`
	}
	rPart struct {
		Type        string `json:"type"`
		Text        string `json:"text"`
		Annotations []any  `json:"annotations"`
	}
	rUsage struct {
		InputTokens        int64 `json:"input_tokens"`
		InputTokensDetails struct {
			CachedTokens int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
		OutputTokens        int64 `json:"output_tokens"`
		OutputTokensDetails struct {
			ReasoningTokens int64 `json:"reasoning_tokens"`
		} `json:"output_tokens_details"`
		TotalTokens int64 `json:"total_tokens"`
	}
)

// responseOf is a Response around output items; finish is chat's
// finish_reason (length: incomplete).
func responseOf(id, model string, created int64, output []rOutputItem, finish string, u *rUsage) rResponse {
	r := rResponse{ID: "resp_" + strings.TrimPrefix(id, "chatcmpl-"), Object: "response", CreatedAt: created, Status: "completed",
		Model: model, Output: output, Usage: u, ToolChoice: "auto", Tools: []any{}, ParallelToolCalls: true}
	if r.Output == nil {
		r.Output = []rOutputItem{}
	}
	if finish == "length" {
		r.Status = "incomplete"
		r.IncompleteDetails = &struct {
			Reason string `json:"reason"`
		}{"max_output_tokens"}
	}
	return r
}

// ChatToResponse translates a chat completion into a Response: its text as
// a message item, its tool calls as function_call items.
func ChatToResponse(body []byte, created int64) ([]byte, error) {
	var c inCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, errors.New("translate: the chat completion is not JSON")
	}
	if len(c.Choices) == 0 {
		return nil, errors.New("translate: the chat completion has no choice")
	}
	ch := c.Choices[0]
	var out []rOutputItem
	for i, b := range ch.Message.ThinkingBlocks {
		out = append(out, reasoningItem("rs_"+c.ID+"_"+strconv.Itoa(i), b))
	}
	if ch.Message.Content != nil && *ch.Message.Content != "" {
		out = append(out, rOutputItem{Type: "message", ID: "msg_" + c.ID, Status: "completed", Role: "assistant",
			Content: []rPart{{Type: "output_text", Text: *ch.Message.Content, Annotations: []any{}}}})
	}
	for i, tc := range ch.Message.ToolCalls {
		args := tc.Function.Arguments
		out = append(out, rOutputItem{Type: "function_call", ID: "fc_" + c.ID + "_" + strconv.Itoa(i), Status: "completed",
			CallID: tc.ID, Name: tc.Function.Name, Arguments: &args})
	}
	var u *rUsage
	if c.Usage != nil {
		u = &rUsage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens, TotalTokens: c.Usage.PromptTokens + c.Usage.CompletionTokens}
		if d := c.Usage.PromptTokensDetails; d != nil {
			u.InputTokensDetails.CachedTokens = d.CachedTokens
		}
		if d := c.Usage.CompletionTokensDetails; d != nil {
			u.OutputTokensDetails.ReasoningTokens = d.ReasoningTokens
		}
	}
	return mustJSON(responseOf(c.ID, c.Model, created, out, ch.FinishReason, u)), nil
}

// ResponsesStream translates a chat stream (with its usage chunk) into a
// Responses stream: response.created, the items added, their deltas and
// their ends, and response.completed, its terminal event.
type ResponsesStream struct {
	created int64
	id      string
	model   string
	seq     int64
	started bool
	done    bool
	output  []rOutputItem
	open    int // the output index of the item open for deltas; -1: none
	text    strings.Builder
	tools   map[int]int // chat tool call index -> output index
	finish  string
	usage   *rUsage
}

// NewResponsesStream starts a translation of one streamed answer.
func NewResponsesStream(created int64) *ResponsesStream {
	return &ResponsesStream{created: created, open: -1, tools: map[int]int{}}
}

// emit is one response event of type typ with fields.
func (s *ResponsesStream) emit(typ string, fields map[string]any) wire.SSE {
	fields["type"], fields["sequence_number"] = typ, s.seq
	s.seq++
	return event(typ, mustJSON(fields))
}

func (s *ResponsesStream) response(status string) rResponse {
	r := responseOf(s.id, s.model, s.created, s.output, s.finish, s.usage)
	if status != "" {
		r.Status = status
	}
	return r
}

// closeOpen ends the item open for deltas.
func (s *ResponsesStream) closeOpen() []wire.SSE {
	if s.open < 0 {
		return nil
	}
	i := s.open
	s.open = -1
	it := &s.output[i]
	it.Status = "completed"
	var out []wire.SSE
	switch it.Type {
	case "message":
		it.Content[0].Text = s.text.String()
		s.text.Reset()
		out = append(out,
			s.emit("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "text": it.Content[0].Text}),
			s.emit("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": it.Content[0]}))
	case "reasoning":
		if len(*it.Summary) > 0 {
			part := (*it.Summary)[0]
			part.Text = s.text.String()
			(*it.Summary)[0] = part
			out = append(out,
				s.emit("response.reasoning_summary_text.done", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": 0, "text": part.Text}),
				s.emit("response.reasoning_summary_part.done", map[string]any{"item_id": it.ID, "output_index": i, "summary_index": 0, "part": part}))
		}
		s.text.Reset()
	default:
		out = append(out, s.emit("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "arguments": *it.Arguments}))
	}
	return append(out, s.emit("response.output_item.done", map[string]any{"output_index": i, "item": *it}))
}

// Event is the response events of one chat event.
func (s *ResponsesStream) Event(ev wire.SSE) []wire.SSE {
	if s.done {
		return nil
	}
	if bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) {
		return s.End()
	}
	var in inChunk
	if json.Unmarshal(ev.Data, &in) != nil {
		return nil
	}
	var out []wire.SSE
	if !s.started {
		s.started, s.id, s.model = true, in.ID, in.Model
		out = append(out, s.emit("response.created", map[string]any{"response": s.response("in_progress")}),
			s.emit("response.in_progress", map[string]any{"response": s.response("in_progress")}))
	}
	if in.Usage != nil {
		s.usage = &rUsage{InputTokens: in.Usage.PromptTokens, OutputTokens: in.Usage.CompletionTokens, TotalTokens: in.Usage.PromptTokens + in.Usage.CompletionTokens}
		if in.Usage.PromptTokensDetails != nil {
			s.usage.InputTokensDetails.CachedTokens = in.Usage.PromptTokensDetails.CachedTokens
		}
		if in.Usage.CompletionTokensDetails != nil {
			s.usage.OutputTokensDetails.ReasoningTokens = in.Usage.CompletionTokensDetails.ReasoningTokens
		}
	}
	for _, ch := range in.Choices {
		if ch.Index != 0 {
			continue
		}
		out = append(out, s.reasoning(ch.Delta.ReasoningContent, ch.Delta.ThinkingBlocks)...)
		if t := ch.Delta.Content; t != nil && *t != "" {
			if s.open < 0 || s.output[s.open].Type != "message" {
				out = append(out, s.closeOpen()...)
				s.open = len(s.output)
				s.output = append(s.output, rOutputItem{Type: "message", ID: "msg_" + s.id, Status: "in_progress", Role: "assistant",
					Content: []rPart{{Type: "output_text", Annotations: []any{}}}})
				// The item's content is there, if empty: a client adds the
				// part to it (the JavaScript SDK's stream does).
				added := map[string]any{"type": "message", "id": "msg_" + s.id, "status": "in_progress", "role": "assistant", "content": []rPart{}}
				out = append(out, s.emit("response.output_item.added", map[string]any{"output_index": s.open, "item": added}),
					s.emit("response.content_part.added", map[string]any{"item_id": "msg_" + s.id, "output_index": s.open, "content_index": 0, "part": rPart{Type: "output_text", Annotations: []any{}}}))
			}
			s.text.WriteString(*t)
			out = append(out, s.emit("response.output_text.delta", map[string]any{"item_id": s.output[s.open].ID, "output_index": s.open, "content_index": 0, "delta": *t}))
		}
		for _, tc := range ch.Delta.ToolCalls {
			i, known := s.tools[int(tc.Index)]
			if !known {
				out = append(out, s.closeOpen()...)
				i = len(s.output)
				s.tools[int(tc.Index)] = i
				empty := ""
				s.output = append(s.output, rOutputItem{Type: "function_call", ID: "fc_" + s.id + "_" + strconv.Itoa(i), Status: "in_progress",
					CallID: tc.ID, Name: tc.Function.Name, Arguments: &empty})
				s.open = i
				out = append(out, s.emit("response.output_item.added", map[string]any{"output_index": i, "item": s.output[i]}))
			}
			if a := tc.Function.Arguments; a != "" {
				all := *s.output[i].Arguments + a
				s.output[i].Arguments = &all
				out = append(out, s.emit("response.function_call_arguments.delta", map[string]any{"item_id": s.output[i].ID, "output_index": i, "delta": a}))
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
			out = append(out, s.closeOpen()...)
		}
	}
	return out
}

// End closes the stream: the open item, then response.completed (or
// incomplete) with the whole output and the usage.
func (s *ResponsesStream) End() []wire.SSE {
	if s.done {
		return nil
	}
	s.done = true
	out := s.closeOpen()
	r := s.response("")
	typ := "response.completed"
	if r.Status == "incomplete" {
		typ = "response.incomplete"
	}
	return append(out, s.emit(typ, map[string]any{"response": r}))
}

// reasoningItem is a thinking block as a completed reasoning item.
func reasoningItem(id string, b thinkingBlock) rOutputItem {
	summary := []rSummary{}
	if b.Thinking != "" {
		summary = append(summary, rSummary{Type: "summary_text", Text: b.Thinking})
	}
	opaque := opaqueOf(b)
	return rOutputItem{Type: "reasoning", ID: id, Status: "completed", Summary: &summary, EncryptedContent: &opaque}
}

// reasoning is a chat delta's reasoning as response events: its text as
// the open reasoning item's summary (the item opened when none is), a
// signature (or a redacted block) as that item's encrypted_content, which
// ends it.
func (s *ResponsesStream) reasoning(text *string, blocks []thinkingBlock) []wire.SSE {
	var out []wire.SSE
	open := func() {
		if s.open >= 0 && s.output[s.open].Type == "reasoning" {
			return
		}
		out = append(out, s.closeOpen()...)
		s.open = len(s.output)
		id := "rs_" + s.id + "_" + strconv.Itoa(s.open)
		summary := []rSummary{}
		s.output = append(s.output, rOutputItem{Type: "reasoning", ID: id, Status: "in_progress", Summary: &summary})
		out = append(out, s.emit("response.output_item.added", map[string]any{"output_index": s.open, "item": s.output[s.open]}))
	}
	if text != nil && *text != "" {
		open()
		it := &s.output[s.open]
		if len(*it.Summary) == 0 {
			*it.Summary = append(*it.Summary, rSummary{Type: "summary_text"})
			out = append(out, s.emit("response.reasoning_summary_part.added", map[string]any{"item_id": it.ID, "output_index": s.open,
				"summary_index": 0, "part": rSummary{Type: "summary_text"}}))
		}
		s.text.WriteString(*text)
		out = append(out, s.emit("response.reasoning_summary_text.delta", map[string]any{"item_id": it.ID, "output_index": s.open,
			"summary_index": 0, "delta": *text}))
	}
	for _, b := range blocks {
		if b.Type == "redacted_thinking" {
			out = append(out, s.closeOpen()...)
		}
		open()
		opaque := opaqueOf(b)
		s.output[s.open].EncryptedContent = &opaque
		out = append(out, s.closeOpen()...)
	}
	return out
}
