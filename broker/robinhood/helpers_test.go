package robinhood_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caduceus-dev/caduceus/executor"
)

func writeManifest(t *testing.T, root, name, body string) {
	t.Helper()
	dir := filepath.Join(root, executor.ManifestDir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "SKILL.md"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}
