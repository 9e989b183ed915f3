package translate

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Reasoning crosses the wires through chat's shape, as LiteLLM carries it
// on chat completions: an answer's message (or a stream's delta) holds
// the reasoning text in reasoning_content and each reasoning block, with
// its signature, in thinking_blocks; an assistant message sent back holds
// thinking_blocks, which go back to the upstream as its own blocks (an
// Anthropic thinking block, a Bedrock reasoningContent block, a Gemini
// part's thoughtSignature, a Responses reasoning item). A request turns
// reasoning on with Anthropic's thinking object or with reasoning_effort.

// thinkingBlock is one reasoning block in chat's shape: a thinking block
// (its text and signature) or a redacted one (its data).
type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
}

// aThinking is Anthropic's thinking request member.
type aThinking struct {
	Type         string `json:"type"`
	BudgetTokens int64  `json:"budget_tokens,omitempty"`
}

// minBudget is the smallest thinking budget Anthropic takes.
const minBudget = 1024

// effortBudgets are the thinking budgets a reasoning_effort stands for on
// a route that counts reasoning in tokens (Anthropic, Bedrock, Gemini).
var effortBudgets = map[string]int64{"low": 1024, "medium": 4096, "high": 16384, "xhigh": 32768}

// requestThinking reads a chat request's reasoning: Anthropic's thinking
// object, else reasoning_effort as a budget below maxTokens (minimal and
// none: no reasoning). nil: no reasoning asked.
func requestThinking(m map[string]json.RawMessage, maxTokens int64) (*aThinking, *Error) {
	if raw := m["thinking"]; !isNull(raw) {
		var th aThinking
		if e := decode(raw, &th, "thinking", "an object"); e != nil {
			return nil, e
		}
		switch th.Type {
		case "disabled":
			return nil, nil
		case "enabled":
			if th.BudgetTokens < minBudget {
				return nil, refuse("thinking.budget_tokens", "%d: want at least %d", th.BudgetTokens, minBudget)
			}
			return &th, nil
		case "adaptive":
			return &aThinking{Type: "adaptive"}, nil
		}
		return nil, refuse("thinking.type", "%q: want enabled, adaptive or disabled", th.Type)
	}
	raw := m["reasoning_effort"]
	if isNull(raw) {
		return nil, nil
	}
	var effort string
	if e := decode(raw, &effort, "reasoning_effort", "a string"); e != nil {
		return nil, e
	}
	if effort == "minimal" || effort == "none" {
		return nil, nil
	}
	budget, ok := effortBudgets[effort]
	if !ok {
		return nil, refuse("reasoning_effort", "%q: want none, minimal, low, medium, high or xhigh", effort)
	}
	if maxTokens > 0 {
		budget = min(budget, maxTokens-1)
	}
	if budget < minBudget {
		return nil, refuse("reasoning_effort", "%q needs a token bound above %d (max_tokens is %d)", effort, minBudget, maxTokens)
	}
	return &aThinking{Type: "enabled", BudgetTokens: budget}, nil
}

// chatThinking reads an assistant message's thinking_blocks.
func chatThinking(raw json.RawMessage, at string) ([]thinkingBlock, *Error) {
	if isNull(raw) {
		return nil, nil
	}
	var blocks []thinkingBlock
	if e := decode(raw, &blocks, at, "a list of thinking blocks"); e != nil {
		return nil, e
	}
	for i, b := range blocks {
		switch b.Type {
		case "thinking":
		case "redacted_thinking":
			if b.Data == "" {
				return nil, refuse(fmt.Sprintf("%s[%d].data", at, i), "required")
			}
		default:
			return nil, refuse(fmt.Sprintf("%s[%d].type", at, i), "%q: want thinking or redacted_thinking", b.Type)
		}
	}
	return blocks, nil
}

// anthropicThinking is thinking blocks as Anthropic's.
func anthropicThinking(blocks []thinkingBlock) []aBlock {
	var out []aBlock
	for _, b := range blocks {
		if b.Type == "redacted_thinking" {
			out = append(out, aBlock{Type: "redacted_thinking", Data: b.Data})
			continue
		}
		t, sig := b.Thinking, b.Signature
		out = append(out, aBlock{Type: "thinking", Thinking: &t, Signature: &sig})
	}
	return out
}

// reasoningOf is the reasoning text of blocks, nil when they hold none.
func reasoningOf(blocks []thinkingBlock) *string {
	var b strings.Builder
	for _, t := range blocks {
		b.WriteString(t.Thinking)
	}
	if b.Len() == 0 {
		return nil
	}
	s := b.String()
	return &s
}

// redactedPrefix marks a Responses reasoning item's encrypted_content
// that holds a redacted thinking block's data, not a signature (neither a
// signature nor the data, both base64, holds a colon).
const redactedPrefix = "redacted_thinking:"

// opaqueOf is a thinking block's opaque part: its signature, or its
// redacted data marked as such.
func opaqueOf(b thinkingBlock) string {
	if b.Type == "redacted_thinking" {
		return redactedPrefix + b.Data
	}
	return b.Signature
}

// fromOpaque is a thinking block of text and an opaque part (opaqueOf's).
func fromOpaque(text, opaque string) thinkingBlock {
	if data, ok := strings.CutPrefix(opaque, redactedPrefix); ok {
		return thinkingBlock{Type: "redacted_thinking", Data: data}
	}
	return thinkingBlock{Type: "thinking", Thinking: text, Signature: opaque}
}
