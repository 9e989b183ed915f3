package executortest_test

import (
	"testing"

	"github.com/caduceus-dev/caduceus/executor"
	"github.com/caduceus-dev/caduceus/executor/executortest"
)

func TestMemory(t *testing.T) {
	executortest.TestStore(t, func(*testing.T) executor.Store { return executortest.NewMemory() })
}
