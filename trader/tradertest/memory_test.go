package tradertest

import (
	"testing"

	"github.com/caduceus-dev/caduceus/audit"
	"github.com/caduceus-dev/caduceus/trader"
)

func TestMemory(t *testing.T) {
	TestStore(t, func(t *testing.T) (trader.Store, audit.Source) {
		m := NewMemory()
		return m, m
	})
}
