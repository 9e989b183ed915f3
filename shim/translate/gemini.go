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

// Gemini is the wire of Google's Gemini API (generateContent): a chat
// completions client is carried to it by ChatToGemini, GeminiToChat and a
// GeminiStream; its errors by GeminiError.
const Gemini wire.Protocol = "gemini"

// The members of a chat completions request, and what becomes of each on a
// Gemini route.
var (
	geminiCarried = map[string]bool{"model": true, "messages": true, "max_tokens": true, "max_completion_tokens": true,
		"temperature": true, "top_p": true, "stop": true, "stream": true, "stream_options": true, "tools": true,
		"tool_choice": true, "parallel_tool_calls": true, "n": true, "response_format": true, "logprobs": true,
		"modalities": true, "seed": true, "frequency_penalty": true, "presence_penalty": true,
		"thinking": true, "reasoning_effort": true}
	geminiDropped = map[string]bool{"user": true, "store": true, "metadata": true, "service_tier": true,
		"prompt_cache_key": true, "safety_identifier": true}
)

// Gemini's request shapes, as a translation writes them.
type (
	gRequest struct {
		Contents          []gContent   `json:"contents"`
		SystemInstruction *gContent    `json:"systemInstruction,omitempty"`
		Tools             []gTool      `json:"tools,omitempty"`
		ToolConfig        *gToolConfig `json:"toolConfig,omitempty"`
		GenerationConfig  *gGenConfig  `json:"generationConfig,omitempty"`
	}
	gContent struct {
		Role  string  `json:"role,omitempty"`
		Parts []gPart `json:"parts"`
	}
	gPart struct {
		Text             *string          `json:"text,omitempty"`
		Thought          bool             `json:"thought,omitempty"`
		ThoughtSignature string           `json:"thoughtSignature,omitempty"`
		InlineData       *gBlob           `json:"inlineData,omitempty"`
		FunctionCall     *gFunctionCall   `json:"functionCall,omitempty"`
		FunctionResponse *gFunctionResult `json:"functionResponse,omitempty"`
	}
	gBlob struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	}
	gFunctionCall struct {
		ID   string          `json:"id,omitempty"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args,omitempty"`
	}
	gFunctionResult struct {
		ID       string          `json:"id,omitempty"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	}
	gTool struct {
		FunctionDeclarations []gFunction `json:"functionDeclarations"`
	}
	gFunction struct {
		Name                 string          `json:"name"`
		Description          string          `json:"description,omitempty"`
		ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
	}
	gToolConfig struct {
		FunctionCallingConfig gCallingConfig `json:"functionCallingConfig"`
	}
	gCallingConfig struct {
		Mode                 string   `json:"mode"`
		AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
	}
	gGenConfig struct {
		MaxOutputTokens    int64           `json:"maxOutputTokens,omitempty"`
		Temperature        json.RawMessage `json:"temperature,omitempty"`
		TopP               json.RawMessage `json:"topP,omitempty"`
		StopSequences      []string        `json:"stopSequences,omitempty"`
		Seed               json.RawMessage `json:"seed,omitempty"`
		PresencePenalty    json.RawMessage `json:"presencePenalty,omitempty"`
		FrequencyPenalty   json.RawMessage `json:"frequencyPenalty,omitempty"`
		ResponseMimeType   string          `json:"responseMimeType,omitempty"`
		ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
		ThinkingConfig     *gThinking      `json:"thinkingConfig,omitempty"`
	}
	// gThinking asks for reasoning: its budget (-1: the model's choice)
	// and its summaries in the answer.
	gThinking struct {
		ThinkingBudget  int64 `json:"thinkingBudget"`
		IncludeThoughts bool  `json:"includeThoughts"`
	}
)

// ChatToGemini translates a chat completions request into a Gemini
// generateContent request (the model goes in the URL, not the body). An
// *Error names what cannot be carried.
func ChatToGemini(body []byte, o Options) ([]byte, error) {
	var model string
	m, e := requestMembers(body, o, &model, geminiCarried, geminiDropped,
		"not supported when a chat completions request is served by a Gemini route")
	if e != nil {
		return nil, e
	}
	var out gRequest
	if e := geminiSettings(m, o, &out); e != nil {
		return nil, e
	}
	if e := geminiTools(m, &out); e != nil {
		return nil, e
	}
	var msgs []json.RawMessage
	if e := decode(m["messages"], &msgs, "messages", "a list of messages"); e != nil || len(msgs) == 0 {
		return nil, refuse("messages", "want a non-empty list of messages")
	}
	calls := map[string]string{} // tool call id -> function name, for the results
	for i, raw := range msgs {
		if e := geminiMessageTo(&out, raw, fmt.Sprintf("messages[%d]", i), calls); e != nil {
			return nil, e
		}
	}
	if len(out.Contents) == 0 {
		return nil, refuse("messages", "no user or assistant message: a Gemini route needs one")
	}
	return mustJSON(out), nil
}

// geminiSettings carries the output bound, sampling, stop, seed,
// penalties and the response format into generationConfig, refusing what
// Gemini cannot answer (more than one choice, log probabilities, audio).
func geminiSettings(m map[string]json.RawMessage, o Options, out *gRequest) *Error {
	g := &gGenConfig{MaxOutputTokens: o.MaxTokens}
	for _, k := range []string{"max_completion_tokens", "max_tokens"} {
		if raw := m[k]; !isNull(raw) {
			var n int64
			if e := decode(raw, &n, k, "an integer"); e != nil {
				return e
			}
			if n < 1 {
				return refuse(k, "%d: want at least 1", n)
			}
			g.MaxOutputTokens = n
			break
		}
	}
	for k, dst := range map[string]*json.RawMessage{"temperature": &g.Temperature, "top_p": &g.TopP, "seed": &g.Seed,
		"presence_penalty": &g.PresencePenalty, "frequency_penalty": &g.FrequencyPenalty} {
		n, e := number(m, k)
		if e != nil {
			return e
		}
		*dst = n
	}
	if raw := m["stop"]; !isNull(raw) {
		var one string
		if json.Unmarshal(raw, &one) == nil {
			g.StopSequences = []string{one}
		} else if e := decode(raw, &g.StopSequences, "stop", "a string or a list of strings"); e != nil {
			return e
		}
	}
	if e := oneTextAnswer(m, "a Gemini route"); e != nil {
		return e
	}
	if e := geminiFormat(m, g); e != nil {
		return e
	}
	th, e := requestThinking(m, 0)
	if e != nil {
		return e
	}
	if th != nil {
		g.ThinkingConfig = &gThinking{ThinkingBudget: th.BudgetTokens, IncludeThoughts: true}
		if th.Type == "adaptive" {
			g.ThinkingConfig.ThinkingBudget = -1
		}
	}
	if g.MaxOutputTokens > 0 || g.Temperature != nil || g.TopP != nil || g.StopSequences != nil || g.Seed != nil ||
		g.PresencePenalty != nil || g.FrequencyPenalty != nil || g.ResponseMimeType != "" || g.ThinkingConfig != nil {
		out.GenerationConfig = g
	}
	return nil
}

// geminiFormat carries response_format: json_object and json_schema as a
// JSON answer (with its schema).
func geminiFormat(m map[string]json.RawMessage, g *gGenConfig) *Error {
	if raw := m["response_format"]; !isNull(raw) {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if e := decode(raw, &rf, "response_format", "an object"); e != nil {
			return e
		}
		switch rf.Type {
		case "text":
		case "json_object":
			g.ResponseMimeType = "application/json"
		case "json_schema":
			if isNull(rf.JSONSchema.Schema) {
				return refuse("response_format.json_schema.schema", "required")
			}
			g.ResponseMimeType, g.ResponseJSONSchema = "application/json", rf.JSONSchema.Schema
		default:
			return refuse("response_format.type", "%q: want text, json_object or json_schema", rf.Type)
		}
	}
	return nil
}

// geminiTools carries function tools and tool_choice.
func geminiTools(m map[string]json.RawMessage, out *gRequest) *Error {
	var fns []gFunction
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
			fns = append(fns, gFunction{Name: t.Function.Name, Description: t.Function.Description, ParametersJSONSchema: t.Function.Parameters})
		}
	}
	if len(fns) > 0 {
		out.Tools = []gTool{{FunctionDeclarations: fns}}
	}
	if raw := m["tool_choice"]; !isNull(raw) {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			modes := map[string]string{"none": "NONE", "auto": "AUTO", "required": "ANY"}
			if modes[s] == "" {
				return refuse("tool_choice", "%q: want none, auto, required or a function", s)
			}
			out.ToolConfig = &gToolConfig{gCallingConfig{Mode: modes[s]}}
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
			out.ToolConfig = &gToolConfig{gCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{tc.Function.Name}}}
		}
		if len(fns) == 0 && out.ToolConfig.FunctionCallingConfig.Mode != "NONE" {
			return refuse("tool_choice", "set without tools")
		}
	}
	if raw := m["parallel_tool_calls"]; !isNull(raw) {
		var par bool
		if e := decode(raw, &par, "parallel_tool_calls", "a boolean"); e != nil {
			return e
		}
	}
	return nil
}

// add appends parts to the conversation as role, merged into the last
// content when it has the same role.
func (r *gRequest) add(role string, parts ...gPart) {
	if len(parts) == 0 {
		return
	}
	if n := len(r.Contents); n > 0 && r.Contents[n-1].Role == role {
		r.Contents[n-1].Parts = append(r.Contents[n-1].Parts, parts...)
		return
	}
	r.Contents = append(r.Contents, gContent{Role: role, Parts: parts})
}

func gText(s string) gPart { return gPart{Text: &s} }

// geminiMessageTo translates one chat message into out: system and
// developer text into the system instruction, user turns (text and data:
// images) as user, assistant text and tool calls as model, tool results
// as user functionResponse parts (named by the call they answer).
func geminiMessageTo(out *gRequest, raw json.RawMessage, at string, calls map[string]string) *Error {
	msg, e := chatMessageOf(raw, at, "not carried to a Gemini route")
	if e != nil {
		return e
	}
	switch msg.Role {
	case "system", "developer":
		texts, e := chatTexts(msg.Content, at+".content")
		if e != nil {
			return e
		}
		if out.SystemInstruction == nil && len(texts) > 0 {
			out.SystemInstruction = &gContent{}
		}
		for _, t := range texts {
			out.SystemInstruction.Parts = append(out.SystemInstruction.Parts, gText(t))
		}
	case "user":
		parts, e := geminiUserContent(msg.Content, at+".content")
		if e != nil {
			return e
		}
		out.add("user", parts...)
	case "assistant":
		texts, e := chatTexts(msg.Content, at+".content")
		if e != nil {
			return e
		}
		thinking, e := chatThinking(msg.Thinking, at+".thinking_blocks")
		if e != nil {
			return e
		}
		var parts []gPart
		for _, t := range texts {
			parts = append(parts, gText(t))
		}
		for j, tc := range msg.ToolCalls {
			args := json.RawMessage(tc.Function.Arguments)
			if strings.TrimSpace(tc.Function.Arguments) == "" {
				args = json.RawMessage("{}")
			}
			if !json.Valid(args) || bytes.TrimSpace(args)[0] != '{' {
				return refuse(fmt.Sprintf("%s.tool_calls[%d].function.arguments", at, j), "want a JSON object")
			}
			calls[tc.ID] = tc.Function.Name
			parts = append(parts, gPart{FunctionCall: &gFunctionCall{Name: tc.Function.Name, Args: args}})
		}
		out.add("model", signed(parts, thinking)...)
	case "tool":
		name, ok := calls[msg.ToolCallID]
		if !ok {
			return refuse(at+".tool_call_id", "%q answers no earlier tool call", msg.ToolCallID)
		}
		texts, e := chatTexts(msg.Content, at+".content")
		if e != nil {
			return e
		}
		result := strings.Join(texts, "\n")
		resp := json.RawMessage(result)
		if !json.Valid(resp) || bytes.TrimSpace(resp)[0] != '{' {
			resp = mustJSON(map[string]string{"content": result})
		}
		out.add("user", gPart{FunctionResponse: &gFunctionResult{Name: name, Response: resp}})
	default:
		return refuse(at+".role", "%q is not translated (want system, developer, user, assistant or tool)", msg.Role)
	}
	return nil
}

// geminiUserContent reads a user message's content: text, and images as
// data: URLs (a Gemini request carries an image's bytes, not its URL).
func geminiUserContent(raw json.RawMessage, at string) ([]gPart, *Error) {
	parts, e := userParts(raw, at)
	if e != nil {
		return nil, e
	}
	var out []gPart
	for j, p := range parts {
		pat := fmt.Sprintf("%s[%d]", at, j)
		switch p.Type {
		case "text":
			if p.Text != "" {
				out = append(out, gText(p.Text))
			}
		case "image_url":
			rest, ok := strings.CutPrefix(p.ImageURL.URL, "data:")
			meta, data, ok2 := strings.Cut(rest, ",")
			mime, b64, _ := strings.Cut(meta, ";")
			if !ok || !ok2 || b64 != "base64" || data == "" || !strings.HasPrefix(mime, "image/") {
				return nil, refuse(pat+".image_url.url", "a Gemini route takes an image as a data:image/...;base64, URL")
			}
			out = append(out, gPart{InlineData: &gBlob{MimeType: mime, Data: data}})
		default:
			return nil, refuse(pat+".type", "%q is not supported when served by a Gemini route", p.Type)
		}
	}
	return out, nil
}

// Gemini's answer, as a translation reads it.
type (
	gAnswer struct {
		Candidates    []gCandidate `json:"candidates"`
		UsageMetadata *GeminiUsage `json:"usageMetadata"`
		ModelVersion  string       `json:"modelVersion"`
		ResponseID    string       `json:"responseId"`
	}
	gCandidate struct {
		Content      gContent `json:"content"`
		FinishReason string   `json:"finishReason"`
	}
	// GeminiUsage is a Gemini answer's usageMetadata.
	GeminiUsage struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		TotalTokenCount         int64 `json:"totalTokenCount"`
	}
)

// chat is Gemini's usage as chat's: the prompt counts the cached tokens
// too, the completion the thoughts too (Gemini bills them as output).
func (u GeminiUsage) chat() *cUsage {
	out := u.CandidatesTokenCount + u.ThoughtsTokenCount
	c := &cUsage{PromptTokens: u.PromptTokenCount, CompletionTokens: out, TotalTokens: u.PromptTokenCount + out,
		PromptTokensDetails: &cCachedUsage{CachedTokens: u.CachedContentTokenCount}}
	if u.ThoughtsTokenCount > 0 {
		c.CompletionTokensDetails = &cReasoningUsage{ReasoningTokens: u.ThoughtsTokenCount}
	}
	return c
}

// geminiFinish is a Gemini finishReason as chat's finish_reason.
func geminiFinish(reason string, called bool) string {
	switch reason {
	case "MAX_TOKENS":
		return "length"
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY":
		return "content_filter"
	}
	if called {
		return "tool_calls"
	}
	return "stop"
}

// signed puts a model turn's thought signatures back on its parts, where
// Gemini gave them: the first on its first function call (Gemini signs
// the first call of a step), the others on the following parts, and a
// turn without a call's on its last part (where Gemini signs a text
// answer). A turn of signatures alone gets an empty text part for them.
func signed(parts []gPart, thinking []thinkingBlock) []gPart {
	var sigs []string
	for _, b := range thinking {
		if b.Type == "thinking" && b.Signature != "" {
			sigs = append(sigs, b.Signature)
		}
	}
	if len(sigs) == 0 {
		return parts
	}
	first := len(parts) - 1
	for i, p := range parts {
		if p.FunctionCall != nil {
			first = i
			break
		}
	}
	if first < 0 {
		parts, first = []gPart{gText("")}, 0
	}
	for i := first; i < len(parts) && len(sigs) > 0; i++ {
		parts[i].ThoughtSignature, sigs = sigs[0], sigs[1:]
	}
	return parts
}

// geminiDeltas reads a candidate's parts as chat deltas, in order: text,
// thoughts as reasoning_content, a thought signature as a thinking block
// of its own (before the part it signs, so a call follows the reasoning
// that led to it), function calls as tool calls numbered from n.
func geminiDeltas(parts []gPart, n int) []cDelta {
	var out []cDelta
	for _, p := range parts {
		sig := p.ThoughtSignature
		if sig != "" && !p.Thought {
			out = append(out, cDelta{ThinkingBlocks: []thinkingBlock{{Type: "thinking", Signature: sig}}})
		}
		switch {
		case p.Thought:
			if p.Text != nil && *p.Text != "" {
				t := *p.Text
				out = append(out, cDelta{ReasoningContent: &t})
			}
			if sig != "" {
				out = append(out, cDelta{ThinkingBlocks: []thinkingBlock{{Type: "thinking", Signature: sig}}})
			}
		case p.Text != nil:
			t := *p.Text
			out = append(out, cDelta{Content: &t})
		case p.FunctionCall != nil:
			args := p.FunctionCall.Args
			if isNull(args) {
				args = json.RawMessage("{}")
			}
			id := p.FunctionCall.ID
			if id == "" {
				id = "call_" + strconv.Itoa(n)
			}
			out = append(out, cDelta{ToolCalls: []cToolDelta{{Index: n, ID: id, Type: "function",
				Function: cArgsDelta{Name: p.FunctionCall.Name, Arguments: string(args)}}}})
			n++
		}
	}
	return out
}

// GeminiToChat translates a Gemini answer into a chat completion.
func GeminiToChat(body []byte, created int64) ([]byte, error) {
	var a gAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		return nil, errors.New("translate: the upstream's answer is not JSON")
	}
	if len(a.Candidates) == 0 {
		return nil, errors.New("translate: the Gemini answer has no candidate")
	}
	c := a.Candidates[0]
	msg := foldDeltas(geminiDeltas(c.Content.Parts, 0))
	out := cCompletion{ID: "chatcmpl-" + a.ResponseID, Object: "chat.completion", Created: created, Model: a.ModelVersion,
		Choices: []cChoice{{Message: msg, FinishReason: geminiFinish(c.FinishReason, len(msg.ToolCalls) > 0)}}}
	if a.UsageMetadata != nil {
		out.Usage = a.UsageMetadata.chat()
	}
	return mustJSON(out), nil
}

// GeminiError is a Gemini error answer ({"error": {"code", "message",
// "status"}}) in OpenAI's envelope with the same status, Gemini's status
// as its code.
func GeminiError(status int, body []byte) []byte {
	var env struct {
		Error struct {
			Message string `json:"message"`
			Status  string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error.Message != "" {
		return errorEnvelope(wire.ChatCompletions, status, env.Error.Status, env.Error.Message)
	}
	return ErrorAnswer(wire.ChatCompletions, status, body)
}

// GeminiStream translates a Gemini stream (streamGenerateContent with
// alt=sse: each event a partial answer, the last with its finishReason and
// usage) into a chat completions stream. Gemini's stream has no terminal
// event: End closes the chat stream (the usage chunk when asked, [DONE]).
type GeminiStream struct {
	id, model    string
	created      int64
	includeUsage bool
	started      bool
	finished     bool
	calls        int
	usage        *GeminiUsage
}

// NewGeminiStream starts a translation of one streamed answer.
func NewGeminiStream(includeUsage bool, created int64) *GeminiStream {
	return &GeminiStream{includeUsage: includeUsage, created: created}
}

func (s *GeminiStream) chunk(d cDelta, finish *string) wire.SSE {
	return event("", mustJSON(cChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []cChunkChoice{{Delta: d, FinishReason: finish}}}))
}

// Event is the chat events of one Gemini event.
func (s *GeminiStream) Event(ev wire.SSE) []wire.SSE {
	var a gAnswer
	if json.Unmarshal(ev.Data, &a) != nil {
		return nil
	}
	if a.UsageMetadata != nil {
		s.usage = a.UsageMetadata
	}
	var out []wire.SSE
	if !s.started {
		s.started, s.id, s.model = true, "chatcmpl-"+a.ResponseID, a.ModelVersion
		out = append(out, s.chunk(cDelta{Role: "assistant", Content: new(string)}, nil))
	}
	if len(a.Candidates) == 0 || s.finished {
		return out
	}
	c := a.Candidates[0]
	for _, d := range geminiDeltas(c.Content.Parts, s.calls) {
		if d.Content != nil && *d.Content == "" {
			continue
		}
		s.calls += len(d.ToolCalls)
		out = append(out, s.chunk(d, nil))
	}
	if c.FinishReason != "" {
		s.finished = true
		f := geminiFinish(c.FinishReason, s.calls > 0)
		out = append(out, s.chunk(cDelta{}, &f))
	}
	return out
}

// End closes the chat stream: its finish when no event gave one, the
// usage chunk when the client asked for it, and [DONE].
func (s *GeminiStream) End() []wire.SSE {
	var out []wire.SSE
	if !s.finished {
		s.finished = true
		f := geminiFinish("", s.calls > 0)
		out = append(out, s.chunk(cDelta{}, &f))
	}
	if s.includeUsage && s.usage != nil {
		out = append(out, event("", mustJSON(cChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
			Choices: []cChunkChoice{}, Usage: s.usage.chat()})))
	}
	return append(out, event("", []byte("[DONE]")))
}
