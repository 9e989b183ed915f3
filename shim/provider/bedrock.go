//go:build !js

// The Worker (js/wasm) has no bedrock kind: the AWS signer and event
// stream would add about 100 KB gzipped to its bundle (docs/edge.md).

package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/translate"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

func init() {
	Register(bedrock{})
	deltaKeys[translate.Converse] = [][]byte{[]byte(`"text":"`), []byte(`"input":"`)}
}

// KindBedrock is Amazon Bedrock's Converse API.
const KindBedrock upstream.Kind = "bedrock"

// bedrock is Amazon Bedrock: region (base_url by default
// https://bedrock-runtime.{region}.amazonaws.com), a model's answer at
// POST /model/{modelId}/converse, its stream at /converse-stream (AWS's
// binary event stream, read with the AWS SDK's eventstream package), every
// request signed with SigV4 (the AWS SDK's signer) by the credentials of
// the process's AWS environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN). No client speaks Converse: a chat client is
// translated, a messages or Responses client through chat's shape.
type bedrock struct{}

func (bedrock) Kind() upstream.Kind { return KindBedrock }

// Class: Bedrock serves many vendors' models; the HUX enum has no class
// for it.
func (bedrock) Class() contract.Provider { return "" }

func (bedrock) Settings() []string { return []string{"region"} }
func (bedrock) DefaultBase() bool  { return true }

func (bedrock) CheckRoute(name string, r upstream.Route) error {
	if r.Region == "" || strings.ContainsAny(r.Region, "/?#% ") {
		return fmt.Errorf("upstream: routes.%s.region %q: want an AWS region such as us-east-1", name, r.Region)
	}
	return nil
}

// Credential implements CredentialSource: the AWS environment.
func (bedrock) Credential(_ upstream.Route, getenv func(string) string) (string, error) {
	if _, err := BedrockCredentials(getenv); err != nil {
		return "", err
	}
	return "the AWS environment (AWS_ACCESS_KEY_ID)", nil
}

func (bedrock) Speaks(wire.Protocol, string) bool { return false }

func (bedrock) Translator(client wire.Protocol, _ string) Translator {
	switch client {
	case wire.ChatCompletions:
		return converseTranslator{}
	case wire.Messages:
		return viaChat{converseTranslator{}}
	case wire.Responses:
		return responsesViaChat{converseTranslator{}}
	}
	return nil
}

// BedrockCredentials are the AWS credentials of the environment getenv
// reads.
func BedrockCredentials(getenv func(string) string) (aws.Credentials, error) {
	c := aws.Credentials{AccessKeyID: getenv("AWS_ACCESS_KEY_ID"), SecretAccessKey: getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: getenv("AWS_SESSION_TOKEN"), Source: "environment"}
	if c.AccessKeyID == "" || c.SecretAccessKey == "" {
		return c, fmt.Errorf("provider: bedrock: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set")
	}
	return c, nil
}

func (bedrock) Request(ctx context.Context, c Call) (*http.Request, error) {
	if c.Path != translate.Converse.Path() || c.Model == "" {
		return nil, fmt.Errorf("provider: bedrock serves no %s", c.Path)
	}
	path := "/model/" + url.PathEscape(c.Model) + "/converse"
	if c.Stream {
		path += "-stream"
	}
	if c.Route.BaseURL == "" {
		c.Route.BaseURL = "https://bedrock-runtime." + c.Route.Region + ".amazonaws.com"
	}
	c.RawQuery = ""
	r, err := newRequest(ctx, c, path)
	if err != nil {
		return nil, err
	}
	creds, err := BedrockCredentials(os.Getenv)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(c.Body)
	if err := v4.NewSigner().SignHTTP(ctx, creds, r, hex.EncodeToString(sum[:]), "bedrock", c.Route.Region, time.Now()); err != nil {
		return nil, fmt.Errorf("provider: bedrock: signing: %w", err)
	}
	return r, nil
}

// Foreign: every OpenAI and Anthropic header is another API's.
func (bedrock) Foreign(k string) bool {
	return strings.HasPrefix(k, "Openai-") || strings.HasPrefix(k, "Anthropic-")
}

// Events reads the AWS event stream of a converse-stream answer, each
// message an event named by its :event-type; an exception message ends
// the stream as broken off.
func (bedrock) Events(h http.Header, body io.Reader) (Events, bool) {
	if !strings.HasPrefix(h.Get("Content-Type"), "application/vnd.amazon.eventstream") {
		return nil, false
	}
	return &awsEvents{r: body, dec: eventstream.NewDecoder()}, true
}

type awsEvents struct {
	r   io.Reader
	dec *eventstream.Decoder
}

func (e *awsEvents) Next() (wire.SSE, error) {
	m, err := e.dec.Decode(e.r, nil)
	if err != nil {
		if err == io.EOF {
			return wire.SSE{}, io.EOF
		}
		return wire.SSE{}, fmt.Errorf("provider: bedrock: the event stream: %w", err)
	}
	header := func(k string) string {
		if v := m.Headers.Get(k); v != nil {
			return v.String()
		}
		return ""
	}
	if t := header(":message-type"); t != "event" {
		return wire.SSE{}, fmt.Errorf("provider: bedrock: the stream's %s %s: %s", t, header(":exception-type"), m.Payload)
	}
	return wire.SSE{Name: header(":event-type"), Data: m.Payload}, nil
}

func (bedrock) Meter(wire.Protocol) Meter { return &converseMeter{usageMeter{p: translate.Converse}} }

func (bedrock) Failure(status int) (upstream.Failure, bool) { return upstream.FailureOfStatus(status) }

// converseTranslator carries a chat completions client to Converse.
type converseTranslator struct{}

func (converseTranslator) Upstream() wire.Protocol { return translate.Converse }

func (converseTranslator) Request(body []byte, model string, maxTokens int64) ([]byte, error) {
	return translate.ChatToConverse(body, translate.Options{Model: model, MaxTokens: maxTokens})
}

func (converseTranslator) Answer(body []byte, created int64) ([]byte, error) {
	return translate.ConverseToChat(body, created)
}

func (converseTranslator) ErrorAnswer(status int, body []byte) []byte {
	return translate.ConverseError(status, "", body)
}

func (converseTranslator) Stream(includeUsage bool, created int64) Stream {
	return translate.NewConverseStream(includeUsage, created)
}

// converseMeter reads Converse's usage: a whole answer's, a stream's
// metadata event's.
type converseMeter struct{ usageMeter }

func (m *converseMeter) Observe(data []byte) bool {
	if !strings.Contains(string(data), `"usage"`) {
		return false
	}
	var d struct {
		Usage *translate.ConverseUsage `json:"usage"`
	}
	if json.Unmarshal(data, &d) != nil || d.Usage == nil {
		return false
	}
	u := d.Usage
	m.u = upstream.Usage{Input: u.InputTokens, CachedInput: u.CacheReadInputTokens, CacheWrite: u.CacheWriteInputTokens, Output: u.OutputTokens}
	m.seen, m.final = true, true
	return false
}
