package main

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/caduceus-dev/caduceus/shim/provider/providertest"
	"github.com/caduceus-dev/caduceus/shim/shimtest"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// kindModel is one model of TestShimKindsThroughServe: its identity, the
// text its fake answers, the price it is served at and the usage its
// fake reports (as the gateway meters it).
type kindModel struct {
	model, identity, text string
	price                 upstream.Price
	usage                 upstream.Usage
}

// kindsConfig is the shim of TestShimKindsThroughServe: a route of each
// new kind (Gemini, Vertex AI for Gemini and Claude, Bedrock, Azure) at
// its fake, one plan whose steps translate, and gemini-down, which fails
// over from Gemini to Claude on Bedrock.
const kindsConfig = `
shim:
  routes:
    g:   {kind: gemini, base_url: %s, key_env: GEMINI_API_KEY, models: [gemini-2.5-flash, gemini-down, gemini-missing]}
    vx:  {kind: vertex, base_url: %s, project: proj-1, location: us-central1, credentials_file: %s, models: [gemini-2.5-pro, claude-sonnet-4-5]}
    br:  {kind: bedrock, base_url: %s, region: us-east-1, models: [anthropic.claude-sonnet-4-5-v1:0]}
    az:  {kind: azure, base_url: %s, key_env: AZURE_OPENAI_API_KEY, models: [gpt-4.1]}
  plans:
    main:
      failover: definite
      models:
        gemini-2.5-flash: [{route: g, translate: true}]
        gemini-missing: [{route: g, translate: true}]
        gemini-2.5-pro: [{route: vx, translate: true}]
        claude-sonnet-4-5: [{route: vx, translate: true}]
        anthropic.claude-sonnet-4-5-v1:0: [{route: br, translate: true}]
        gpt-4.1: [{route: az, translate: true}]
        gemini-down:
          - {route: g, translate: true}
          - {route: br, model: anthropic.claude-sonnet-4-5-v1:0, translate: true}
  prices:
    gemini/gemini-2.5-flash:                  {input: 1.00, cached_input: 0.25, output: 4.00, max_output_tokens: 8192}
    gemini/gemini-missing:                    {input: 1.00, output: 4.00, max_output_tokens: 8192}
    gemini/gemini-down:                       {input: 1.00, output: 4.00, max_output_tokens: 8192}
    vertex/gemini-2.5-pro:                    {input: 1.25, output: 10.00, max_output_tokens: 8192}
    vertex/claude-sonnet-4-5:                 {input: 3.00, output: 15.00, max_output_tokens: 8192}
    bedrock/anthropic.claude-sonnet-4-5-v1:0: {input: 3.00, output: 15.00, max_output_tokens: 8192}
    azure/gpt-4.1:                            {input: 2.00, output: 8.00, max_output_tokens: 8192}
`

// TestShimKindsThroughServe: through caduceus serve, on SQLite and
// Postgres, each client wire (the official OpenAI SDK's chat completions
// and Responses API, Anthropic's messages) reaches each new kind (Gemini,
// Vertex AI's Gemini and Claude, Claude on Bedrock, Azure OpenAI), whole
// and streamed, and every read pattern of the official JavaScript SDKs
// reads a Gemini and a Bedrock route; a tool round trip with an image,
// thinking across two turns, an upstream error and a failover across
// kinds go through too; spend per identity is, to the microdollar, the
// fakes' reported usage at the configured prices.
func TestShimKindsThroughServe(t *testing.T) {
	eachStore(t, func(t *testing.T, serveArgs ...string) {
		gem, gemSeen := providertest.Gemini(t)
		vx, _ := providertest.Vertex(t)
		key, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		var tokens atomic.Int64
		sa := providertest.ServiceAccount(t, key, providertest.GoogleToken(t, &key.PublicKey, &tokens).URL+"/token")
		creds := providertest.AWSEnv(t, "")
		br, brSeen := providertest.Bedrock(t, creds, "us-east-1")
		az, _ := providertest.Azure(t)
		file := filepath.Join(t.TempDir(), "caduceus.yaml")
		conf := fmt.Sprintf(kindsConfig, gem.URL, vx.URL, sa, br.URL, az.URL)
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		env := map[string]string{"GEMINI_API_KEY": "gk-1", "AZURE_OPENAI_API_KEY": "sk-az"}
		in := startEnv(t, func(k string) string { return env[k] }, append([]string{"--config", file}, serveArgs...)...)

		claude := upstream.Price{Input: 3_000_000, Output: 15_000_000, MaxOutputTokens: 8192}
		models := []kindModel{
			{"gemini-2.5-flash", "gemini/gemini-2.5-flash", "hello", upstream.Price{Input: 1_000_000, CachedInput: 250_000, Output: 4_000_000},
				upstream.Usage{Input: 8, CachedInput: 4, Output: 7, Reasoning: 2}},
			{"gemini-2.5-pro", "vertex/gemini-2.5-pro", "hello", upstream.Price{Input: 1_250_000, Output: 10_000_000}, upstream.Usage{Input: 10, Output: 3}},
			{"claude-sonnet-4-5", "vertex/claude-sonnet-4-5", "hello", claude, upstream.Usage{Input: 10, Output: 3}},
			{"anthropic.claude-sonnet-4-5-v1:0", "bedrock/anthropic.claude-sonnet-4-5-v1:0", "hello", claude, upstream.Usage{Input: 11, Output: 4}},
			{"gpt-4.1", "azure/gpt-4.1", "hi", upstream.Price{Input: 2_000_000, Output: 8_000_000}, upstream.Usage{Input: 9, Output: 4}},
		}
		ids := []string{"gemini/gemini-down", "gemini/gemini-missing"}
		for _, m := range models {
			ids = append(ids, m.identity)
		}
		code, out, errOut := cli(t, append([]string{"keys", "create", "--tenant", "slot-1", "--scopes", "route",
			"--models", strings.Join(ids, ",")}, storeArgsOf(in, serveArgs)...)...)
		if code != 0 {
			t.Fatalf("keys create: %s", errOut)
		}
		cad := strings.TrimSpace(out)
		want := map[string]int64{} // settled per identity
		answered := map[string]int64{}

		// Every client wire, every kind, whole and streamed.
		for _, m := range models {
			for _, p := range []wire.Protocol{wire.ChatCompletions, wire.Messages, wire.Responses} {
				for _, stream := range []bool{false, true} {
					text, receipt, err := shimtest.Ask(t.Context(), in.url, cad, p, m.model, stream)
					if err != nil || text != m.text || receipt == "" {
						t.Fatalf("%s client, %s, stream %v: %q %v (receipt %q)", p, m.model, stream, text, err, receipt)
					}
					want[m.identity] += int64(m.price.Cost(m.usage))
					answered[m.identity]++
				}
			}
		}

		// Every read pattern of the JavaScript SDKs, on Gemini and Bedrock.
		for _, m := range []kindModel{models[0], models[3]} {
			reads := shimtest.ReadWithJSSDKs(t, in.url, cad, m.model, m.model, m.model)
			if len(reads) != 9 {
				t.Fatalf("%s: %d read patterns reported, want 9", m.model, len(reads))
			}
			for name, r := range reads {
				if r.Outcome != "completed" || r.Text != m.text {
					t.Errorf("%s, %s: %s %q (%s)", m.model, name, r.Outcome, r.Text, r.Message)
				}
				want[m.identity] += int64(m.price.Cost(m.usage))
				answered[m.identity]++
			}
		}

		// A tool round trip with an image, chat client to Gemini: the call
		// comes back as a tool call, the image went as inline data, the
		// result goes back as a functionResponse.
		oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(cad), option.WithMaxRetries(0))
		weather := openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather",
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})
		msgs := []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
			openai.TextContentPart("What is the weather where this was taken?"),
			openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: "data:image/png;base64," + pngB64})})}
		params := openai.ChatCompletionNewParams{Model: "gemini-2.5-flash", Messages: msgs, Tools: []openai.ChatCompletionToolUnionParam{weather}}
		r, err := oc.Chat.Completions.New(t.Context(), params)
		if err != nil || len(r.Choices[0].Message.ToolCalls) != 1 || r.Choices[0].Message.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
			t.Fatalf("tool call: %v %+v", err, r)
		}
		params.Messages = append(params.Messages, r.Choices[0].Message.ToParam(), openai.ToolMessage("sunny", r.Choices[0].Message.ToolCalls[0].ID))
		params.Tools = nil
		if _, err := oc.Chat.Completions.New(t.Context(), params); err != nil {
			t.Fatalf("the tool's result: %v", err)
		}
		want["gemini/gemini-2.5-flash"] += 2 * int64(models[0].price.Cost(models[0].usage))
		answered["gemini/gemini-2.5-flash"] += 2
		calls := gemSeen()
		first, _ := json.Marshal(calls[len(calls)-2].Body["contents"])
		second, _ := json.Marshal(calls[len(calls)-1].Body["contents"])
		if !strings.Contains(string(first), `"inlineData":{"data":"`+pngB64+`","mimeType":"image/png"}`) ||
			!strings.Contains(string(second), `"functionResponse":{"name":"get_weather","response":{"content":"sunny"}}`) {
			t.Fatalf("Gemini saw %s then %s", first, second)
		}

		// Thinking across two turns: an Anthropic client on Claude on
		// Bedrock gets the signed reasoning and sends it back.
		ac := anthropic.NewClient(aoption.WithBaseURL(in.url), aoption.WithAPIKey(cad), aoption.WithMaxRetries(0))
		ask := anthropic.MessageNewParams{Model: "anthropic.claude-sonnet-4-5-v1:0", MaxTokens: 4096, Thinking: anthropic.ThinkingConfigParamOfEnabled(2048),
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
		m1, err := ac.Messages.New(t.Context(), ask)
		if err != nil || len(m1.Content) != 2 || m1.Content[0].Signature != providertest.BedrockSignature {
			t.Fatalf("thinking: %v %+v", err, m1)
		}
		ask.Messages = append(ask.Messages, m1.ToParam(), anthropic.NewUserMessage(anthropic.NewTextBlock("and?")))
		if _, err := ac.Messages.New(t.Context(), ask); err != nil {
			t.Fatal(err)
		}
		want[models[3].identity] += 2 * int64(models[3].price.Cost(models[3].usage))
		answered[models[3].identity] += 2
		if last, _ := json.Marshal(brSeen()[len(brSeen())-1].Body["messages"]); !strings.Contains(string(last), `"signature":"`+providertest.BedrockSignature+`"`) {
			t.Fatalf("the second turn reached Bedrock as %s", last)
		}

		// An upstream error in the client's envelope: Gemini's 404.
		_, _, err = shimtest.Ask(t.Context(), in.url, cad, wire.Messages, "gemini-missing", false)
		var aerr *anthropic.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != 404 || !strings.Contains(aerr.Error(), "is not found") {
			t.Fatalf("Gemini's 404 reached an Anthropic client as %v", err)
		}

		// A failover across kinds: Gemini 503, answered by Bedrock.
		text, receipt, err := shimtest.Ask(t.Context(), in.url, cad, wire.Responses, "gemini-down", true)
		if err != nil || text != "hello" {
			t.Fatalf("failover: %q %v", text, err)
		}
		want[models[3].identity] += int64(models[3].price.Cost(models[3].usage))
		answered[models[3].identity]++
		var rc map[string]any
		_, list := in.do(t, "GET", "/v1/receipts?limit=200", cad, nil)
		for _, r := range list["receipts"].([]any) {
			if m := r.(map[string]any); m["id"] == receipt {
				rc = m
			}
		}
		if rc == nil {
			t.Fatalf("receipt %s not listed", receipt)
		}
		atts, _ := rc["spend"].(map[string]any)["attempts"].([]any)
		if len(atts) < 2 || atts[0].(map[string]any)["outcome"] != "definite" || atts[len(atts)-1].(map[string]any)["route"] != "br" ||
			rc["upstream_wire"] != "converse" {
			t.Fatalf("failover receipt %v", rc)
		}

		// Spend per identity: the fakes' usage at the prices, exactly.
		_, sp := in.do(t, "GET", "/v1/spend?key="+strings.Split(cad, "_")[1], cad, nil)
		got := map[string]int64{}
		for _, r := range sp["spend"].([]any) {
			m := r.(map[string]any)
			got[m["model"].(string)] = int64(m["settled_microdollars"].(float64))
		}
		for id, w := range want {
			if got[id] != w {
				t.Errorf("%s settled %d µ$ over %d answers, want %d", id, got[id], answered[id], w)
			}
		}
	})
}
