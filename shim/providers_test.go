package shim_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/caduceus-dev/caduceus/contract"
	"github.com/caduceus-dev/caduceus/shim"
)

type namedClassifier struct {
	*shim.ChatClassifier
	model string
}

func (c namedClassifier) Models() []string { return []string{c.model} }

func TestCheckConfigRefusesContributorModels(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1) }))
	defer srv.Close()
	for _, tc := range []struct {
		name  string
		cfg   shim.Config
		field string
	}{
		{"embedder", shim.Config{Embedder: &shim.OpenAIEmbedder{BaseURL: srv.URL, Model: "acme/Embed-Contributor-1"}}, "embedder.model"},
		{"classifier", shim.Config{Classifier: namedClassifier{&shim.ChatClassifier{BaseURL: srv.URL}, "tiny-contributor"}}, "classifier.model"},
		{"fine", shim.Config{Embedder: &shim.OpenAIEmbedder{BaseURL: srv.URL, Model: "text-embedding-3-small"}, Classifier: namedClassifier{model: "tiny"}}, ""},
	} {
		err := shim.CheckConfig(tc.cfg)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		e := contract.AsError(err)
		if err == nil || e.Kind != contract.KindInvalid || e.Code != shim.CodeContributorRefused || e.Field != tc.field {
			t.Errorf("%s: %v (field %q), want contributor_model_refused on %s", tc.name, err, e.Field, tc.field)
		}
	}
	// The embedder refuses at call time as well, before any request.
	if _, err := (&shim.OpenAIEmbedder{BaseURL: srv.URL, Model: "x-CONTRIBUTOR"}).Embed(t.Context(), []string{"hi"}); err == nil {
		t.Fatal("contributor embedder embedded")
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d provider calls for contributor models", n)
	}
}
