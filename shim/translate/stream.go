package translate

import (
	"bytes"
	"encoding/json"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Stream translates an upstream's stream, event by event, into the
// client's protocol: Anthropic's events into chat.completion.chunk events
// ending with data: [DONE], or chat chunks into Anthropic's event sequence
// (message_start, content_block_start/delta/stop, message_delta,
// message_stop).
type Stream struct {
	client       wire.Protocol
	includeUsage bool
	created      int64

	started, done bool
	id, model     string

	// Anthropic to chat: tool_use blocks by their block index, numbered
	// in order as chat's tool call index; the stop reason and usage.
	tools map[int64]int
	stop  string
	usage aUsage

	// Chat to Anthropic: the open block (-1: none) and its kind, the
	// block index each chat tool call index got, the next block index.
	open     int
	openKind string
	blocks   map[int64]int
	next     int
	finish   string
	cusage   *inUsage
}

// NewStream returns a translation of an upstream stream for a client of
// protocol client; includeUsage (a chat client's
// stream_options.include_usage) ends a chat stream with a usage chunk, and
// created is its chunks' created time.
func NewStream(client wire.Protocol, includeUsage bool, created int64) *Stream {
	return &Stream{client: client, includeUsage: includeUsage, created: created, tools: map[int64]int{}, blocks: map[int64]int{}, open: -1}
}

// Event translates one upstream event into the client's events (none, one
// or more). After the client's terminal event (data: [DONE],
// message_stop) it returns none.
func (s *Stream) Event(ev wire.SSE) []wire.SSE {
	if s.done {
		return nil
	}
	if s.client == wire.Messages {
		return s.fromChat(ev)
	}
	return s.fromMessages(ev)
}

// End is what the client still needs when the upstream's stream ended
// cleanly without its terminal event: the closing events when the
// upstream had said its answer was whole (a chat finish_reason, an
// Anthropic message_delta's stop_reason), else none — the client's stream
// ends as short as the upstream's, as it would natively.
func (s *Stream) End() []wire.SSE {
	if s.done {
		return nil
	}
	s.done = true
	if s.client == wire.Messages && s.finish != "" {
		return s.closeMessage()
	}
	if s.client == wire.ChatCompletions && s.stop != "" {
		return s.closeChat()
	}
	return nil
}

// event makes an SSE of name (Anthropic's event: line; "" for chat) and
// data.
func event(name string, data []byte) wire.SSE {
	return wire.SSE{Name: name, Data: data, Raw: wire.Event(name, data)}
}

// --- Anthropic events to chat chunks ---

type (
	cChunk struct {
		ID      string         `json:"id"`
		Object  string         `json:"object"`
		Created int64          `json:"created"`
		Model   string         `json:"model"`
		Choices []cChunkChoice `json:"choices"`
		Usage   *cUsage        `json:"usage,omitempty"`
	}
	cChunkChoice struct {
		Index        int     `json:"index"`
		Delta        cDelta  `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	}
	cDelta struct {
		Role      string       `json:"role,omitempty"`
		Content   *string      `json:"content,omitempty"`
		ToolCalls []cToolDelta `json:"tool_calls,omitempty"`
		// Reasoning in chat's shape (thinking.go): its text as it comes,
		// a block's signature (or a redacted block) when it is whole.
		ReasoningContent *string         `json:"reasoning_content,omitempty"`
		ThinkingBlocks   []thinkingBlock `json:"thinking_blocks,omitempty"`
	}
	cToolDelta struct {
		Index    int        `json:"index"`
		ID       string     `json:"id,omitempty"`
		Type     string     `json:"type,omitempty"`
		Function cArgsDelta `json:"function"`
	}
	cArgsDelta struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	// inEvent is any Anthropic stream event, as read.
	inEvent struct {
		Type    string `json:"type"`
		Message *struct {
			ID    string  `json:"id"`
			Model string  `json:"model"`
			Usage *aUsage `json:"usage"`
		} `json:"message"`
		Index        int64 `json:"index"`
		ContentBlock *struct {
			Type     string `json:"type"`
			ID       string `json:"id"`
			Name     string `json:"name"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
			Data     string `json:"data"`
		} `json:"content_block"`
		Delta *struct {
			Type        string `json:"type"`
			Text        string `json:"text"`
			PartialJSON string `json:"partial_json"`
			StopReason  string `json:"stop_reason"`
			Thinking    string `json:"thinking"`
			Signature   string `json:"signature"`
		} `json:"delta"`
		Usage *struct {
			InputTokens              *int64 `json:"input_tokens"`
			OutputTokens             *int64 `json:"output_tokens"`
			CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
			CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
		} `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
)

// chunk is a chat chunk of one delta.
func (s *Stream) chunk(d cDelta, finish *string) wire.SSE {
	return event("", mustJSON(cChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
		Choices: []cChunkChoice{{Delta: d, FinishReason: finish}}}))
}

func (s *Stream) fromMessages(ev wire.SSE) []wire.SSE {
	var in inEvent
	if json.Unmarshal(ev.Data, &in) != nil {
		return nil // not an event of Anthropic's (a comment, a ping without data)
	}
	if in.Type == "" {
		in.Type = ev.Name
	}
	var out []wire.SSE
	if !s.started && in.Type != "error" && in.Type != "ping" {
		s.started = true
		if in.Message != nil {
			s.id, s.model = in.Message.ID, in.Message.Model
			if in.Message.Usage != nil {
				s.usage = *in.Message.Usage
			}
		}
		empty := ""
		out = append(out, s.chunk(cDelta{Role: "assistant", Content: &empty}, nil))
	}
	switch in.Type {
	case "content_block_start", "content_block_delta":
		out = append(out, s.blockFromMessages(in)...)
	case "message_delta":
		if in.Delta != nil && in.Delta.StopReason != "" {
			s.stop = in.Delta.StopReason
		}
		if u := in.Usage; u != nil {
			for _, p := range []struct {
				from *int64
				to   *int64
			}{{u.InputTokens, &s.usage.InputTokens}, {u.OutputTokens, &s.usage.OutputTokens},
				{u.CacheReadInputTokens, &s.usage.CacheReadInputTokens}, {u.CacheCreationInputTokens, &s.usage.CacheCreationInputTokens}} {
				if p.from != nil {
					*p.to = *p.from
				}
			}
		}
	case "message_stop":
		out = append(out, s.closeChat()...)
	case "error":
		s.done = true
		msg, typ := upstreamError(ev.Data)
		out = append(out, event("", errorEnvelope(wire.ChatCompletions, 500, typ, msg)))
	}
	return out
}

// closeChat ends a chat stream: the finish chunk, the usage chunk when the
// client asked for it, and data: [DONE].
func (s *Stream) closeChat() []wire.SSE {
	s.done = true
	var out []wire.SSE
	if s.started {
		f := finishReason(s.stop)
		out = append(out, s.chunk(cDelta{}, &f))
		if s.includeUsage {
			out = append(out, event("", mustJSON(cChunk{ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
				Choices: []cChunkChoice{}, Usage: s.usage.chat()})))
		}
	}
	return append(out, event("", []byte("[DONE]")))
}

// --- chat chunks to Anthropic events ---

type (
	// inChunk is a chat chunk, as read.
	inChunk struct {
		ID      string `json:"id"`
		Model   string `json:"model"`
		Choices []struct {
			Index int `json:"index"`
			Delta struct {
				Content          *string         `json:"content"`
				Refusal          *string         `json:"refusal"`
				ReasoningContent *string         `json:"reasoning_content"`
				ThinkingBlocks   []thinkingBlock `json:"thinking_blocks"`
				ToolCalls        []struct {
					Index    int64  `json:"index"`
					ID       string `json:"id"`
					Function struct {
						Name      string `json:"name"`
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"delta"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *inUsage        `json:"usage"`
		Error json.RawMessage `json:"error"`
	}
	aStart struct {
		Type    string  `json:"type"`
		Message aAnswer `json:"message"`
	}
	aBlockStart struct {
		Type         string `json:"type"`
		Index        int    `json:"index"`
		ContentBlock aBlock `json:"content_block"`
	}
	aBlockDelta struct {
		Type  string    `json:"type"`
		Index int       `json:"index"`
		Delta aDeltaOut `json:"delta"`
	}
	aDeltaOut struct {
		Type        string  `json:"type"`
		Text        *string `json:"text,omitempty"`
		PartialJSON *string `json:"partial_json,omitempty"`
		Thinking    *string `json:"thinking,omitempty"`
		Signature   *string `json:"signature,omitempty"`
	}
	aBlockStop struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	aMessageDelta struct {
		Type  string `json:"type"`
		Delta struct {
			StopReason   string  `json:"stop_reason"`
			StopSequence *string `json:"stop_sequence"`
		} `json:"delta"`
		Usage aUsageW `json:"usage"`
	}
)

func aEvent(v any, name string) wire.SSE { return event(name, mustJSON(v)) }

func (s *Stream) fromChat(ev wire.SSE) []wire.SSE {
	if bytes.Equal(bytes.TrimSpace(ev.Data), []byte("[DONE]")) {
		return s.closeMessage()
	}
	var in inChunk
	if json.Unmarshal(ev.Data, &in) != nil {
		return nil
	}
	if !isNull(in.Error) {
		s.done = true
		msg, typ := upstreamError(ev.Data)
		_ = typ
		return []wire.SSE{event("error", wire.ErrorBody(wire.Messages, 500, "", msg))}
	}
	var out []wire.SSE
	if !s.started {
		s.started = true
		s.id, s.model = in.ID, in.Model
		out = append(out, aEvent(aStart{Type: "message_start", Message: aAnswer{ID: s.id, Type: "message", Role: "assistant",
			Model: s.model, Content: []aBlock{}}}, "message_start"))
	}
	if in.Usage != nil {
		s.cusage = in.Usage
	}
	for _, ch := range in.Choices {
		if ch.Index != 0 {
			continue // a translated request asks for one choice
		}
		out = append(out, s.thinkingFromChat(ch.Delta.ReasoningContent, ch.Delta.ThinkingBlocks)...)
		text := ch.Delta.Content
		if text == nil || *text == "" {
			text = ch.Delta.Refusal
		}
		if text != nil && *text != "" {
			if s.openKind != "text" {
				out = append(out, s.closeBlock()...)
				empty := ""
				out = append(out, s.startBlock("text", aBlock{Type: "text", Text: &empty}))
			}
			t := *text
			out = append(out, aEvent(aBlockDelta{Type: "content_block_delta", Index: s.open, Delta: aDeltaOut{Type: "text_delta", Text: &t}}, "content_block_delta"))
		}
		for _, tc := range ch.Delta.ToolCalls {
			idx, known := s.blocks[tc.Index]
			if !known {
				out = append(out, s.closeBlock()...)
				out = append(out, s.startBlock("tool_use", aBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: json.RawMessage("{}")}))
				idx = s.open
				s.blocks[tc.Index] = idx
			}
			if tc.Function.Arguments != "" {
				a := tc.Function.Arguments
				out = append(out, aEvent(aBlockDelta{Type: "content_block_delta", Index: idx, Delta: aDeltaOut{Type: "input_json_delta", PartialJSON: &a}}, "content_block_delta"))
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			s.finish = *ch.FinishReason
			out = append(out, s.closeBlock()...)
		}
	}
	return out
}

// startBlock opens the next content block.
func (s *Stream) startBlock(kind string, b aBlock) wire.SSE {
	s.open, s.openKind = s.next, kind
	s.next++
	return aEvent(aBlockStart{Type: "content_block_start", Index: s.open, ContentBlock: b}, "content_block_start")
}

// closeBlock closes the open content block, if any.
func (s *Stream) closeBlock() []wire.SSE {
	if s.open < 0 {
		return nil
	}
	ev := aEvent(aBlockStop{Type: "content_block_stop", Index: s.open}, "content_block_stop")
	s.open, s.openKind = -1, ""
	return []wire.SSE{ev}
}

// closeMessage ends an Anthropic stream: the open block closed,
// message_delta with the stop reason and the usage, message_stop.
func (s *Stream) closeMessage() []wire.SSE {
	s.done = true
	var out []wire.SSE
	if !s.started {
		s.started = true
		out = append(out, aEvent(aStart{Type: "message_start", Message: aAnswer{Type: "message", Role: "assistant", Content: []aBlock{}}}, "message_start"))
	}
	out = append(out, s.closeBlock()...)
	md := aMessageDelta{Type: "message_delta", Usage: s.cusage.anthropic()}
	md.Delta.StopReason = stopReason(s.finish)
	out = append(out, aEvent(md, "message_delta"))
	return append(out, aEvent(struct {
		Type string `json:"type"`
	}{"message_stop"}, "message_stop"))
}

// thinkingFromChat is a chat delta's reasoning as Anthropic events: its
// text into the open thinking block (opened when none is), a signature
// ending that block, a redacted block on its own.
func (s *Stream) thinkingFromChat(text *string, blocks []thinkingBlock) []wire.SSE {
	var out []wire.SSE
	open := func() {
		if s.openKind != "thinking" {
			out = append(out, s.closeBlock()...)
			empty, none := "", ""
			out = append(out, s.startBlock("thinking", aBlock{Type: "thinking", Thinking: &empty, Signature: &none}))
		}
	}
	if text != nil && *text != "" {
		open()
		t := *text
		out = append(out, aEvent(aBlockDelta{Type: "content_block_delta", Index: s.open, Delta: aDeltaOut{Type: "thinking_delta", Thinking: &t}}, "content_block_delta"))
	}
	for _, b := range blocks {
		if b.Type == "redacted_thinking" {
			out = append(out, s.closeBlock()...)
			out = append(out, s.startBlock("redacted_thinking", aBlock{Type: "redacted_thinking", Data: b.Data}))
			out = append(out, s.closeBlock()...)
			continue
		}
		open()
		if b.Thinking != "" {
			t := b.Thinking
			out = append(out, aEvent(aBlockDelta{Type: "content_block_delta", Index: s.open, Delta: aDeltaOut{Type: "thinking_delta", Thinking: &t}}, "content_block_delta"))
		}
		if b.Signature != "" {
			sig := b.Signature
			out = append(out, aEvent(aBlockDelta{Type: "content_block_delta", Index: s.open, Delta: aDeltaOut{Type: "signature_delta", Signature: &sig}}, "content_block_delta"))
			out = append(out, s.closeBlock()...)
		}
	}
	return out
}

// blockFromMessages is the chat chunks of an Anthropic content block's
// start or delta: text, a tool call's start and its argument fragments,
// thinking and its signature, a redacted thinking block.
func (s *Stream) blockFromMessages(in inEvent) []wire.SSE {
	var out []wire.SSE
	switch in.Type {
	case "content_block_start":
		if cb := in.ContentBlock; cb != nil {
			switch cb.Type {
			case "tool_use":
				k := len(s.tools)
				s.tools[in.Index] = k
				out = append(out, s.chunk(cDelta{ToolCalls: []cToolDelta{{Index: k, ID: cb.ID, Type: "function", Function: cArgsDelta{Name: cb.Name}}}}, nil))
			case "text":
				if cb.Text != "" {
					t := cb.Text
					out = append(out, s.chunk(cDelta{Content: &t}, nil))
				}
			case "thinking":
				if cb.Thinking != "" {
					t := cb.Thinking
					out = append(out, s.chunk(cDelta{ReasoningContent: &t}, nil))
				}
			case "redacted_thinking":
				out = append(out, s.chunk(cDelta{ThinkingBlocks: []thinkingBlock{{Type: "redacted_thinking", Data: cb.Data}}}, nil))
			}
		}
	case "content_block_delta":
		if d := in.Delta; d != nil {
			switch d.Type {
			case "text_delta":
				t := d.Text
				out = append(out, s.chunk(cDelta{Content: &t}, nil))
			case "input_json_delta":
				if k, ok := s.tools[in.Index]; ok && d.PartialJSON != "" {
					out = append(out, s.chunk(cDelta{ToolCalls: []cToolDelta{{Index: k, Function: cArgsDelta{Arguments: d.PartialJSON}}}}, nil))
				}
			case "thinking_delta":
				t := d.Thinking
				out = append(out, s.chunk(cDelta{ReasoningContent: &t}, nil))
			case "signature_delta":
				out = append(out, s.chunk(cDelta{ThinkingBlocks: []thinkingBlock{{Type: "thinking", Signature: d.Signature}}}, nil))
			}
		}
	}
	return out
}
