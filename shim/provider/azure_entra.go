//go:build !js

// The Worker (js/wasm) has no Entra ID: its azure routes take an api-key.

package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/caduceus-dev/caduceus/shim/upstream"
)

func init() { entraToken = entra.token }

// EntraAuthority is the authority of Microsoft Entra ID's global cloud.
const EntraAuthority = "https://login.microsoftonline.com"

// EntraScope is the scope of an Azure OpenAI token.
const EntraScope = "https://cognitiveservices.azure.com/.default"

// entraSources are the token sources of the Entra applications of azure
// routes, by authority, tenant and client: a token is fetched with the
// client-credentials grant (golang.org/x/oauth2/clientcredentials) and
// kept until shortly before it expires.
type entraSources struct {
	mu      sync.Mutex
	sources map[upstream.Entra]oauth2.TokenSource
}

var entra = &entraSources{sources: map[upstream.Entra]oauth2.TokenSource{}}

// entraClient fetches tokens: bounded, whatever the request's deadline.
var entraClient = &http.Client{Timeout: 30 * time.Second}

func (s *entraSources) token(e upstream.Entra) (string, error) {
	s.mu.Lock()
	ts, ok := s.sources[e]
	if !ok {
		authority := strings.TrimSuffix(e.Authority, "/")
		if authority == "" {
			authority = EntraAuthority
		}
		secret := os.Getenv(e.ClientSecretEnv)
		if secret == "" {
			s.mu.Unlock()
			return "", fmt.Errorf("provider: azure: entra.client_secret_env %s is empty", e.ClientSecretEnv)
		}
		cc := clientcredentials.Config{ClientID: e.ClientID, ClientSecret: secret, Scopes: []string{EntraScope},
			TokenURL: authority + "/" + url.PathEscape(e.TenantID) + "/oauth2/v2.0/token", AuthStyle: oauth2.AuthStyleInParams}
		ts = cc.TokenSource(context.WithValue(context.Background(), oauth2.HTTPClient, entraClient))
		s.sources[e] = ts
	}
	s.mu.Unlock()
	t, err := ts.Token()
	if err != nil {
		return "", tokenRefused(fmt.Errorf("provider: azure: the Entra ID token of application %s: %w", e.ClientID, err))
	}
	return t.AccessToken, nil
}

// tokenRefused is err as a CredentialRefused when a token endpoint
// answered it with a 4xx (the credential refused), else err (a token
// endpoint unreachable or failing: the route's credential is not known
// bad).
func tokenRefused(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500 {
		return &CredentialRefused{Status: re.Response.StatusCode, Body: re.Body, Err: err}
	}
	return err
}
