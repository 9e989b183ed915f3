package shim_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/shim"
	"github.com/caduceus-dev/caduceus/shim/wire"
)

// classifierServer answers every classification with content.
func classifierServer(t *testing.T, content *string, delay time.Duration) *upstream {
	u := newUpstream(t)
	u.respond = func(w http.ResponseWriter, r *http.Request, body []byte) {
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"choices": []any{map[string]any{"message": map[string]any{"role": "assistant", "content": *content}}}})
		_, _ = w.Write(b)
	}
	return u
}

const mmProv = `{"id":"MM","triggers":{"micromodel":{"model":"tiny-classifier","question":"Is the user asking about billing?","min_confidence":0.7}},
	"action":"respond_directly","response":{"text":"classifier fired"}}`

func TestMalformedClassifierReplies(t *testing.T) {
	content := ""
	cls := classifierServer(t, &content, 0)
	e := newEnv(t, func(c *shim.Config) { c.Classifier = &shim.ChatClassifier{BaseURL: cls.URL + "/v1", APIKey: "ck"} })
	e.provision(t, "key-a", mmProv)
	cases := []struct {
		reply  string
		fires  bool
		reason string
	}{
		{`{"apply":true,"confidence":0.9}`, true, ""},
		{`{"apply":true,"confidence":0.5}`, false, ""}, // below min_confidence: a plain no
		{`{"apply":false,"confidence":0.99}`, false, ""},
		{`{"apply":"yes","confidence":0.9}`, false, "micromodel_malformed"},
		{`{"apply":true,"confidence":1.2}`, false, "micromodel_malformed"},
		{`{"apply":true}`, false, "micromodel_malformed"},
		{"```json\n{\"apply\":true,\"confidence\":0.9}\n```", false, "micromodel_malformed"},
		{`Sure! {"apply":true,"confidence":0.9}`, false, "micromodel_malformed"},
		{`{"apply":true,"confidence":"NaN"}`, false, "micromodel_malformed"},
	}
	for _, c := range cases {
		content = c.reply
		before := e.up.calls()
		res, err := call(t, e, "key-a", wire.ChatCompletions, false, "gpt-4o", "why was my card charged twice", nil)
		if err != nil {
			t.Fatal(err)
		}
		if fired := res.text == "classifier fired"; fired != c.fires {
			t.Fatalf("reply %q: fired=%v", c.reply, fired)
		}
		if !c.fires && e.up.calls() != before+1 {
			t.Fatalf("reply %q: not forwarded", c.reply)
		}
		r := e.receipts(t, "key-a")[0]
		got := ""
		for _, s := range r.Skipped {
			got = s.Reason
		}
		if got != c.reason {
			t.Fatalf("reply %q: skip reason %q, want %q", c.reply, got, c.reason)
		}
	}
	last := cls.last(t)
	if last.Header.Get("Authorization") != "Bearer ck" || !strings.Contains(string(last.Body), "tiny-classifier") || last.Path != "/v1/chat/completions" {
		t.Fatalf("classifier request %s %v %s", last.Path, last.Header, last.Body)
	}
}

// In mode any a tier-1 hit fires without asking the classifier; the
// classifier is asked only when tiers 1 and 2 miss.
func TestTier1ShortCircuitsClassifier(t *testing.T) {
	content := `{"apply":true,"confidence":0.95}`
	cls := classifierServer(t, &content, 0)
	e := newEnv(t, func(c *shim.Config) { c.Classifier = &shim.ChatClassifier{BaseURL: cls.URL} })
	e.provision(t, "key-a", `{"id":"BOTH","triggers":{"mode":"any","keyword":{"any":["invoice"]},
		"micromodel":{"model":"tiny","question":"billing?"}},"action":"respond_directly","response":{"text":"billing help"}}`)
	res, _ := call(t, e, "key-a", wire.Messages, false, "claude-x", "where is my invoice", nil)
	if res.text != "billing help" || cls.calls() != 0 {
		t.Fatalf("keyword hit: %q, classifier calls %d (want 0)", res.text, cls.calls())
	}
	if r := e.receipts(t, "key-a")[0]; r.Fired[0].Tier != 1 {
		t.Fatalf("fired %+v", r.Fired)
	}
	res, _ = call(t, e, "key-a", wire.Messages, false, "claude-x", "why was my card charged twice", nil)
	if res.text != "billing help" || cls.calls() != 1 {
		t.Fatalf("classifier path: %q, calls %d", res.text, cls.calls())
	}
	if r := e.receipts(t, "key-a")[0]; r.Fired[0].Tier != 3 || r.Fired[0].Confidence == nil || *r.Fired[0].Confidence != 0.95 {
		t.Fatalf("fired %+v", r.Fired)
	}
}

func TestBudgetBoundsClassifier(t *testing.T) {
	content := `{"apply":true,"confidence":0.95}`
	cls := classifierServer(t, &content, 2*time.Second)
	e := newEnv(t, func(c *shim.Config) {
		c.Classifier = &shim.ChatClassifier{BaseURL: cls.URL}
		c.Budget = 50 * time.Millisecond
	})
	e.provision(t, "key-a", mmProv)
	start := time.Now()
	res, err := call(t, e, "key-a", wire.ChatCompletions, false, "gpt-4o", "billing question", nil)
	if err != nil || res.text != upstreamText {
		t.Fatalf("%q %v", res.text, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the budget did not bound the classifier: %v", d)
	}
	if r := e.receipts(t, "key-a")[0]; len(r.Skipped) != 1 || r.Skipped[0].Reason != "budget_exhausted" {
		t.Fatalf("skipped %+v", r.Skipped)
	}
}

func TestContributorClassifierRefused(t *testing.T) {
	content := `{"apply":true,"confidence":0.95}`
	cls := classifierServer(t, &content, 0)
	e := newEnv(t, func(c *shim.Config) { c.Classifier = &shim.ChatClassifier{BaseURL: cls.URL} })
	storeContributorProv(t, e) // the write paths refuse it (TestProvisionWritesRefuseContributorModels)
	if res, _ := call(t, e, "key-a", wire.ChatCompletions, false, "gpt-4o", "billing", nil); res.text != upstreamText || cls.calls() != 0 {
		t.Fatalf("contributor classifier was asked (%d calls) or fired (%q)", cls.calls(), res.text)
	}
}

func TestSemanticParaphraseThroughProxy(t *testing.T) {
	e := newEnv(t, nil) // default: the local embedder
	e.context(t, "key-a", `{"ref":"verb:deploy","kind":"verb","title":"Deploy guide","body":"`+deployBody+`"}`)
	e.provision(t, "key-a", `{"id":"SEM","triggers":{"semantic":{"examples":["ship this to prod"]}},"action":"shim","context_refs":["verb:deploy"]}`)
	if _, err := call(t, e, "key-a", wire.Responses, false, "gpt-5", "push the release out to production", nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(e.up.last(t).Body), "caduceus-shim") {
		t.Fatal("paraphrase not shimmed")
	}
	r := e.receipts(t, "key-a")[0]
	if len(r.Fired) != 1 || r.Fired[0].Tier != 2 || !strings.HasPrefix(r.Fired[0].Reason, "semantic:") {
		t.Fatalf("fired %+v", r.Fired)
	}
	if _, err := call(t, e, "key-a", wire.Responses, false, "gpt-5", "a recipe for banana bread", nil); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(e.up.last(t).Body), "caduceus-shim") {
		t.Fatal("unrelated text shimmed")
	}
}

func TestOpenAIEmbedderAndCache(t *testing.T) {
	emb := newUpstream(t)
	emb.respond = func(w http.ResponseWriter, r *http.Request, body []byte) {
		var in struct{ Input []string }
		_ = json.Unmarshal(body, &in)
		var data []map[string]any
		for i, s := range in.Input {
			v := []float64{0, 1}
			if strings.Contains(s, "cat") {
				v = []float64{1, 0}
			}
			data = append(data, map[string]any{"index": i, "embedding": v})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
	}
	e := newEnv(t, func(c *shim.Config) { c.Embedder = &shim.OpenAIEmbedder{BaseURL: emb.URL, Model: "nomic"} })
	e.provision(t, "key-a", `{"id":"CAT","triggers":{"semantic":{"examples":["my cat","a cat"],"threshold":0.9}},"action":"respond_directly","response":{"text":"meow"}}`)
	for i := range 3 {
		res, _ := call(t, e, "key-a", wire.ChatCompletions, false, "gpt-4o", "the cat sat", nil)
		if res.text != "meow" {
			t.Fatalf("round %d: %q", i, res.text)
		}
	}
	// 1 call for the examples (cached afterwards) + 1 per request
	if n := emb.calls(); n != 4 {
		t.Fatalf("%d embeddings calls, want 4 (examples cached)", n)
	}
}
