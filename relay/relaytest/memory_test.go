package relaytest

import (
	"testing"

	"github.com/caduceus-dev/caduceus/relay"
)

func TestMemory(t *testing.T) {
	TestStore(t, func(*testing.T) relay.Store { return NewMemory() })
}
