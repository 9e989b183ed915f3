package audit

import (
	"strings"

	"github.com/caduceus-dev/caduceus/contract"
)

// Sensitivities is how widely the record of each action may be shown (seed
// 002 $defs/sensitivity), the one table docs/audit.md lists: an action
// named here exactly, else its noun ("trader." for trader.history), else
// DefaultSensitivity. A record whose entry names a sensitivity keeps it.
//
//   - restricted: credentials (keys, grants);
//   - sensitive: finance (trader decisions and strategies, executor ticks,
//     spend) and the audit trail itself, which holds them;
//   - personal: what a user owns that is not sensitive (relay messages, LLM
//     calls and their provisions and memory, conversations);
//   - public: what holds no tenant data (a route that does not exist, the
//     builtin preview).
var Sensitivities = map[string]contract.Sensitivity{
	"keys.":            contract.SensitivityRestricted,
	"audit.":           contract.SensitivitySensitive,
	"audit.checkpoint": contract.SensitivityPersonal, // hashes only
	"trader.":          contract.SensitivitySensitive,
	"executor.":        contract.SensitivitySensitive,
	"relay.":           contract.SensitivityPersonal,
	"shim.":            contract.SensitivityPersonal,
	"shim.spend":       contract.SensitivitySensitive,
	"shim.preview":     contract.SensitivityPublic,
	"trail.":           contract.SensitivityPersonal,
	"mcp.":             contract.SensitivityPersonal,
	"api.unknown":      contract.SensitivityPublic,
}

// DefaultSensitivity is the sensitivity of an action the table does not
// name: the narrowest, so a new action is never shown wider than meant.
const DefaultSensitivity = contract.SensitivityRestricted

// SensitivityOf is the sensitivity of action's records (Sensitivities).
func SensitivityOf(action string) contract.Sensitivity {
	if s, ok := Sensitivities[action]; ok {
		return s
	}
	if noun, _, ok := strings.Cut(action, "."); ok {
		if s, ok := Sensitivities[noun+"."]; ok {
			return s
		}
	}
	return DefaultSensitivity
}
