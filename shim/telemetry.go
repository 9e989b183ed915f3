package shim

import (
	"context"

	"github.com/caduceus-dev/caduceus/internal/telemetry"
)

// annotateSpan adds what the shim knows of a turn to its request span (the
// server wrapper's) when serve traces: the model asked for, the model
// identity that served it, the receipt and the conversation the turn was
// recorded under. Never a prompt or a key.
func annotateSpan(ctx context.Context, t *turn, requested string) {
	if !telemetry.On() {
		return
	}
	attrs := []telemetry.KeyValue{telemetry.KeyReceipt.String(t.rc.ID)}
	if requested != "" {
		attrs = append(attrs, telemetry.KeyModel.String(truncateRunes(requested, 120)))
	}
	if t.served != nil {
		attrs = append(attrs, telemetry.KeyModelIdentity.String(truncateRunes(t.served.ResolvedTarget, 120)))
	}
	if t.conv != "" {
		attrs = append(attrs, telemetry.KeyConversation.String(t.conv))
	}
	telemetry.Annotate(ctx, attrs...)
}
