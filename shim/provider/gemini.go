//go:build !js

// The Worker (js/wasm) has no gemini kind: its routes are the Open plan of
// its openai and anthropic upstreams (upstream.Open), so no route of it
// can name this kind, and leaving it out keeps its code and the
// translations only it uses out of the bundle (docs/edge.md).

package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/translate"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

func init() {
	Register(gemini{})
	deltaKeys[translate.Gemini] = [][]byte{[]byte(`"text":"`)}
}

// KindGemini is Google AI Studio's Gemini API.
const KindGemini upstream.Kind = "gemini"

// gemini is the Gemini API (generativelanguage.googleapis.com): a model's
// answer at POST {base_url}/v1beta/models/{model}:generateContent, its
// stream at :streamGenerateContent?alt=sse, the key in x-goog-api-key. It
// speaks no client's wire: a chat completions client reaches it through
// translation (translate: true on the step).
type gemini struct{}

func (gemini) Kind() upstream.Kind { return KindGemini }

// Class: the HUX provider enum (seed 002) names no Gemini class.
func (gemini) Class() contract.Provider { return "" }

// GeminiBase is the Gemini API's base URL, a route's when it names none.
const GeminiBase = "https://generativelanguage.googleapis.com"

// Settings, DefaultBase and CheckRoute implement RouteChecker: a gemini
// route has no settings of its own, and a default base_url.
func (gemini) Settings() []string                      { return nil }
func (gemini) DefaultBase() bool                       { return true }
func (gemini) CheckRoute(string, upstream.Route) error { return nil }

func (gemini) Speaks(wire.Protocol, string) bool { return false }

func (gemini) Translator(client wire.Protocol, _ string) Translator {
	switch client {
	case wire.ChatCompletions:
		return geminiTranslator{}
	case wire.Messages:
		return viaChat{geminiTranslator{}}
	case wire.Responses:
		return responsesViaChat{geminiTranslator{}}
	}
	return nil
}

func (gemini) Request(ctx context.Context, c Call) (*http.Request, error) {
	var path string
	switch {
	case c.Path == translate.Gemini.Path() && c.Model != "":
		path = "/v1beta/models/" + url.PathEscape(c.Model) + ":generateContent"
		c.RawQuery = ""
		if c.Stream {
			path, c.RawQuery = "/v1beta/models/"+url.PathEscape(c.Model)+":streamGenerateContent", "alt=sse"
		}
	case c.Path == "/v1/models":
		path, c.RawQuery = "/v1beta/models", ""
	default:
		return nil, fmt.Errorf("provider: gemini serves no %s", c.Path)
	}
	if c.Route.BaseURL == "" {
		c.Route.BaseURL = GeminiBase
	}
	r, err := newRequest(ctx, c, path)
	if err != nil {
		return nil, err
	}
	if c.Key != "" {
		r.Header.Set("X-Goog-Api-Key", c.Key)
	}
	return r, nil
}

// Foreign: every OpenAI and Anthropic header is another API's.
func (gemini) Foreign(k string) bool {
	return strings.HasPrefix(k, "Openai-") || strings.HasPrefix(k, "Anthropic-")
}

func (gemini) Events(h http.Header, body io.Reader) (Events, bool) { return SSE(h, body) }

func (gemini) Meter(wire.Protocol) Meter { return &geminiMeter{usageMeter{p: translate.Gemini}} }

func (gemini) Failure(status int) (upstream.Failure, bool) { return upstream.FailureOfStatus(status) }

// geminiTranslator carries a chat completions client to Gemini.
type geminiTranslator struct{}

func (geminiTranslator) Upstream() wire.Protocol { return translate.Gemini }

func (geminiTranslator) Request(body []byte, model string, maxTokens int64) ([]byte, error) {
	return translate.ChatToGemini(body, translate.Options{Model: model, MaxTokens: maxTokens})
}

func (geminiTranslator) Answer(body []byte, created int64) ([]byte, error) {
	return translate.GeminiToChat(body, created)
}

func (geminiTranslator) ErrorAnswer(status int, body []byte) []byte {
	return translate.GeminiError(status, body)
}

func (geminiTranslator) Stream(includeUsage bool, created int64) Stream {
	return translate.NewGeminiStream(includeUsage, created)
}

// geminiMeter reads a Gemini answer's usageMetadata: the prompt less its
// cached tokens as input, the candidates and thoughts as output (Gemini
// bills thoughts as output), thoughts as reasoning. A stream's chunks
// carry the counts so far; the one with a finishReason, the whole.
type geminiMeter struct{ usageMeter }

func (m *geminiMeter) Observe(data []byte) bool {
	if !bytes.Contains(data, []byte(`"usageMetadata"`)) {
		return false
	}
	var d struct {
		UsageMetadata *translate.GeminiUsage `json:"usageMetadata"`
		Candidates    []struct {
			FinishReason string `json:"finishReason"`
		} `json:"candidates"`
	}
	if json.Unmarshal(data, &d) != nil || d.UsageMetadata == nil {
		return false
	}
	g := d.UsageMetadata
	u := upstream.Usage{Input: g.PromptTokenCount - g.CachedContentTokenCount, CachedInput: g.CachedContentTokenCount,
		Output: g.CandidatesTokenCount + g.ThoughtsTokenCount, Reasoning: g.ThoughtsTokenCount}
	m.u.Input = max(m.u.Input, u.Input)
	m.u.CachedInput = max(m.u.CachedInput, u.CachedInput)
	m.u.Output = max(m.u.Output, u.Output)
	m.u.Reasoning = max(m.u.Reasoning, u.Reasoning)
	m.seen = true
	m.final = m.final || len(d.Candidates) > 0 && d.Candidates[0].FinishReason != ""
	return false
}
