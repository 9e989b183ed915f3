//go:build !js

// The Worker (js/wasm) has no vertex kind: Google's OAuth client would add
// about 190 KB gzipped to a bundle that must stay small (docs/edge.md).

package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim/translate"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

func init() { Register(&vertex{sources: map[string]oauth2.TokenSource{}}) }

// KindVertex is Google Cloud's Vertex AI.
const KindVertex upstream.Kind = "vertex"

// VertexAnthropicVersion is the anthropic_version a Claude request on
// Vertex AI carries in its body (Vertex takes no Anthropic-Version header).
const VertexAnthropicVersion = "vertex-2023-10-16"

// vertex is Vertex AI: project, location and a service-account key file
// (credentials_file) whose OAuth token, fetched from the key's token_uri
// with golang.org/x/oauth2/google and kept until it expires, goes as a
// bearer token. Gemini models are served at
// .../publishers/google/models/{model}:generateContent
// (:streamGenerateContent?alt=sse), through translation from a chat
// client; Claude models (claude-*) at
// .../publishers/anthropic/models/{model}:rawPredict (:streamRawPredict),
// natively for a messages client, through translation from a chat
// client.
type vertex struct {
	mu      sync.Mutex
	sources map[string]oauth2.TokenSource // by credentials file
}

func (*vertex) Kind() upstream.Kind { return KindVertex }

func (*vertex) Class() contract.Provider { return "" }

// Credential implements CredentialSource: the service-account key file.
func (*vertex) Credential(r upstream.Route, _ func(string) string) (string, error) {
	if _, err := os.Stat(r.CredentialsFile); err != nil {
		return "", fmt.Errorf("credentials_file %s cannot be read: %w", r.CredentialsFile, err)
	}
	return "credentials_file " + r.CredentialsFile, nil
}

// claude reports whether model is one of Anthropic's on Vertex.
func claude(model string) bool { return strings.HasPrefix(model, "claude") }

func (*vertex) Speaks(p wire.Protocol, model string) bool { return p == wire.Messages && claude(model) }

func (*vertex) Translator(client wire.Protocol, model string) Translator {
	switch {
	case client == wire.ChatCompletions && claude(model):
		return translator{client: client, up: wire.Messages}
	case client == wire.Responses && claude(model):
		return responsesViaChat{translator{client: wire.ChatCompletions, up: wire.Messages}}
	case client == wire.Responses && model != "":
		return responsesViaChat{geminiTranslator{}}
	case client == wire.ChatCompletions && model != "":
		return geminiTranslator{}
	case client == wire.Messages && model != "":
		return viaChat{geminiTranslator{}}
	}
	return nil
}

// Settings implements RouteChecker.
func (*vertex) Settings() []string { return []string{"project", "location", "credentials_file"} }

// DefaultBase implements RouteChecker: the location's endpoint.
func (*vertex) DefaultBase() bool { return true }

// CheckRoute implements RouteChecker: project, location and
// credentials_file are required.
func (*vertex) CheckRoute(name string, r upstream.Route) error {
	switch {
	case r.Project == "":
		return fmt.Errorf("upstream: routes.%s.project is required (the Google Cloud project of a vertex route)", name)
	case r.Location == "" || strings.ContainsAny(r.Location, "/?#% "):
		return fmt.Errorf("upstream: routes.%s.location %q: want a Vertex AI location such as us-central1 or global", name, r.Location)
	case r.CredentialsFile == "":
		return fmt.Errorf("upstream: routes.%s.credentials_file is required (a service-account key, JSON)", name)
	}
	return nil
}

// base is r's base URL: its own, else the location's endpoint.
func vertexBase(r upstream.Route) string {
	switch {
	case r.BaseURL != "":
		return r.BaseURL
	case r.Location == "global":
		return "https://aiplatform.googleapis.com"
	}
	return "https://" + r.Location + "-aiplatform.googleapis.com"
}

func (v *vertex) Request(ctx context.Context, c Call) (*http.Request, error) {
	if c.Model == "" {
		return nil, fmt.Errorf("provider: vertex serves no %s", c.Path)
	}
	prefix := "/v1/projects/" + url.PathEscape(c.Route.Project) + "/locations/" + url.PathEscape(c.Route.Location) + "/publishers/"
	var path string
	c.RawQuery = ""
	if claude(c.Model) {
		path = prefix + "anthropic/models/" + url.PathEscape(c.Model) + ":rawPredict"
		if c.Stream {
			path = prefix + "anthropic/models/" + url.PathEscape(c.Model) + ":streamRawPredict"
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(c.Body, &m); err != nil {
			return nil, fmt.Errorf("provider: vertex: the messages body: %w", err)
		}
		delete(m, "model") // the model is the URL's
		m["anthropic_version"] = json.RawMessage(`"` + VertexAnthropicVersion + `"`)
		c.Body, _ = json.Marshal(m)
	} else {
		path = prefix + "google/models/" + url.PathEscape(c.Model) + ":generateContent"
		if c.Stream {
			path, c.RawQuery = prefix+"google/models/"+url.PathEscape(c.Model)+":streamGenerateContent", "alt=sse"
		}
	}
	tok, err := v.token(c.Route.CredentialsFile)
	if err != nil {
		return nil, err
	}
	c.Route.BaseURL = vertexBase(c.Route)
	r, err := newRequest(ctx, c, path)
	if err != nil {
		return nil, err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return r, nil
}

// token is the access token of the service-account key in file, fetched
// from its token_uri once and again when it expires.
func (v *vertex) token(file string) (string, error) {
	v.mu.Lock()
	ts, ok := v.sources[file]
	if !ok {
		b, err := os.ReadFile(file)
		if err != nil {
			v.mu.Unlock()
			return "", fmt.Errorf("provider: vertex: credentials_file: %w", err)
		}
		creds, err := google.CredentialsFromJSON(context.Background(), b, "https://www.googleapis.com/auth/cloud-platform")
		if err != nil {
			v.mu.Unlock()
			return "", fmt.Errorf("provider: vertex: credentials_file %s: %w", file, err)
		}
		ts = oauth2.ReuseTokenSource(nil, creds.TokenSource)
		v.sources[file] = ts
	}
	v.mu.Unlock()
	t, err := ts.Token()
	if err != nil {
		return "", tokenRefused(fmt.Errorf("provider: vertex: the OAuth token of %s: %w", file, err))
	}
	return t.AccessToken, nil
}

// Foreign: OpenAI's headers, and Anthropic's version (the body carries
// Vertex's).
func (*vertex) Foreign(k string) bool {
	return strings.HasPrefix(k, "Openai-") || k == "Anthropic-Version"
}

func (*vertex) Events(h http.Header, body io.Reader) (Events, bool) { return SSE(h, body) }

func (*vertex) Meter(up wire.Protocol) Meter {
	if up == translate.Gemini {
		return &geminiMeter{usageMeter{p: translate.Gemini}}
	}
	return &usageMeter{p: up}
}

func (*vertex) Failure(status int) (upstream.Failure, bool) { return upstream.FailureOfStatus(status) }
