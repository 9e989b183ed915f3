//go:build js

package shim

import (
	"encoding/json"

	"github.com/caduceus-dev/caduceus/contract"
)

// parseBundle reads a bundle for decodeBundle in the js/wasm build: JSON
// only. Bundles are applied by `caduceus shim provisions apply`, which runs
// beside the store, never at the edge (the Worker serves no route that
// applies one), so the Worker leaves out the YAML parser and its package
// initialisation (docs/edge.md).
func parseBundle(doc []byte) (any, error) {
	var tree any
	if err := json.Unmarshal(doc, &tree); err != nil {
		return nil, contract.Invalidf("bad_document", "shim: not JSON (the js/wasm build reads no YAML): %v", err)
	}
	return tree, nil
}
