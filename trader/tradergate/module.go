package tradergate

import (
	"context"

	"github.com/caduceus-dev/caduceus/gate"
	"github.com/caduceus-dev/caduceus/gate/registry"
	"github.com/caduceus-dev/caduceus/trader"
	"github.com/caduceus-dev/caduceus/trader/tradersql"
)

// The trader gate has no config section: its strategies and concerns are
// written through its routes.
func init() {
	registry.Register(registry.Module{Name: "trader", Order: 10, Build: build})
}

func build(_ context.Context, h registry.Host, _ any) (gate.Gate, error) {
	svc, err := trader.New(tradersql.New(h.DB), trader.Options{Logger: h.Log})
	if err != nil {
		return nil, err
	}
	return New(svc), nil
}
