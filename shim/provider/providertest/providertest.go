// Package providertest holds fakes of the LLM providers' APIs — Gemini,
// Vertex AI (and Google's token endpoint), Bedrock (SigV4 checked, the
// binary event stream), Anthropic's messages API and Azure OpenAI — for
// the tests of the gateway and of serve. Each answers in its provider's
// documented shapes, whole and streamed, with usage; shim/gateway's tests
// read each with the provider's official Go SDK (TestGeminiThroughTheSDKs,
// TestVertexThroughTheSDKs, TestBedrockThroughTheSDKs,
// TestAzureSpeaksAsTheAzureSDK, TestThinkingAcrossTurnsOn*), so a fake is
// right before Caduceus is tested against it.
package providertest

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// The signatures the fakes sign their reasoning with (opaque to the
// client, checked by the upstream when it comes back).
var (
	GeminiSignature  = base64.StdEncoding.EncodeToString([]byte("sig-gemini"))
	ClaudeSignature  = "EqQBCkYIBxgCKkBclaude"
	BedrockSignature = "EqoBCkgIARABbedrock"
)

// GeminiCall is what the fake Gemini API saw of one request.
type GeminiCall struct {
	Path, Query, Key string
	Body             map[string]any
}

// Gemini is the Gemini API: generateContent and
// streamGenerateContent?alt=sse, answering text (or a function call when
// the request declares tools) with usage; a model named "gemini-missing"
// is answered 404 in Gemini's error envelope, one named "gemini-down"
// 503 (overloaded, as Gemini says it). A request with a
// thinkingConfig is answered a thought summary first, and its call (or
// its text) carries GeminiSignature, as Gemini 2.5 and 3 sign them.
func Gemini(t testing.TB) (*httptest.Server, func() []GeminiCall) {
	var seen callLog[GeminiCall]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		seen.add(GeminiCall{r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Goog-Api-Key"), body})
		if strings.Contains(r.URL.Path, "gemini-missing") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"error":{"code":404,"message":"models/gemini-missing is not found","status":"NOT_FOUND"}}`)
			return
		}
		if strings.Contains(r.URL.Path, "gemini-down") {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`)
			return
		}
		usage := `"usageMetadata":{"promptTokenCount":12,"candidatesTokenCount":5,"thoughtsTokenCount":2,"cachedContentTokenCount":4,"totalTokenCount":19}`
		last := `{"candidates":[{"content":{"role":"model","parts":[{"text":"lo"}]},"finishReason":"STOP","index":0}],` + usage + `,"modelVersion":"gemini-2.5-flash","responseId":"r1"}`
		first := `{"text":"hel"}`
		gc, _ := body["generationConfig"].(map[string]any)
		_, thinks := gc["thinkingConfig"]
		if thinks {
			first = `{"text":"Paris needs a lookup","thought":true}`
		}
		if _, ok := body["tools"]; ok {
			call := `{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}}`
			if thinks {
				call = `{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"` + GeminiSignature + `"}`
			}
			last = `{"candidates":[{"content":{"role":"model","parts":[` + call + `]},"finishReason":"STOP","index":0}],` + usage + `,"modelVersion":"gemini-2.5-flash","responseId":"r1"}`
		}
		if strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":["+first+"]},\"index\":0}],\"modelVersion\":\"gemini-2.5-flash\",\"responseId\":\"r1\"}\r\n\r\n")
			fmt.Fprint(w, "data: "+last+"\r\n\r\n")
			return
		}
		if thinks {
			last = strings.Replace(last, `"parts":[`, `"parts":[`+first+`,`, 1)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, strings.Replace(last, `"text":"lo"`, `"text":"hello"`, 1))
	}))
	t.Cleanup(srv.Close)
	return srv, seen.all
}

// BedrockCall is what the fake Bedrock saw of one request.
type BedrockCall struct {
	Path     string
	SignedOK bool
	Body     map[string]any
}

// Bedrock is Bedrock's runtime: it checks each request's SigV4
// signature by signing a copy of it again with the known credentials at
// the request's own time, and answers converse with JSON and
// converse-stream with AWS's binary event stream. A request asking a
// Claude model for thinking (additionalModelRequestFields) is answered a
// reasoning block signed BedrockSignature first.
func Bedrock(t testing.TB, creds aws.Credentials, region string) (*httptest.Server, func() []BedrockCall) {
	var seen callLog[BedrockCall]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		at, _ := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
		// The copy carries exactly the headers the request says it signed.
		check := r.Clone(context.Background())
		check.Header = http.Header{}
		_, signed, _ := strings.Cut(r.Header.Get("Authorization"), "SignedHeaders=")
		signed, _, _ = strings.Cut(signed, ",")
		for h := range strings.SplitSeq(signed, ";") {
			if h != "host" && h != "x-amz-date" {
				check.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
			}
		}
		check.ContentLength = int64(len(b))
		sum := sha256.Sum256(b)
		_ = v4.NewSigner().SignHTTP(context.Background(), creds, check, hex.EncodeToString(sum[:]), "bedrock", region, at)
		ok := sigOf(check.Header.Get("Authorization")) != "" && sigOf(check.Header.Get("Authorization")) == sigOf(r.Header.Get("Authorization"))
		seen.add(BedrockCall{r.URL.Path, ok, body})
		if !ok {
			w.Header().Set("X-Amzn-Errortype", "InvalidSignatureException")
			http.Error(w, `{"message":"The request signature we calculated does not match the signature you provided."}`, http.StatusForbidden)
			return
		}
		usage := `{"inputTokens":11,"outputTokens":4,"totalTokens":15}`
		extra, _ := body["additionalModelRequestFields"].(map[string]any)
		_, thinks := extra["thinking"]
		_, tools := body["toolConfig"]
		if strings.HasSuffix(r.URL.Path, "/converse-stream") {
			w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
			enc := eventstream.NewEncoder()
			events := [][2]string{
				{"messageStart", `{"role":"assistant"}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"hel"}}`},
				{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"lo"}}`},
				{"contentBlockStop", `{"contentBlockIndex":0}`},
				{"messageStop", `{"stopReason":"end_turn"}`},
				{"metadata", `{"usage":` + usage + `,"metrics":{"latencyMs":5}}`},
			}
			if tools {
				events[1] = [2]string{"contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather"}}}`}
				events[2] = [2]string{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\"city\":\"Paris\"}"}}}`}
				events[4] = [2]string{"messageStop", `{"stopReason":"tool_use"}`}
			}
			if thinks {
				for i := 1; i <= 3; i++ { // the text block is the second
					events[i][1] = strings.Replace(events[i][1], `"contentBlockIndex":0`, `"contentBlockIndex":1`, 1)
				}
				events = append(events[:1], append([][2]string{
					{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Look it "}}}`},
					{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"up"}}}`},
					{"contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"` + BedrockSignature + `"}}}`},
					{"contentBlockStop", `{"contentBlockIndex":0}`},
				}, events[1:]...)...)
			}
			for _, ev := range events {
				var m eventstream.Message
				m.Headers.Set(":message-type", eventstream.StringValue("event"))
				m.Headers.Set(":event-type", eventstream.StringValue(ev[0]))
				m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
				m.Payload = []byte(ev[1])
				if err := enc.Encode(w, m); err != nil {
					return
				}
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		content, stop := `[{"text":"hello"}]`, "end_turn"
		if tools {
			content, stop = `[{"toolUse":{"toolUseId":"tooluse_1","name":"get_weather","input":{"city":"Paris"}}}]`, "tool_use"
		}
		if thinks {
			content = `[{"reasoningContent":{"reasoningText":{"text":"Look it up","signature":"` + BedrockSignature + `"}}},` + content[1:]
		}
		fmt.Fprint(w, `{"output":{"message":{"role":"assistant","content":`+content+`}},"stopReason":"`+stop+`","usage":`+usage+`,"metrics":{"latencyMs":5}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, seen.all
}

// sigOf is the Signature of a SigV4 Authorization header.
func sigOf(auth string) string {
	_, sig, _ := strings.Cut(auth, "Signature=")
	return sig
}

// Claude is Anthropic's messages API: text, or a tool call when the
// request declares tools; streamed when asked; with usage. A request with
// thinking is answered a thinking block signed ClaudeSignature first.
func Claude(t testing.TB) (*httptest.Server, func() []map[string]any) {
	var seen callLog[map[string]any]
	f := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		seen.add(body)
		_, tools := body["tools"]
		_, thinks := body["thinking"]
		if body["stream"] == true {
			w.Header().Set("Content-Type", "text/event-stream")
			events := []string{
				`{"type":"message_start","message":{"id":"msg_s","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}`,
				`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hel"}}`,
				`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`,
				`{"type":"content_block_stop","index":0}`,
				`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":3}}`,
				`{"type":"message_stop"}`,
			}
			if tools {
				events[1] = `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}}`
				events[2] = `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"city\":"}}`
				events[3] = `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"\"Paris\"}"}}`
				events[5] = `{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}}`
			}
			if thinks {
				thinking := []string{
					`{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
					`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"Look it "}}`,
					`{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"up"}}`,
					`{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"` + ClaudeSignature + `"}}`,
					`{"type":"content_block_stop","index":0}`,
				}
				for i := 1; i <= 4; i++ { // the text block is the second
					events[i] = strings.Replace(events[i], `"index":0`, `"index":1`, 1)
				}
				events = append(events[:1], append(thinking, events[1:]...)...)
			}
			for _, ev := range events {
				var head struct{ Type string }
				_ = json.Unmarshal([]byte(ev), &head)
				fmt.Fprintf(w, "event: %s\ndata: %s\n\n", head.Type, ev)
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		content := `[{"type":"text","text":"hello"}]`
		stop := "end_turn"
		if tools {
			content, stop = `[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]`, "tool_use"
		}
		if thinks {
			content = `[{"type":"thinking","thinking":"Look it up","signature":"` + ClaudeSignature + `"},` + content[1:]
		}
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":%s,"stop_reason":%q,"usage":{"input_tokens":10,"output_tokens":3}}`, content, stop)
	}))
	t.Cleanup(f.Close)
	return f, seen.all
}

// AzureCall is what the fake Azure resource saw of one request.
type AzureCall struct {
	Method, Path, Query, Key, Model string
	Auth                            string // the Authorization header
}

// Azure is an Azure OpenAI resource: it records each request and
// answers a chat completion or a response ("hi"), with usage, whole or
// streamed.
func Azure(t testing.TB) (*httptest.Server, func() []AzureCall) {
	var seen callLog[AzureCall]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var in struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.Unmarshal(b, &in)
		seen.add(AzureCall{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Api-Key"), in.Model, r.Header.Get("Authorization")})
		if in.Stream {
			w.Header().Set("Content-Type", "text/event-stream")
			events := []string{
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}`,
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"x","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`,
				`[DONE]`,
			}
			if strings.HasSuffix(r.URL.Path, "/responses") {
				item := `{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi","annotations":[]}]}`
				events = []string{
					`{"type":"response.created","sequence_number":0,"response":{"id":"resp_1","object":"response","created_at":1,"status":"in_progress","model":"x","output":[]}}`,
					`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"message","id":"m1","role":"assistant","status":"in_progress","content":[]}}`,
					`{"type":"response.output_text.delta","sequence_number":2,"item_id":"m1","output_index":0,"content_index":0,"delta":"hi"}`,
					`{"type":"response.output_item.done","sequence_number":3,"output_index":0,"item":` + item + `}`,
					`{"type":"response.completed","sequence_number":4,"response":{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"x","output":[` + item + `],"usage":{"input_tokens":9,"output_tokens":4,"total_tokens":13}}}`,
				}
			}
			for _, ev := range events {
				var head struct{ Type string }
				_ = json.Unmarshal([]byte(ev), &head)
				if head.Type != "" {
					fmt.Fprintf(w, "event: %s\n", head.Type)
				}
				fmt.Fprintf(w, "data: %s\n\n", ev)
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/responses") {
			fmt.Fprint(w, `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"x","output":[{"type":"message","id":"m1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"hi","annotations":[]}]}],"usage":{"input_tokens":9,"output_tokens":4,"total_tokens":13}}`)
			return
		}
		fmt.Fprint(w, `{"id":"c1","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`)
	}))
	t.Cleanup(srv.Close)
	return srv, seen.all
}

// GoogleToken is Google's OAuth token endpoint for a service account:
// it checks the JWT bearer assertion's signature against the account's
// public key and answers an access token; tokens counts the grants.
func GoogleToken(t testing.TB, pub *rsa.PublicKey, tokens *atomic.Int64) *httptest.Server {
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

// ServiceAccount writes a service-account key file of key whose
// token_uri is tokenURL, and returns its path.
func ServiceAccount(t testing.TB, key *rsa.PrivateKey, tokenURL string) string {
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

// VertexCall is what the fake Vertex AI saw of one request.
type VertexCall struct {
	Path, Query, Auth string
	Body              map[string]any
}

// Vertex answers Gemini models in Gemini's shape (generateContent, and
// streamGenerateContent?alt=sse) and Claude models (rawPredict,
// streamRawPredict) in Anthropic's, with usage.
func Vertex(t testing.TB) (*httptest.Server, func() []VertexCall) {
	var seen callLog[VertexCall]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(b, &body)
		seen.add(VertexCall{r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), body})
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
		case strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"hel\"}]}}],\"modelVersion\":\"gemini-2.5-pro\",\"responseId\":\"r9\"}\r\n\r\n")
			fmt.Fprint(w, "data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":\"lo\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":10,\"candidatesTokenCount\":3,\"totalTokenCount\":13},\"modelVersion\":\"gemini-2.5-pro\",\"responseId\":\"r9\"}\r\n\r\n")
		case strings.HasSuffix(r.URL.Path, ":generateContent"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"candidates":[{"content":{"role":"model","parts":[{"text":"hello"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":10,"candidatesTokenCount":3,"totalTokenCount":13},"modelVersion":"gemini-2.5-pro","responseId":"r9"}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, seen.all
}

// AWSEnv sets the AWS environment a bedrock route signs with (an example
// key pair, and sessionToken, "" for none) for t, and returns it.
func AWSEnv(t testing.TB, sessionToken string) aws.Credentials {
	creds := aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: sessionToken}
	t.Setenv("AWS_ACCESS_KEY_ID", creds.AccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", creds.SecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", sessionToken)
	return creds
}

// callLog keeps what a fake saw of each request, in order, for its
// handler's goroutines and the test reading it.
type callLog[C any] struct {
	mu    sync.Mutex
	calls []C
}

func (l *callLog[C]) add(c C) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

// all is a copy of what was seen so far.
func (l *callLog[C]) all() []C {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}
