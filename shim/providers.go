package shim

import (
	"github.com/caduceus-dev/caduceus/contract"
)

// ModelNamer is implemented by embedders and classifiers whose
// configuration names models (CheckConfig reads it).
type ModelNamer interface {
	Models() []string
}

// Models implements ModelNamer.
func (e *OpenAIEmbedder) Models() []string { return []string{e.Model} }

// CheckConfig refuses, before any call is made, a configuration whose
// embedder or classifier names a contributor-tier model (seed 003 H03:
// contributor models are refused in classifier and embedder configuration
// too). The embedder's and classifier's models are read through
// ModelNamer. Call it where the configuration is loaded (serve, the CLI)
// before New. It returns an invalid *contract.Error (code
// contributor_model_refused) naming the field.
func CheckConfig(cfg Config) error {
	if n, ok := cfg.Embedder.(ModelNamer); ok {
		for _, m := range n.Models() {
			if IsContributorModel(m) {
				return contract.FieldError("embedder.model", CodeContributorRefused, "shim: embedder model %q is contributor-tier and refused", m)
			}
		}
	}
	if n, ok := cfg.Classifier.(ModelNamer); ok {
		for _, m := range n.Models() {
			if IsContributorModel(m) {
				return contract.FieldError("classifier.model", CodeContributorRefused, "shim: classifier model %q is contributor-tier and refused", m)
			}
		}
	}
	return nil
}
