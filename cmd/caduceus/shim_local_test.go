package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// fakeLocal answers chat completions the way Ollama's and vLLM's
// OpenAI-compatible servers do, quirks included: no system_fingerprint, no
// usage in a stream unless stream_options.include_usage asks for it (and
// then in a last chunk with empty choices), no Authorization checked, and
// the model echoed as asked.
type fakeLocal struct {
	name         string
	calls        atomic.Int32
	auth         atomic.Value // the last Authorization header
	includeUsage atomic.Bool  // the last stream asked for usage
}

func (f *fakeLocal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
		// Ollama and vLLM list their models here (serve's startup check).
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[]}`)
		return
	}
	f.calls.Add(1)
	f.auth.Store(r.Header.Get("Authorization"))
	if !strings.HasSuffix(r.URL.Path, "/v1/chat/completions") {
		http.NotFound(w, r)
		return
	}
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, 400)
		return
	}
	answer := "from " + f.name
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-417","object":"chat.completion","created":1764580000,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":26,"completion_tokens":9,"total_tokens":35}}`, req.Model, answer)
		return
	}
	usage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	f.includeUsage.Store(usage)
	w.Header().Set("Content-Type", "text/event-stream")
	for i, piece := range []string{"from ", f.name} {
		delta := fmt.Sprintf(`{"content":%q}`, piece)
		if i == 0 {
			delta = fmt.Sprintf(`{"role":"assistant","content":%q}`, piece)
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-418\",\"object\":\"chat.completion.chunk\",\"created\":1764580000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":%s,\"finish_reason\":null}]}\n\n", req.Model, delta)
	}
	fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-418\",\"object\":\"chat.completion.chunk\",\"created\":1764580000,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\"},\"finish_reason\":\"stop\"}]}\n\n", req.Model)
	if usage {
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-418\",\"object\":\"chat.completion.chunk\",\"created\":1764580000,\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":26,\"completion_tokens\":9,\"total_tokens\":35}}\n\n", req.Model)
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// TestShimLocalModels: the local-models configuration docs/shim.md shows —
// routes of kind openai at Ollama's and vLLM's base URLs, no key, a price of
// 0 — serves the official OpenAI SDK through servers with those servers'
// quirks, streamed and not, and settles every turn at $0 under a budget.
func TestShimLocalModels(t *testing.T) {
	ollama, vllm := &fakeLocal{name: "ollama"}, &fakeLocal{name: "vllm"}
	conf := shimDocBlock(t, "shim-local-example")
	for from, f := range map[string]*fakeLocal{"http://127.0.0.1:11434/v1": ollama, "http://127.0.0.1:8000/v1": vllm} {
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		if !strings.Contains(conf, from) {
			t.Fatalf("the example no longer names %s", from)
		}
		conf = strings.Replace(conf, from, srv.URL+"/v1", 1)
	}
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	in := startEnv(t, noEnv, "--config", file)
	code, out, errOut := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route",
		"--models", "ollama/llama3.2,ollama/qwen2.5-coder:7b,vllm/Qwen/Qwen2.5-7B-Instruct")
	if code != 0 {
		t.Fatalf("keys create: %d %s", code, errOut)
	}
	key := strings.TrimSpace(out)
	oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))

	for model, want := range map[string]string{"llama3.2": "from ollama", "qwen2.5-coder:7b": "from ollama", "Qwen/Qwen2.5-7B-Instruct": "from vllm"} {
		resp, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("explain this stack trace")}})
		if err != nil || len(resp.Choices) != 1 || resp.Choices[0].Message.Content != want || resp.Model != model {
			t.Fatalf("%s: %v %+v", model, err, resp)
		}
		st := oc.Chat.Completions.NewStreaming(t.Context(), openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream it")}})
		var text strings.Builder
		for st.Next() {
			for _, c := range st.Current().Choices {
				text.WriteString(c.Delta.Content)
			}
		}
		if err := st.Err(); err != nil || text.String() != want {
			t.Fatalf("%s stream: %v %q", model, err, text.String())
		}
	}
	if !ollama.includeUsage.Load() || !vllm.includeUsage.Load() {
		t.Errorf("the gateway did not ask the local servers for stream usage")
	}
	if a := ollama.auth.Load(); a != "" {
		t.Errorf("a route without key_env sent Authorization %q upstream", a)
	}

	// Every turn settles at $0: the key's $1 a day is never touched.
	req, _ := http.NewRequest("GET", in.url+"/v1/spend", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	sresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var spend struct {
		Spend []struct {
			Model   string `json:"model"`
			Settled int64  `json:"settled_microdollars"`
			Open    int64  `json:"open_microdollars"`
		} `json:"spend"`
	}
	json.NewDecoder(sresp.Body).Decode(&spend)
	sresp.Body.Close()
	for _, r := range spend.Spend {
		if r.Settled != 0 || r.Open != 0 {
			t.Errorf("spend of a free local model: %+v", r)
		}
	}
	if n := ollama.calls.Load() + vllm.calls.Load(); n != 6 {
		t.Errorf("%d upstream calls, want 6", n)
	}
}
