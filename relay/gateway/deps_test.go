package gateway

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// TestNoPlatformCrypto keeps the gateway side free of platform crypto
// (RELAY.md §5): neither platform package is among its dependencies, and no
// package outside the standard library in its dependency graph imports
// crypto/ed25519 (net/http reaches it through crypto/tls, which is the
// transport's, not a platform's).
func TestNoPlatformCrypto(t *testing.T) {
	if bad := platformCrypto(t, "."); len(bad) > 0 {
		t.Errorf("gateway reaches platform crypto: %v", bad)
	}
	// The check is not vacuous: the connector, which verifies Discord
	// signatures, fails it.
	if bad := platformCrypto(t, "../connector"); len(bad) == 0 {
		t.Error("the check finds nothing in relay/connector")
	}
}

// platformCrypto lists the offending packages in pkg's dependency graph.
func platformCrypto(t *testing.T, pkg string) []string {
	out, err := exec.Command("go", "list", "-deps", "-json=ImportPath,Standard,Imports", pkg).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var bad []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var p struct {
			ImportPath string
			Standard   bool
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		switch p.ImportPath {
		case "github.com/caduceus-dev/caduceus/relay/discord", "github.com/caduceus-dev/caduceus/relay/telegram",
			"github.com/caduceus-dev/caduceus/relay/slack", "github.com/caduceus-dev/caduceus/relay/twilio",
			"github.com/caduceus-dev/caduceus/relay/whatsapp", "github.com/caduceus-dev/caduceus/relay/wecom":
			bad = append(bad, p.ImportPath)
		}
		if p.Standard {
			continue
		}
		for _, imp := range p.Imports {
			if imp == "crypto/ed25519" {
				bad = append(bad, p.ImportPath+" imports crypto/ed25519")
			}
		}
	}
	if seen < 10 {
		t.Fatalf("go list gave %d packages", seen)
	}
	return bad
}
