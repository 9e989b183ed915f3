package trader

import (
	"encoding/json"
	"io/fs"
	"sync"

	"github.com/caduceus-dev/caduceus/contract"
)

// Schema files of the contract, embedded in package contract.
const (
	RequestSchemaFile  = "trader.decision_request.schema.json"
	ResponseSchemaFile = "trader.decision_response.schema.json"
)

var (
	requestSchema  = sync.OnceValue(func() *contract.Schema { return contract.MustSchema(RequestSchemaFile) })
	responseSchema = sync.OnceValue(func() *contract.Schema { return contract.MustSchema(ResponseSchemaFile) })
)

// RequestSchema returns the JSON Schema of a control decision request, as
// bytes: the input schema of the MCP tool apply_control_decision.
func RequestSchema() json.RawMessage { return mustRead(RequestSchemaFile) }

// ResponseSchema returns the JSON Schema of a control decision response.
func ResponseSchema() json.RawMessage { return mustRead(ResponseSchemaFile) }

// ValidateResponse validates an encoded response against the response schema.
// It returns an invalid *contract.Error naming the field.
func ValidateResponse(b []byte) error { return responseSchema().ValidateJSON(b) }

func mustRead(name string) json.RawMessage {
	b, err := fs.ReadFile(contract.SchemaFS(), name)
	if err != nil {
		panic("trader: schema " + name + ": " + err.Error())
	}
	return b
}
