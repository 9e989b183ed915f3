package gateway_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
	"google.golang.org/genai"

	"github.com/caduceus-dev/caduceus/shim/gateway"
	"github.com/caduceus-dev/caduceus/shim/provider"
	"github.com/caduceus-dev/caduceus/shim/upstream"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// fakeGoogleToken is Google's OAuth token endpoint for a service account:
// it checks the JWT bearer assertion's signature against the account's
// public key and answers an access token; tokens counts the grants.
func fakeGoogleToken(t *testing.T, pub *rsa.PublicKey, tokens *atomic.Int64) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		parts := strings.Split(r.Form.Get("assertion"), ".")
		sig, err := base64.RawURLEncoding.DecodeString(parts[len(parts)-1])
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		if len(parts) != 3 || err != nil || rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
			http.Error(w, "bad assertion", http.StatusUnauthorized)
			return
		}
		tokens.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"ya29.fake","expires_in":3600,"token_type":"Bearer"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// serviceAccount writes a service-account key file of key whose
// token_uri is tokenURL, and returns its path.
func serviceAccount(t *testing.T, key *rsa.PrivateKey, tokenURL string) string {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "proj-1", "private_key_id": "k1",
		"private_key":  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email": "caduceus@proj-1.iam.gserviceaccount.com", "client_id": "1", "token_uri": tokenURL})
	file := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// vertexCall is what the fake Vertex AI saw of one request.
type vertexCall struct {
	Path, Query, Auth string
	Body              map[string]any
}

// fakeVertex answers Gemini models in Gemini's shape and Claude models
// (rawPredict) in Anthropic's, with usage.
func fakeVertex(t *testing.T) (*httptest.Server, func() []vertexCall) {
	var mu sync.Mutex
	var calls []vertexCall
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		mu.Lock()
		calls = append(calls, vertexCall{r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), body})
		mu.Unlock()
		switch {
		case strings.HasSuffix(r.URL.Path, ":rawPredict"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"id":"msg_v1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[{"type":"text","text":"hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":3}}`)
		case strings.HasSuffix(r.URL.Path, ":streamRawPredict"):
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range []string{
				`event: message_start` + "\n" + `data: {"type":"message_start","message":{"id":"msg_v2","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"usage":{"input_tokens":10,"output_tokens":1}}}`,
				`event: content_block_start` + "\n" + `data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`event: content_block_delta` + "\n" + `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}`,
				`event: content_block_stop` + "\n" + `data: {"type":"content_block_stop","index":0}`,
				`event: message_delta` + "\n" + `data: {"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":3}}`,
				`event: message_stop` + "\n" + `data: {"type":"message_stop"}`,
			} {
				fmt.Fprint(w, ev+"\n\n")
			}
		case strings.HasSuffix(r.URL.Path, ":generateContent"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":3,"totalTokenCount":13},"modelVersion":"gemini-2.5-pro","responseId":"r9"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, func() []vertexCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]vertexCall(nil), calls...)
	}
}

// TestVertexThroughTheSDKs: a vertex route fetches its OAuth token from
// the service account's token_uri (a signed JWT, checked) once for many
// requests, and calls Claude (rawPredict, the model in the URL, the
// anthropic_version in the body) and Gemini (generateContent) models on
// the paths the official Anthropic SDK's vertex package and Google's genai
// SDK use with the same credentials; a messages client reaches Claude as
// it is, whole and streamed, a chat client reaches both through
// translation; spend settles at the usage Vertex reports.
func TestVertexThroughTheSDKs(t *testing.T) {
	var tokens atomic.Int64
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tokenSrv := fakeGoogleToken(t, &key.PublicKey, &tokens)
	sa := serviceAccount(t, key, tokenSrv.URL+"/token")
	up, seen := fakeVertex(t)

	// The official SDKs with the same service account, at the fake.
	b, _ := os.ReadFile(sa)
	creds, err := google.CredentialsFromJSON(t.Context(), b, "https://www.googleapis.com/auth/cloud-platform")
	if err != nil {
		t.Fatal(err)
	}
	ac := anthropic.NewClient(vertex.WithCredentials(t.Context(), "us-east5", "proj-1", creds), aoption.WithBaseURL(up.URL), aoption.WithMaxRetries(0))
	if _, err := ac.Messages.New(t.Context(), anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}); err != nil {
		t.Fatalf("the Anthropic SDK on Vertex: %v", err)
	}
	gc, err := genai.NewClient(t.Context(), &genai.ClientConfig{Backend: genai.BackendVertexAI, Project: "proj-1", Location: "us-east5",
		HTTPClient:  &http.Client{Transport: &oauth2.Transport{Source: creds.TokenSource}},
		HTTPOptions: genai.HTTPOptions{BaseURL: up.URL, APIVersion: "v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := gc.Models.GenerateContent(t.Context(), "gemini-2.5-pro", genai.Text("hi"), nil); err != nil || res.Text() != "hello" {
		t.Fatalf("the Gemini SDK on Vertex: %v %+v", err, res)
	}
	sdk := seen()

	price := upstream.Price{Input: 1_000_000, Output: 2_000_000, MaxOutputTokens: 1000}
	conf := upstream.Config{
		Routes: map[string]upstream.Route{"v": {Kind: provider.KindVertex, BaseURL: up.URL, Project: "proj-1", Location: "us-east5",
			CredentialsFile: sa, Models: []string{"claude-sonnet-4-5", "gemini-2.5-pro"}}},
		Plans: map[string]upstream.Plan{"main": {Failover: upstream.FailoverNone, Models: map[string][]upstream.Step{
			"claude-sonnet-4-5": {{Route: "v", Translate: true}}, "gemini-2.5-pro": {{Route: "v", Translate: true}}}}},
		Prices: map[string]upstream.Price{"vertex/claude-sonnet-4-5": price, "vertex/gemini-2.5-pro": price},
	}
	gw := gatewayOn(t, conf, nil)
	forward := func(p wire.Protocol, body string) string {
		t.Helper()
		pr, b := parsed(t, p, body)
		rec := httptest.NewRecorder()
		res := gw.Forward(t.Context(), gateway.Writer{ResponseWriter: rec}, gateway.Request{Protocol: p, Caller: caller("vertex/claude-sonnet-4-5", "vertex/gemini-2.5-pro"),
			Parsed: pr, Body: b, Header: http.Header{"Anthropic-Version": {"2023-06-01"}}, ID: fmt.Sprintf("rct_v_%d", reqN.Add(1))})
		if res.Refusal != nil || res.Err != nil || rec.Code != 200 || !strings.Contains(rec.Body.String(), "hello") {
			t.Fatalf("%s: %+v %v %d %s", body, res.Refusal, res.Err, rec.Code, rec.Body)
		}
		if want := int64(price.Cost(upstream.Usage{Input: 10, Output: 3})); res.Settled != want {
			t.Fatalf("%s: settled %d, want %d (Vertex's usage)", body, res.Settled, want)
		}
		return rec.Body.String() + string(res.Final)
	}
	forward(wire.Messages, `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	if s := forward(wire.Messages, `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`); !strings.Contains(s, "message_stop") {
		t.Fatalf("the stream did not end: %s", s)
	}
	forward(wire.ChatCompletions, `{"model":"claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`)
	forward(wire.ChatCompletions, `{"model":"gemini-2.5-pro","messages":[{"role":"user","content":"hi"}]}`)

	got := seen()[len(sdk):]
	if len(got) != 4 {
		t.Fatalf("%d calls reached Vertex, want 4", len(got))
	}
	claudeWhole, claudeStream, chatClaude, chatGemini := got[0], got[1], got[2], got[3]
	if claudeWhole.Path != sdk[0].Path || claudeWhole.Auth != sdk[0].Auth || chatClaude.Path != sdk[0].Path || chatGemini.Path != sdk[1].Path || chatGemini.Auth != sdk[1].Auth {
		t.Fatalf("the gateway called\n%+v\n%+v\n%+v\nthe SDKs\n%+v\n%+v", claudeWhole, chatClaude, chatGemini, sdk[0], sdk[1])
	}
	if !strings.HasSuffix(claudeStream.Path, "/publishers/anthropic/models/claude-sonnet-4-5:streamRawPredict") {
		t.Fatalf("the stream went to %s", claudeStream.Path)
	}
	for _, c := range got[:3] {
		if _, ok := c.Body["model"]; ok || c.Body["anthropic_version"] != provider.VertexAnthropicVersion {
			t.Fatalf("a Claude body on Vertex: %+v", c.Body)
		}
	}
	if claudeWhole.Auth != "Bearer ya29.fake" || tokens.Load() != 2 { // one for the SDKs' credentials, one for the route's
		t.Fatalf("auth %q after %d token grants", claudeWhole.Auth, tokens.Load())
	}
}
