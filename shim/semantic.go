package shim

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"strings"
	"sync"
)

// Embedder turns texts into vectors for tier 2. Remote reports whether it
// calls a provider (offline mode, dry-run and preview then use the local
// embedder instead).
type Embedder interface {
	Name() string // identifies the model, for the example-vector cache
	Remote() bool
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

//go:embed lexicon.txt
var lexiconText string

var lexicon = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(lexiconText))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		concept, words, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		for _, w := range strings.Fields(words) {
			w = stem(strings.ToLower(w))
			if _, dup := m[w]; !dup {
				m[w] = concept
			}
		}
	}
	return m
})

var stopwords = map[string]bool{
	"a": true, "an": true, "the": true, "to": true, "of": true, "and": true, "or": true, "in": true, "on": true,
	"at": true, "for": true, "with": true, "this": true, "that": true, "it": true, "is": true, "are": true, "be": true,
	"we": true, "i": true, "you": true, "me": true, "my": true, "our": true, "please": true, "can": true, "could": true,
	"would": true, "should": true, "let": true, "lets": true, "s": true, "out": true, "up": true, "now": true,
	"so": true, "do": true, "get": true, "into": true, "from": true, "by": true, "its": true, "will": true,
}

// stem strips a few English suffixes so "deploying" and "deployed" meet "deploy".
func stem(w string) string {
	for _, suf := range []string{"ing", "ed", "es", "s"} {
		if len(w) > len(suf)+3 && strings.HasSuffix(w, suf) {
			return w[:len(w)-len(suf)]
		}
	}
	return w
}

// localDim is the dimension of the local embedder's vectors.
const localDim = 512

// Local is the deterministic default Embedder: hashed word, concept and
// character-trigram features. Concepts come from the shipped synonym
// lexicon, so "push the release to production" and "ship this to prod" land
// close together without sharing a word. It never calls anything.
type Local struct{}

// Name implements Embedder.
func (Local) Name() string { return "local-hash-v1" }

// Remote implements Embedder.
func (Local) Remote() bool { return false }

// Embed implements Embedder.
func (Local) Embed(_ context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		out[i] = localVector(t)
	}
	return out, nil
}

// localVector is the local embedding of text (unit length, or zero).
func localVector(text string) []float32 {
	if len(text) > maxTriggerText {
		text = text[:maxTriggerText]
	}
	v := make([]float32, localDim)
	lex := lexicon()
	for _, w := range tokens(strings.ToLower(text)) {
		if stopwords[w] {
			continue
		}
		s := stem(w)
		if c, ok := lex[s]; ok {
			addFeature(v, "c:"+c, 3)
		} else if c, ok := lex[w]; ok {
			addFeature(v, "c:"+c, 3)
		}
		addFeature(v, "w:"+s, 1)
		g := "^" + s + "$"
		if n := len(g) - 2; n > 0 {
			weight := float32(0.6) / float32(n)
			for j := 0; j+3 <= len(g); j++ {
				addFeature(v, "g:"+g[j:j+3], weight)
			}
		}
	}
	normalize(v)
	return v
}

func addFeature(v []float32, f string, w float32) {
	h := fnv.New64a()
	h.Write([]byte(f))
	x := h.Sum64()
	i := x % uint64(len(v))
	if x>>63 == 1 {
		w = -w
	}
	v[i] += w
}

func normalize(v []float32) {
	var n float64
	for _, x := range v {
		n += float64(x) * float64(x)
	}
	if n == 0 {
		return
	}
	s := float32(1 / math.Sqrt(n))
	for i := range v {
		v[i] *= s
	}
}

// cosine of two vectors (0 when either is zero or their lengths differ).
func cosine(a, b []float32) float64 {
	if len(a) != len(b) || len(a) == 0 {
		return 0
	}
	var dot, na, nb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		na += float64(a[i]) * float64(a[i])
		nb += float64(b[i]) * float64(b[i])
	}
	if na == 0 || nb == 0 {
		return 0
	}
	return dot / math.Sqrt(na*nb)
}

// OpenAIEmbedder calls an OpenAI-compatible POST {BaseURL}/v1/embeddings
// (OpenAI, Ollama, llama.cpp server).
type OpenAIEmbedder struct {
	BaseURL string
	APIKey  string
	Model   string
	Client  *http.Client // nil: http.DefaultClient
}

// Name implements Embedder.
func (e *OpenAIEmbedder) Name() string { return "openai:" + e.BaseURL + ":" + e.Model }

// Remote implements Embedder.
func (e *OpenAIEmbedder) Remote() bool { return true }

// Embed implements Embedder. A contributor-tier model is refused before any call.
func (e *OpenAIEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if IsContributorModel(e.Model) {
		return nil, fmt.Errorf("shim: embedder model %q is contributor-tier and refused", e.Model)
	}
	body, _ := json.Marshal(map[string]any{"model": e.Model, "input": texts})
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if err := postJSON(ctx, e.Client, endpoint(e.BaseURL, "/v1/embeddings"), e.APIKey, body, &out); err != nil {
		return nil, fmt.Errorf("shim: embeddings: %w", err)
	}
	vs := make([][]float32, len(texts))
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= len(texts) {
			return nil, fmt.Errorf("shim: embeddings: index %d out of range", d.Index)
		}
		vs[d.Index] = d.Embedding
	}
	for i, v := range vs {
		if len(v) == 0 {
			return nil, fmt.Errorf("shim: embeddings: no vector for input %d", i)
		}
	}
	return vs, nil
}

// endpoint joins a configured base URL (with or without a trailing /v1) and
// an API path that starts with /v1.
func endpoint(base, path string) string {
	base = strings.TrimRight(base, "/")
	base = strings.TrimSuffix(base, "/v1")
	return base + path
}

// maxProviderReply bounds a classifier or embeddings reply.
const maxProviderReply = 4 << 20

func postJSON(ctx context.Context, c *http.Client, url, key string, body []byte, out any) error {
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxProviderReply))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("bad reply: %v", err)
	}
	return nil
}
