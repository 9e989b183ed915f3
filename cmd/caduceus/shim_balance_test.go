package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// TestShimBalanceExample: the load-balancing configuration docs/shim.md
// shows, served by `caduceus serve` with its routes pointed at fake
// providers, through the official OpenAI SDK: the balanced step's two
// deployments share the requests about 3:1 and the plan's next step gets
// none; a deployment answering 503 costs three requests a failover to the
// other member and is then skipped, every request answered; a key not
// granted azure-eu/gpt-4.1 never reaches it; /v1/spend has each
// identity's attempts, settled from their usage.
func TestShimBalanceExample(t *testing.T) {
	conf, ups := balanceExampleAtFakes(t)
	file := filepath.Join(t.TempDir(), "caduceus.yaml")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"AZURE_EU_KEY": "sk-eu", "AZURE_US_KEY": "sk-us", "OPENAI_API_KEY": "sk-openai"}
	in := startEnv(t, func(k string) string { return env[k] }, "--config", file)
	mkKey := func(models string) (key, id string) {
		t.Helper()
		code, out, errOut := cli(t, "keys", "create", "--data", in.data, "--tenant", "slot-1", "--scopes", "route", "--models", models)
		if code != 0 {
			t.Fatalf("keys create: %d %s", code, errOut)
		}
		key = strings.TrimSpace(out)
		return key, strings.Split(key, "_")[1]
	}
	key, keyID := mkKey("azure-eu/gpt-4.1,azure-us/gpt-4.1,openai/gpt-4.1")
	usKey, _ := mkKey("azure-us/gpt-4.1,openai/gpt-4.1")
	ask := func(key string) string {
		t.Helper()
		oc := openai.NewClient(option.WithBaseURL(in.url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
		resp, err := oc.Chat.Completions.New(t.Context(), openai.ChatCompletionNewParams{Model: "gpt-4.1", MaxTokens: openai.Int(200),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
		if err != nil {
			t.Fatalf("chat: %v", err)
		}
		return strings.TrimPrefix(resp.Choices[0].Message.Content, "from ")
	}

	answered := map[string]int{}
	for range 200 {
		answered[ask(key)]++
	}
	if eu, us := answered["azure-eu"], answered["azure-us"]; eu+us != 200 || eu < 110 || eu > 190 {
		t.Fatalf("answered by %v; want about 150 by azure-eu and 50 by azure-us, none by openai", answered)
	}
	t.Logf("200 requests, weights 3:1: %v", answered)

	// azure-eu fails: three requests fail over to azure-us, then it is
	// skipped.
	ups["azure-eu"].fail.Store(503)
	euCalls := ups["azure-eu"].calls.Load()
	for range 40 {
		if route := ask(key); route != "azure-us" {
			t.Fatalf("azure-eu failing: answered by %s", route)
		}
		answered["azure-us"]++
	}
	if n := ups["azure-eu"].calls.Load() - euCalls; n != 3 {
		t.Fatalf("azure-eu called %d times while failing, want 3 (then unhealthy)", n)
	}

	// Not granted: never reached.
	ups["azure-eu"].fail.Store(0)
	euCalls = ups["azure-eu"].calls.Load()
	for range 20 {
		if route := ask(usKey); route != "azure-us" {
			t.Fatalf("a key without azure-eu/gpt-4.1 answered by %s", route)
		}
	}
	if ups["azure-eu"].calls.Load() != euCalls || ups["openai"].calls.Load() != 0 {
		t.Fatalf("azure-eu called %d times for a key not granted it; openai %d times", ups["azure-eu"].calls.Load()-euCalls, ups["openai"].calls.Load())
	}

	// Spend per identity: every attempt, each answer settled from its usage
	// (600 input + 400 cached + 100 output tokens: 2200 µ$), a failure at 0.
	req, _ := http.NewRequest("GET", in.url+"/v1/spend", nil)
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var spend struct {
		Spend []struct {
			KeyID    string `json:"key_id"`
			Model    string `json:"model"`
			Attempts int64  `json:"attempts"`
			Settled  int64  `json:"settled_microdollars"`
		} `json:"spend"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&spend); err != nil {
		t.Fatal(err)
	}
	got := map[string][2]int64{}
	for _, r := range spend.Spend {
		if r.KeyID == keyID {
			got[r.Model] = [2]int64{r.Attempts, r.Settled}
		}
	}
	eu, us := int64(answered["azure-eu"]), int64(answered["azure-us"])
	if got["azure-eu/gpt-4.1"] != [2]int64{eu + 3, eu * 2200} || got["azure-us/gpt-4.1"] != [2]int64{us, us * 2200} || len(got) != 2 {
		t.Fatalf("spend %v; want azure-eu %d attempts (%d answered), azure-us %d", got, eu+3, eu, us)
	}
}

// balanceExampleAtFakes is docs/shim.md's load-balancing example with its
// three routes pointed at fake providers, and the fakes by route.
func balanceExampleAtFakes(t *testing.T) (string, map[string]*fakeProvider) {
	t.Helper()
	ups := map[string]*fakeProvider{}
	conf := shimDocBlock(t, "shim-balance-example")
	for from, name := range map[string]string{"https://eu.example-azure-proxy.com/v1": "azure-eu", "https://us.example-azure-proxy.com/v1": "azure-us", "https://api.openai.com/v1": "openai"} {
		f := &fakeProvider{name: name}
		f.last.Store("")
		ups[name] = f
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		if !strings.Contains(conf, from) {
			t.Fatalf("the example no longer names %s", from)
		}
		conf = strings.Replace(conf, from, srv.URL+"/v1", 1)
	}
	return conf, ups
}
