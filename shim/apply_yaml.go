//go:build !js

package shim

import (
	"github.com/caduceus-dev/caduceus/contract"
	"go.yaml.in/yaml/v3"
)

// parseBundle reads a bundle for decodeBundle: YAML, and so JSON too.
func parseBundle(doc []byte) (any, error) {
	var tree any
	if err := yaml.Unmarshal(doc, &tree); err != nil {
		return nil, contract.Invalidf("bad_document", "shim: not YAML or JSON: %v", err)
	}
	return tree, nil
}
