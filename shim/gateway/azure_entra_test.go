package gateway_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

const (
	entraTenant = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	entraClient = "0f9d7b8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
)

// fakeEntra is Microsoft Entra ID's token endpoint for one application
// (client credentials, Azure OpenAI's scope among those asked: MSAL adds
// openid, offline_access and profile, which Entra ignores here), with the tenant's OpenID
// configuration the Azure identity SDK reads first; each token it issues
// is new ("entra-tok-N", an hour long). It serves TLS, as Entra does (the
// Azure SDK takes no other), and plain HTTP (for a route's authority).
func fakeEntra(t *testing.T, secret string) (tlsSrv, plain *httptest.Server, issued func() int) {
	var mu sync.Mutex
	n := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/" + entraTenant + "/v2.0/.well-known/openid-configuration":
			fmt.Fprintf(w, `{"token_endpoint":"https://%[1]s/%[2]s/oauth2/v2.0/token","authorization_endpoint":"https://%[1]s/%[2]s/oauth2/v2.0/authorize","issuer":"https://%[1]s/%[2]s/v2.0"}`, r.Host, entraTenant)
		case "/" + entraTenant + "/oauth2/v2.0/token":
			_ = r.ParseForm()
			if r.PostForm.Get("grant_type") != "client_credentials" || r.PostForm.Get("client_id") != entraClient ||
				r.PostForm.Get("client_secret") != secret || !slices.Contains(strings.Fields(r.PostForm.Get("scope")), provider.EntraScope) {
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided."}`)
				return
			}
			mu.Lock()
			n++
			k := n
			mu.Unlock()
			fmt.Fprintf(w, `{"token_type":"Bearer","expires_in":3599,"ext_expires_in":3599,"access_token":"entra-tok-%d"}`, k)
		default:
			http.NotFound(w, r)
		}
	})
	tlsSrv, plain = httptest.NewTLSServer(h), httptest.NewServer(h)
	t.Cleanup(tlsSrv.Close)
	t.Cleanup(plain.Close)
	return tlsSrv, plain, func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// TestAzureEntraID: an azure route with entra fetches a token from its
// tenant's token endpoint with the application's secret — the exchange
// the Azure identity SDK (azidentity) makes against the same fake — and
// sends it as the bearer token the OpenAI SDK's azure package sends with
// a token credential, keeping it for the next request; a refused secret
// is the route's failure to authorize, not the caller's.
func TestAzureEntraID(t *testing.T) {
	const secret = "entra-secret-1"
	idp, idpPlain, issued := fakeEntra(t, secret)
	up, seen := fakeAzure(t)

	// The Azure SDKs against the fakes.
	cred, err := azidentity.NewClientSecretCredential(entraTenant, entraClient, secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: idp.URL + "/"},
			Transport: idp.Client()}, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{provider.EntraScope}})
	if err != nil || tok.Token != "entra-tok-1" {
		t.Fatalf("azidentity against the fake Entra: %v %+v", err, tok)
	}
	sdk := openai.NewClient(azure.WithEndpoint(up.URL, "2024-10-21"), azure.WithTokenCredential(cred), azure.WithUnsafeAllowHTTP(), option.WithMaxRetries(0))
	if _, err := sdk.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}); err != nil {
		t.Fatal(err)
	}

	sdkIssued := issued()
	t.Setenv("AZURE_CLIENT_SECRET", secret)
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"az": {Kind: provider.KindAzure, BaseURL: up.URL, Models: []string{"gpt-4.1"},
			Entra: &upstream.Entra{TenantID: entraTenant, ClientID: entraClient, ClientSecretEnv: "AZURE_CLIENT_SECRET", Authority: idpPlain.URL}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			"gpt-4.1": {{Route: "az"}}}}},
		Prices: map[string]upstream.Price{"azure/gpt-4.1": {Input: 2_000_000, Output: 8_000_000, MaxOutputTokens: 1000}},
	}
	front, results := frontFor(t, gatewayOn(t, conf, nil), wire.ChatCompletions, "azure/gpt-4.1")
	client := openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("cad_x"), option.WithMaxRetries(0))
	for range 2 {
		if _, err := client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}}); err != nil {
			t.Fatal(err)
		}
	}
	calls := seen()
	routeTok := fmt.Sprintf("Bearer entra-tok-%d", sdkIssued+1)
	if len(calls) != 3 || !strings.HasPrefix(calls[0].Auth, "Bearer entra-tok-") || calls[1].Auth != routeTok ||
		calls[2].Auth != routeTok || calls[1].Key != "" || calls[1].Path != calls[0].Path || calls[1].Query != calls[0].Query {
		t.Fatalf("Azure saw %+v (the route's token: %s)", calls, routeTok)
	}
	if issued() != sdkIssued+1 {
		t.Fatalf("Entra issued %d tokens to the route, want one it keeps", issued()-sdkIssued)
	}

	// A secret Entra refuses: the route's credential fails, with Entra's
	// reason, and nothing reaches Azure.
	t.Setenv("AZURE_CLIENT_SECRET", "wrong")
	conf.Routes["az"].Entra.ClientID = "1f9d7b8e-1c2d-4e5f-8a9b-0c1d2e3f4a5b"
	front, results = frontFor(t, gatewayOn(t, conf, nil), wire.ChatCompletions, "azure/gpt-4.1")
	client = openai.NewClient(option.WithBaseURL(front.URL+"/v1/"), option.WithAPIKey("cad_x"), option.WithMaxRetries(0))
	_, err = client.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var apiErr *openai.Error
	res := results()
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || apiErr.Code != "upstream_auth_failed" ||
		len(seen()) != 3 || len(res) != 1 || res[0].Settled != 0 {
		t.Fatalf("a refused secret: %v, Azure saw %d calls, %+v", err, len(seen()), res)
	}
	if a := res[0].Attempts; len(a) != 1 || a[0].Outcome != "auth_failed" || a[0].Status != http.StatusUnauthorized {
		t.Fatalf("attempts %+v", a)
	}
}
