package wire

import (
	"encoding/json"
	"strings"
)

// Direct is an answer the shim gives itself, without an upstream call.
type Direct struct {
	ID         string // response id without its protocol prefix (e.g. a ULID)
	Model      string
	Text       string
	StopReason string // Anthropic vocabulary: end_turn (default), max_tokens, stop_sequence
	Created    int64  // unix seconds
	// IncludeUsage ends a chat completions stream with a usage chunk (the
	// request's stream_options.include_usage), as the provider would.
	IncludeUsage bool
}

// AsksStreamUsage reports whether a chat completions body sets
// stream_options.include_usage.
func AsksStreamUsage(body []byte) bool {
	parses.Add(1)
	var in struct {
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	return json.Unmarshal(body, &in) == nil && in.StreamOptions.IncludeUsage
}

func (d Direct) stop() string {
	if d.StopReason == "" {
		return "end_turn"
	}
	return d.StopReason
}

// finishReason maps the stop reason to chat completions' finish_reason.
func (d Direct) finishReason() string {
	if d.stop() == "max_tokens" {
		return "length"
	}
	return "stop"
}

// words splits text into stream deltas of a few words each, so a streamed
// direct answer arrives as more than one event, like a real one.
func words(text string) []string {
	if text == "" {
		return []string{""}
	}
	var out []string
	fields := strings.SplitAfter(text, " ")
	const per = 4
	for i := 0; i < len(fields); i += per {
		out = append(out, strings.Join(fields[i:min(i+per, len(fields))], ""))
	}
	return out
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("wire: encode direct answer: " + err.Error())
	}
	return b
}

// DirectJSON is the non-streaming body of a direct answer in protocol p.
func DirectJSON(p Protocol, d Direct) []byte {
	switch p {
	case ChatCompletions:
		return mustJSON(chatCompletion(d))
	case Responses:
		return mustJSON(responseObject(d, true))
	default:
		return mustJSON(anthropicMessage(d, true))
	}
}

// DirectEvents is a streamed direct answer in protocol p: each element is
// one complete SSE event, blank line included, ready to write and flush.
func DirectEvents(p Protocol, d Direct) [][]byte {
	switch p {
	case ChatCompletions:
		return chatEvents(d)
	case Responses:
		return responsesEvents(d)
	default:
		return messagesEvents(d)
	}
}

// Event renders one SSE event; name may be empty.
func Event(name string, data []byte) []byte {
	b := make([]byte, 0, len(name)+len(data)+16)
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}

type chatMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func chatCompletion(d Direct) any {
	type choice struct {
		Index        int         `json:"index"`
		Message      chatMessage `json:"message"`
		Logprobs     *struct{}   `json:"logprobs"`
		FinishReason string      `json:"finish_reason"`
	}
	return struct {
		ID      string    `json:"id"`
		Object  string    `json:"object"`
		Created int64     `json:"created"`
		Model   string    `json:"model"`
		Choices []choice  `json:"choices"`
		Usage   chatUsage `json:"usage"`
	}{"chatcmpl-" + d.ID, "chat.completion", d.Created, d.Model,
		[]choice{{Message: chatMessage{Role: "assistant", Content: d.Text}, FinishReason: d.finishReason()}}, chatUsage{}}
}

func chatEvents(d Direct) [][]byte {
	type delta struct {
		Role    string  `json:"role,omitempty"`
		Content *string `json:"content,omitempty"`
	}
	type choice struct {
		Index        int     `json:"index"`
		Delta        delta   `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	type chunk struct {
		ID      string   `json:"id"`
		Object  string   `json:"object"`
		Created int64    `json:"created"`
		Model   string   `json:"model"`
		Choices []choice `json:"choices"`
	}
	mk := func(c choice) []byte {
		return Event("", mustJSON(chunk{"chatcmpl-" + d.ID, "chat.completion.chunk", d.Created, d.Model, []choice{c}}))
	}
	empty := ""
	out := [][]byte{mk(choice{Delta: delta{Role: "assistant", Content: &empty}})}
	for _, w := range words(d.Text) {
		out = append(out, mk(choice{Delta: delta{Content: &w}}))
	}
	fr := d.finishReason()
	out = append(out, mk(choice{FinishReason: &fr}))
	if d.IncludeUsage {
		// No model ran: the usage of a direct answer is zero tokens.
		out = append(out, Event("", mustJSON(struct {
			ID      string    `json:"id"`
			Object  string    `json:"object"`
			Created int64     `json:"created"`
			Model   string    `json:"model"`
			Choices []choice  `json:"choices"`
			Usage   chatUsage `json:"usage"`
		}{"chatcmpl-" + d.ID, "chat.completion.chunk", d.Created, d.Model, []choice{}, chatUsage{}})))
	}
	return append(out, []byte("data: [DONE]\n\n"))
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type outputMessage struct {
	Type    string       `json:"type"`
	ID      string       `json:"id"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []outputText `json:"content"`
}

func (d Direct) outputItem(done bool) outputMessage {
	m := outputMessage{Type: "message", ID: "msg_" + d.ID, Status: "in_progress", Role: "assistant", Content: []outputText{}}
	if done {
		m.Status = "completed"
		m.Content = []outputText{{Type: "output_text", Text: d.Text, Annotations: []any{}}}
	}
	return m
}

func responseObject(d Direct, done bool) any {
	type usage struct {
		InputTokens         int            `json:"input_tokens"`
		InputTokensDetails  map[string]int `json:"input_tokens_details"`
		OutputTokens        int            `json:"output_tokens"`
		OutputTokensDetails map[string]int `json:"output_tokens_details"`
		TotalTokens         int            `json:"total_tokens"`
	}
	type incomplete struct {
		Reason string `json:"reason"`
	}
	status := "in_progress"
	output := []outputMessage{}
	var inc *incomplete
	var u *usage
	if done {
		status = "completed"
		if d.stop() == "max_tokens" {
			status = "incomplete"
			inc = &incomplete{Reason: "max_output_tokens"}
		}
		output = []outputMessage{d.outputItem(true)}
		u = &usage{InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}}
	}
	return struct {
		ID                string          `json:"id"`
		Object            string          `json:"object"`
		CreatedAt         int64           `json:"created_at"`
		Status            string          `json:"status"`
		Error             *struct{}       `json:"error"`
		IncompleteDetails *incomplete     `json:"incomplete_details"`
		Instructions      *string         `json:"instructions"`
		Model             string          `json:"model"`
		Output            []outputMessage `json:"output"`
		ParallelToolCalls bool            `json:"parallel_tool_calls"`
		Temperature       float64         `json:"temperature"`
		TopP              float64         `json:"top_p"`
		ToolChoice        string          `json:"tool_choice"`
		Tools             []any           `json:"tools"`
		Text              map[string]any  `json:"text"`
		Metadata          map[string]any  `json:"metadata"`
		Usage             *usage          `json:"usage"`
	}{"resp_" + d.ID, "response", d.Created, status, nil, inc, nil, d.Model, output, true, 1, 1, "auto", []any{},
		map[string]any{"format": map[string]string{"type": "text"}}, map[string]any{}, u}
}

func responsesEvents(d Direct) [][]byte {
	seq := 0
	var out [][]byte
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		out = append(out, Event(typ, mustJSON(fields)))
	}
	itemID := "msg_" + d.ID
	emit("response.created", map[string]any{"response": responseObject(d, false)})
	emit("response.in_progress", map[string]any{"response": responseObject(d, false)})
	emit("response.output_item.added", map[string]any{"output_index": 0, "item": d.outputItem(false)})
	emit("response.content_part.added", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0,
		"part": outputText{Type: "output_text", Text: "", Annotations: []any{}}})
	for _, w := range words(d.Text) {
		emit("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "delta": w, "logprobs": []any{}})
	}
	emit("response.output_text.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0, "text": d.Text, "logprobs": []any{}})
	emit("response.content_part.done", map[string]any{"item_id": itemID, "output_index": 0, "content_index": 0,
		"part": outputText{Type: "output_text", Text: d.Text, Annotations: []any{}}})
	emit("response.output_item.done", map[string]any{"output_index": 0, "item": d.outputItem(true)})
	final := "response.completed"
	if d.stop() == "max_tokens" {
		final = "response.incomplete"
	}
	emit(final, map[string]any{"response": responseObject(d, true)})
	return out
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type anthropicUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
}

func anthropicMessage(d Direct, done bool) any {
	content := []textBlock{}
	var stop *string
	if done {
		content = []textBlock{{Type: "text", Text: d.Text}}
		s := d.stop()
		stop = &s
	}
	return struct {
		ID           string         `json:"id"`
		Type         string         `json:"type"`
		Role         string         `json:"role"`
		Model        string         `json:"model"`
		Content      []textBlock    `json:"content"`
		StopReason   *string        `json:"stop_reason"`
		StopSequence *string        `json:"stop_sequence"`
		Usage        anthropicUsage `json:"usage"`
	}{"msg_" + d.ID, "message", "assistant", d.Model, content, stop, nil, anthropicUsage{}}
}

func messagesEvents(d Direct) [][]byte {
	var out [][]byte
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		out = append(out, Event(typ, mustJSON(fields)))
	}
	emit("message_start", map[string]any{"message": anthropicMessage(d, false)})
	emit("content_block_start", map[string]any{"index": 0, "content_block": textBlock{Type: "text", Text: ""}})
	emit("ping", map[string]any{})
	for _, w := range words(d.Text) {
		emit("content_block_delta", map[string]any{"index": 0, "delta": map[string]string{"type": "text_delta", "text": w}})
	}
	emit("content_block_stop", map[string]any{"index": 0})
	emit("message_delta", map[string]any{"delta": map[string]any{"stop_reason": d.stop(), "stop_sequence": nil},
		"usage": map[string]int{"output_tokens": 0}})
	emit("message_stop", map[string]any{})
	return out
}
