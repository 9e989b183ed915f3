package gateway_test

import (
	"context"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// TestFailoverAcrossKinds: a plan whose first step is a Gemini route and
// whose second is Claude on Bedrock fails over when Gemini answers 503:
// a chat completions, a messages and a Responses client of the official
// SDKs, whole and streamed, get Bedrock's answer in their own wire; the
// receipt's attempts name both, the failed one released and the answer
// settled at Bedrock's usage and price.
func TestFailoverAcrossKinds(t *testing.T) {
	gem, gemSeen := fakeGemini(t)
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	br, brSeen := fakeBedrock(t, creds, "us-east-1")
	claude := "anthropic.claude-sonnet-4-5-v1:0"
	price := upstream.Price{Input: 3_000_000, Output: 15_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{
			"g":  {Kind: provider.KindGemini, BaseURL: gem.URL, Models: []string{"gemini-down"}},
			"br": {Kind: provider.KindBedrock, BaseURL: br.URL, Region: "us-east-1", Models: []string{claude}},
		},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverDefinite, Models: map[string][]upstream.Step{
			"gemini-down": {{Route: "g", Translate: true}, {Route: "br", Model: claude, Translate: true}}}}},
		Prices: map[string]upstream.Price{
			"gemini/gemini-down": {Input: 1_000_000, Output: 4_000_000, MaxOutputTokens: 1000},
			"bedrock/" + claude:  price,
		},
	}
	gw := gatewayOn(t, conf, map[string]string{"g": "gk-1"})
	grants := []string{"gemini/gemini-down", "bedrock/" + claude}
	want := int64(price.Cost(upstream.Usage{Input: 11, Output: 4}))

	type run struct {
		p   wire.Protocol
		ask func(ctx context.Context, url string, stream bool) (string, error)
	}
	runs := []run{
		{wire.ChatCompletions, func(ctx context.Context, url string, stream bool) (string, error) {
			c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("cad_x"), option.WithMaxRetries(0))
			p := openai.ChatCompletionNewParams{Model: "gemini-down", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}
			if !stream {
				r, err := c.Chat.Completions.New(ctx, p)
				if err != nil {
					return "", err
				}
				return r.Choices[0].Message.Content, nil
			}
			s := c.Chat.Completions.NewStreaming(ctx, p)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if len(acc.Choices) == 0 {
				return "", s.Err()
			}
			return acc.Choices[0].Message.Content, s.Err()
		}},
		{wire.Messages, func(ctx context.Context, url string, stream bool) (string, error) {
			c := anthropic.NewClient(aoption.WithBaseURL(url), aoption.WithAPIKey("cad_x"), aoption.WithMaxRetries(0))
			p := anthropic.MessageNewParams{Model: "gemini-down", MaxTokens: 64,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
			var m anthropic.Message
			if !stream {
				r, err := c.Messages.New(ctx, p)
				if err != nil {
					return "", err
				}
				m = *r
			} else {
				s := c.Messages.NewStreaming(ctx, p)
				for s.Next() {
					if err := m.Accumulate(s.Current()); err != nil {
						return "", err
					}
				}
				if err := s.Err(); err != nil {
					return "", err
				}
			}
			if len(m.Content) == 0 {
				return "", nil
			}
			return m.Content[0].Text, nil
		}},
		{wire.Responses, func(ctx context.Context, url string, stream bool) (string, error) {
			c := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("cad_x"), option.WithMaxRetries(0))
			p := responses.ResponseNewParams{Model: "gemini-down", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}}
			if !stream {
				r, err := c.Responses.New(ctx, p)
				if err != nil {
					return "", err
				}
				return r.OutputText(), nil
			}
			s := c.Responses.NewStreaming(ctx, p)
			text := ""
			for s.Next() {
				if ev := s.Current(); ev.Type == "response.completed" {
					text = ev.AsResponseCompleted().Response.OutputText()
				}
			}
			return text, s.Err()
		}},
	}
	for _, r := range runs {
		front, results := frontFor(t, gw, r.p, grants...)
		for _, stream := range []bool{false, true} {
			text, err := r.ask(t.Context(), front.URL, stream)
			if err != nil || text != "hello" {
				t.Fatalf("%s stream %v: %q %v", r.p, stream, text, err)
			}
			res := results()[len(results())-1]
			if res.Route != "br" || len(res.Attempts) < 2 {
				t.Fatalf("%s stream %v: answered by %q after %+v", r.p, stream, res.Route, res.Attempts)
			}
			first, last := res.Attempts[0], res.Attempts[len(res.Attempts)-1]
			if first.Route != "g" || first.Outcome != "definite" || first.Status != 503 || first.Settled != 0 ||
				last.Route != "br" || last.Outcome != "answered" || last.Wire != "converse" || res.Settled != want {
				t.Fatalf("%s stream %v: attempts %+v, settled %d (want %d)", r.p, stream, res.Attempts, res.Settled, want)
			}
		}
	}
	if len(gemSeen()) < 6 || len(brSeen()) != 6 {
		t.Fatalf("Gemini saw %d calls and Bedrock %d, want each request at both", len(gemSeen()), len(brSeen()))
	}
}
