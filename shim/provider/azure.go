//go:build !js

// The Worker (js/wasm) has no azure kind: its routes are the Open plan of
// its openai and anthropic upstreams (upstream.Open), so no route of it
// can name this kind, and leaving it out keeps its code and the
// translations only it uses out of the bundle (docs/edge.md).

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
// sends them. The key goes in api-key, or, with entra, a Microsoft Entra
// ID token as a bearer token (azure_entra.go).
type azure struct{ openAI }

func (azure) Kind() upstream.Kind { return KindAzure }

// Settings implements RouteChecker.
func (azure) Settings() []string { return []string{"api_version", "deployments", "entra"} }

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
	if e := r.Entra; e != nil {
		switch {
		case entraToken == nil:
			return fmt.Errorf("upstream: routes.%s.entra: Entra ID is not in this build (the Worker's): use key_env", name)
		case r.KeyEnv != "":
			return fmt.Errorf("upstream: routes.%s: key_env and entra both set: an azure route authorizes with one", name)
		case !guid(e.TenantID) && !strings.HasSuffix(e.TenantID, ".onmicrosoft.com"):
			return fmt.Errorf("upstream: routes.%s.entra.tenant_id %q: want the directory's id (a GUID) or its NAME.onmicrosoft.com domain", name, e.TenantID)
		case !guid(e.ClientID):
			return fmt.Errorf("upstream: routes.%s.entra.client_id %q: want the application's client id (a GUID)", name, e.ClientID)
		case e.ClientSecretEnv == "":
			return fmt.Errorf("upstream: routes.%s.entra.client_secret_env is required (the variable holding the application's secret)", name)
		case e.Authority != "" && !strings.HasPrefix(e.Authority, "https://") && !strings.HasPrefix(e.Authority, "http://"):
			return fmt.Errorf("upstream: routes.%s.entra.authority %q: want an http(s) URL", name, e.Authority)
		}
	}
	return nil
}

// guid reports whether s is a GUID (8-4-4-4-12 hexadecimal digits).
func guid(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return false
			}
		case !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'):
			return false
		}
	}
	return true
}

// Credential implements CredentialSource: the Entra ID application, or
// key_env.
func (azure) Credential(r upstream.Route, getenv func(string) string) (string, error) {
	if e := r.Entra; e != nil {
		if getenv(e.ClientSecretEnv) == "" {
			return "", fmt.Errorf("entra.client_secret_env %s is empty", e.ClientSecretEnv)
		}
		return "Entra ID application " + e.ClientID + " of tenant " + e.TenantID + " (secret in " + e.ClientSecretEnv + ")", nil
	}
	switch {
	case r.KeyEnv == "":
		return "", fmt.Errorf("neither key_env nor entra is set")
	case getenv(r.KeyEnv) == "":
		return "", fmt.Errorf("key_env %s is empty", r.KeyEnv)
	}
	return r.KeyEnv, nil
}

// entraToken is the Entra ID token of an application (nil: not in this
// build).
var entraToken func(upstream.Entra) (string, error)

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
	if e := c.Route.Entra; e != nil {
		tok, err := entraToken(*e)
		if err != nil {
			return nil, err
		}
		r.Header.Set("Authorization", "Bearer "+tok)
	} else if c.Key != "" {
		r.Header.Set("Api-Key", c.Key)
	}
	return r, nil
}
