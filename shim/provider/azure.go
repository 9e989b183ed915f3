package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

func init() { Register(azure{}) }

// KindAzure is Azure OpenAI: the OpenAI wire on an Azure resource.
const KindAzure upstream.Kind = "azure"

// DefaultAzureAPIVersion is the api-version an azure route without one
// sends (Azure OpenAI's generally available data plane version).
const DefaultAzureAPIVersion = "2024-10-21"

// azure is Azure OpenAI. base_url is the resource's endpoint
// (https://NAME.openai.azure.com); a model is served by a deployment
// (routes.NAME.deployments, else the deployment of the model's own name):
// chat completions at /openai/deployments/{deployment}/chat/completions
// and embeddings at .../embeddings; the Responses API at
// /openai/responses, its body naming the deployment as its model; every
// path with ?api-version= — as the official OpenAI SDK's azure package
// sends them. The key goes in api-key.
type azure struct{ openAI }

func (azure) Kind() upstream.Kind { return KindAzure }

// Settings implements RouteChecker.
func (azure) Settings() []string { return []string{"api_version", "deployments"} }

// DefaultBase implements RouteChecker: the resource's endpoint is given.
func (azure) DefaultBase() bool { return false }

// CheckRoute implements RouteChecker.
func (azure) CheckRoute(name string, r upstream.Route) error {
	if r.APIVersion != "" && strings.ContainsFunc(r.APIVersion, func(c rune) bool {
		return !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-')
	}) {
		return fmt.Errorf("upstream: routes.%s.api_version %q: want an Azure OpenAI api-version such as %s", name, r.APIVersion, DefaultAzureAPIVersion)
	}
	for m, d := range r.Deployments {
		if m == "" || d == "" || strings.ContainsAny(d, "/?#% ") {
			return fmt.Errorf("upstream: routes.%s.deployments[%q] %q: want a model and a deployment name", name, m, d)
		}
	}
	return nil
}

// deployment is the deployment serving model on r.
func deployment(r upstream.Route, model string) string {
	if d := r.Deployments[model]; d != "" {
		return d
	}
	return model
}

func (azure) Request(ctx context.Context, c Call) (*http.Request, error) {
	dep := deployment(c.Route, c.Model)
	version := c.Route.APIVersion
	if version == "" {
		version = DefaultAzureAPIVersion
	}
	var path string
	switch c.Path {
	case wire.ChatCompletions.Path(), wire.Embeddings.Path():
		// /openai/deployments/{deployment}/chat/completions, .../embeddings
		path = "/openai/deployments/" + url.PathEscape(dep) + strings.TrimPrefix(c.Path, "/v1")
	default:
		// The Responses API (its retrieval and cancel too), /v1/models:
		// /openai/responses..., the body naming the deployment as its model.
		if !strings.HasPrefix(c.Path, "/v1/") {
			return nil, fmt.Errorf("provider: azure serves no %s", c.Path)
		}
		path = "/openai" + strings.TrimPrefix(c.Path, "/v1")
		if c.Body != nil && c.Model != "" && dep != c.Model {
			b, err := wire.BodyOf(c.Body)
			if err != nil {
				return nil, err
			}
			c.Body = b.WithModel(dep).Raw
		}
	}
	q := url.Values{"api-version": {version}}
	c.RawQuery = q.Encode() // the client's query is OpenAI's, not Azure's
	r, err := newRequest(ctx, c, path)
	if err != nil {
		return nil, err
	}
	if c.Key != "" {
		r.Header.Set("Api-Key", c.Key)
	}
	return r, nil
}
