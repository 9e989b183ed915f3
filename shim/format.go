package shim

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/caduceus-dev/caduceus/shim/wire"
)

// Skip reasons of a respond_directly provision whose text does not fit the
// output format the request asks for.
const (
	skipFormatMismatch = "response_format_mismatch"
)

// outputFormat is the structured output a request asks for: chat
// completions' response_format, responses' text.format.
type outputFormat struct {
	Type   string          `json:"type"` // text, json_object, json_schema
	Schema json.RawMessage `json:"schema"`
	// JSONSchema is chat completions' wrapper: {"name", "schema", "strict"}.
	JSONSchema *struct {
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// requestedFormat reads the output format of req (nil: free text).
func requestedFormat(req *wire.Request) *outputFormat {
	if req.Protocol == wire.Messages || !bytes.Contains(req.Raw, []byte(`"json_`)) {
		return nil
	}
	var in struct {
		ResponseFormat *outputFormat `json:"response_format"`
		Text           *struct {
			Format *outputFormat `json:"format"`
		} `json:"text"`
	}
	if json.Unmarshal(req.Raw, &in) != nil {
		return nil
	}
	f := in.ResponseFormat
	if req.Protocol == wire.Responses && in.Text != nil {
		f = in.Text.Format
	}
	if f == nil || (f.Type != "json_object" && f.Type != "json_schema") {
		return nil
	}
	return f
}

// fitsFormat reports whether a direct answer's text is valid output for f:
// a JSON object for json_object, an instance of the schema for
// json_schema. A schema that does not compile fits nothing.
func fitsFormat(f *outputFormat, text string) bool {
	if f == nil {
		return true
	}
	t := strings.TrimSpace(text)
	if !json.Valid([]byte(t)) || !strings.HasPrefix(t, "{") {
		return false
	}
	if f.Type == "json_object" {
		return true
	}
	raw := f.Schema
	if f.JSONSchema != nil {
		raw = f.JSONSchema.Schema
	}
	if len(raw) == 0 {
		return true // a json_schema without a schema asks for a JSON object
	}
	var sch jsonschema.Schema
	if json.Unmarshal(raw, &sch) != nil {
		return false
	}
	if sch.Schema != draft7 && sch.Schema != draft7s {
		// Read as draft 2020-12, what a schema without $schema is; the
		// validator would refuse a draft it does not know outright.
		sch.Schema = ""
	}
	rs, err := sch.Resolve(nil)
	if err != nil {
		return false
	}
	var inst any
	if json.Unmarshal([]byte(t), &inst) != nil {
		return false
	}
	return rs.Validate(inst) == nil
}

// The draft 7 a request's schema may name ($schema), which the validator
// validates as draft 7; any other is read as draft 2020-12.
const (
	draft7  = "http://json-schema.org/draft-07/schema#"
	draft7s = "https://json-schema.org/draft-07/schema#"
)
