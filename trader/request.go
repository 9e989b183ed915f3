package trader

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/caduceus-dev/caduceus/contract"
)

// MaxRequestBytes is the largest request body Apply reads; larger bodies are
// refused with body_too_large before they are parsed.
const MaxRequestBytes = 64 << 10

// MaxReasonChars bounds the reason (in characters).
const MaxReasonChars = 1000

// Request is the control decision request of the seed. Optional strings are
// empty when absent (JSON null and "" mean absent too).
type Request struct {
	DecisionID               string  `json:"decision_id"`
	ConcernID                string  `json:"concern_id"`
	AccountID                string  `json:"account_id"`
	MarketSymbol             string  `json:"market_symbol"`
	Action                   Action  `json:"action"`
	TargetStrategyID         string  `json:"target_strategy_id,omitempty"`
	ExpectedActiveStrategyID string  `json:"expected_active_strategy_id,omitempty"`
	RiskMode                 string  `json:"risk_mode,omitempty"`
	Reason                   string  `json:"reason"`
	Confidence               float64 `json:"confidence"`
	DryRun                   bool    `json:"dry_run"`
	Override                 bool    `json:"override"`
	RequestedAt              string  `json:"requested_at,omitempty"`
}

type fieldKind uint8

const (
	kString fieldKind = iota
	kNumber
	kBool
)

type fieldSpec struct {
	name     string
	kind     fieldKind
	required bool
}

// requestFields lists the request's fields in the seed's order.
var requestFields = []fieldSpec{
	{"decision_id", kString, true},
	{"concern_id", kString, true},
	{"account_id", kString, true},
	{"market_symbol", kString, true},
	{"action", kString, true},
	{"target_strategy_id", kString, false},
	{"expected_active_strategy_id", kString, false},
	{"risk_mode", kString, false},
	{"reason", kString, true},
	{"confidence", kNumber, true},
	{"dry_run", kBool, false},
	{"override", kBool, false},
	{"requested_at", kString, false},
}

var fieldIndex = func() map[string]int {
	m := make(map[string]int, len(requestFields))
	for i, f := range requestFields {
		m[f.name] = i
	}
	return m
}()

// ParseRequest decodes and checks a control decision request: size, JSON,
// one object, no unknown or duplicate fields, field types, required and
// action-conditional fields, formats, the action, and confidence finite in
// [0,1], in that order (one function each below). It returns every issue it
// finds; the request is acceptable when there are none. Fields that decoded
// are set even when there are issues, so a refusal can still name the
// decision. Whether a risk mode is in the configured set is the Service's
// check, not this one's.
func ParseRequest(raw []byte) (Request, []Issue) {
	p := &requestParse{}
	if fatal := p.split(raw); fatal != nil {
		return Request{}, []Issue{*fatal}
	}
	p.decodeFields()
	p.checkRequired()
	p.checkFormats()
	p.checkAction()
	p.checkSchema(raw)
	return p.req, p.issues
}

// requestParse is one request on its way through ParseRequest.
type requestParse struct {
	req     Request
	values  []json.RawMessage // by requestFields index; nil: absent
	present []bool            // the value decoded to its field's type
	issues  []Issue
}

func (p *requestParse) issue(code, field, format string, args ...any) {
	p.issues = append(p.issues, Issue{Code: code, Field: field, Message: fmt.Sprintf(format, args...)})
}

// split checks the size and the JSON and splits the one object into its
// fields' raw values, noting unknown and repeated fields. A body that is not
// one JSON object is one fatal issue.
func (p *requestParse) split(raw []byte) *Issue {
	if len(raw) > MaxRequestBytes {
		return &Issue{Code: CodeBodyTooLarge, Message: fmt.Sprintf("request body is %d bytes; the limit is %d", len(raw), MaxRequestBytes)}
	}
	if is := unsafeJSON(raw); is != nil {
		return is
	}
	if !json.Valid(raw) {
		var v any
		msg := "request body is not valid JSON"
		if err := json.Unmarshal(raw, &v); err != nil {
			msg += ": " + err.Error()
		}
		return &Issue{Code: CodeBadJSON, Message: msg}
	}
	badJSON := func(err error) *Issue {
		return &Issue{Code: CodeBadJSON, Message: "request body is not valid JSON: " + err.Error()}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return &Issue{Code: CodeNotAnObject, Message: "request body must be a JSON object"}
	}
	p.values = make([]json.RawMessage, len(requestFields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return badJSON(err)
		}
		key := tok.(string) // json.Valid held: an object key is a string
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return badJSON(err)
		}
		i, known := fieldIndex[key]
		switch {
		case !known:
			p.issue(CodeUnknownField, key, "unknown field %q", clip(key, 64))
		case p.values[i] != nil:
			p.issue(CodeDuplicateField, key, "field %s appears more than once", key)
		default:
			p.values[i] = v
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return badJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return &Issue{Code: CodeBadJSON, Message: "request body is not valid JSON: trailing data after the object"}
	}
	return nil
}

// str and boolean are the request's string and boolean fields by name.
func (p *requestParse) str(name string) *string {
	r := &p.req
	switch name {
	case "decision_id":
		return &r.DecisionID
	case "concern_id":
		return &r.ConcernID
	case "account_id":
		return &r.AccountID
	case "market_symbol":
		return &r.MarketSymbol
	case "action":
		return (*string)(&r.Action)
	case "target_strategy_id":
		return &r.TargetStrategyID
	case "expected_active_strategy_id":
		return &r.ExpectedActiveStrategyID
	case "risk_mode":
		return &r.RiskMode
	case "reason":
		return &r.Reason
	case "requested_at":
		return &r.RequestedAt
	}
	panic("trader: no string field " + name)
}

func (p *requestParse) boolean(name string) *bool {
	if name == "dry_run" {
		return &p.req.DryRun
	}
	return &p.req.Override
}

// decodeFields decodes each present field into the request and checks its
// type: null is absent (and wrong for a required field); confidence is a
// number finite in [0, 1], read exactly.
func (p *requestParse) decodeFields() {
	p.present = make([]bool, len(requestFields))
	for i, f := range requestFields {
		v := p.values[i]
		if v == nil {
			continue
		}
		if string(v) == "null" {
			if f.required {
				p.issue(CodeWrongType, f.name, "field %s must be a %s, not null", f.name, kindName(f.kind))
			}
			continue
		}
		ok := false
		switch f.kind {
		case kString:
			ok = v[0] == '"' && json.Unmarshal(v, p.str(f.name)) == nil
		case kBool:
			ok = json.Unmarshal(v, p.boolean(f.name)) == nil
		case kNumber:
			if c := v[0]; c == '-' || (c >= '0' && c <= '9') {
				ok = true
				x, inRange := confidenceOf(string(v))
				if !inRange {
					p.present[i] = true
					p.issue(CodeConfidenceOutOfRange, f.name, "confidence %s is not a finite number in [0, 1]", clip(string(v), 40))
					continue
				}
				p.req.Confidence = x
			}
		}
		if !ok {
			p.issue(CodeWrongType, f.name, "field %s must be a %s", f.name, kindName(f.kind))
			continue
		}
		p.present[i] = true
	}
}

// wrongType reports that the field is there but not of its type.
func (p *requestParse) wrongType(name string) bool {
	i := fieldIndex[name]
	return p.values[i] != nil && !p.present[i] && string(p.values[i]) != "null"
}

// checkRequired: the seed's required fields are present and, for strings,
// not empty (a wrong type or a null was named already).
func (p *requestParse) checkRequired() {
	for i, f := range requestFields {
		if !f.required || p.wrongType(f.name) {
			continue
		}
		missing := !p.present[i] || (f.kind == kString && *p.str(f.name) == "")
		if missing && (p.values[i] == nil || string(p.values[i]) != "null") {
			p.issue(CodeMissingField, f.name, "field %s is required", f.name)
		}
	}
}

// checkFormats: each string field that is set has its format.
func (p *requestParse) checkFormats() {
	r := &p.req
	format := func(name string, ok bool, msg string) {
		if !ok && *p.str(name) != "" {
			p.issues = append(p.issues, Issue{Code: CodeInvalidField, Field: name, Message: msg})
		}
	}
	format("decision_id", decisionRE.MatchString(r.DecisionID), "decision_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -")
	format("concern_id", len(r.ConcernID) <= 129, "concern_id must be at most 129 characters (account_id:market_symbol)")
	format("account_id", keyRE.MatchString(r.AccountID), "account_id must be 1 to 64 characters of A-Z a-z 0-9 . _ / -")
	format("market_symbol", keyRE.MatchString(r.MarketSymbol), "market_symbol must be 1 to 64 characters of A-Z a-z 0-9 . _ / -")
	format("target_strategy_id", refRE.MatchString(r.TargetStrategyID), "target_strategy_id must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
	format("expected_active_strategy_id", refRE.MatchString(r.ExpectedActiveStrategyID), "expected_active_strategy_id must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
	format("risk_mode", riskRE.MatchString(r.RiskMode), "risk_mode must be a lowercase name of at most 32 characters")
	format("reason", utf8.RuneCountInString(r.Reason) <= MaxReasonChars, fmt.Sprintf("reason must be at most %d characters", MaxReasonChars))
	format("requested_at", validRFC3339(r.RequestedAt), "requested_at must be an RFC 3339 timestamp")
}

// checkAction: the action is one of the seed's supported actions (keep is
// not a Trader write action), then its conditional fields: switch needs
// target_strategy_id, set_risk_mode needs risk_mode.
func (p *requestParse) checkAction() {
	a := p.req.Action
	if a == "" || p.wrongType("action") {
		return
	}
	switch {
	case a == ActionKeep:
		p.issue(CodeUnsupportedAction, "action", "keep is not a Trader write action; record it on the Hermes side")
	case !a.Supported():
		p.issue(CodeUnsupportedAction, "action", "action %q is not supported; use switch, pause, resume or set_risk_mode", clip(string(a), 64))
	case a == ActionSwitch && p.req.TargetStrategyID == "" && !p.wrongType("target_strategy_id"):
		p.issue(CodeMissingField, "target_strategy_id", "field target_strategy_id is required for switch")
	case a == ActionSetRiskMode && p.req.RiskMode == "" && !p.wrongType("risk_mode"):
		p.issue(CodeMissingField, "risk_mode", "field risk_mode is required for set_risk_mode")
	}
}

// checkSchema is the backstop: the schema is the edge contract, and the
// checks above are meant to be at least as strict (the fuzz target holds
// them to it).
func (p *requestParse) checkSchema(raw []byte) {
	if len(p.issues) > 0 {
		return
	}
	if err := requestSchema().ValidateJSON(raw); err != nil {
		ce := contract.AsError(err)
		p.issues = append(p.issues, Issue{Code: CodeSchemaInvalid, Field: ce.Field, Message: ce.Message})
	}
}

func kindName(k fieldKind) string {
	switch k {
	case kNumber:
		return "number"
	case kBool:
		return "boolean"
	default:
		return "string"
	}
}

func validRFC3339(s string) bool {
	if !rfc3339RE.MatchString(s) {
		return false
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// clip shortens s for a message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// fingerprint is the idempotency fingerprint of a request: the digest of the
// JSON encoding of the parsed Request (fixed field order, numbers in Go's
// shortest form, absent and null optional fields alike) without dry_run and
// requested_at, which describe the attempt, not the decision. Field order,
// whitespace and number spelling in the body do not matter; a dry run of an
// applied decision is a replay, and a retry that restamps requested_at is
// not a conflict.
func fingerprint(req Request) (string, error) {
	req.DryRun = false
	req.RequestedAt = ""
	b, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	return contract.SHA256(b), nil
}

// confidenceOf parses a JSON number literal and reports whether it is, read
// exactly, a finite number in [0, 1]. Literals longer than 40 characters or
// with an exponent beyond ±40 are refused rather than expanded.
func confidenceOf(lit string) (float64, bool) {
	if len(lit) > 40 {
		return 0, false
	}
	if i := strings.IndexAny(lit, "eE"); i >= 0 {
		exp, err := strconv.Atoi(strings.TrimPrefix(lit[i+1:], "+"))
		if err != nil || exp > 40 || exp < -40 {
			return 0, false
		}
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok || r.Sign() < 0 || r.Cmp(big.NewRat(1, 1)) > 0 {
		return 0, false
	}
	x, _ := r.Float64()
	return x, !math.IsNaN(x) && !math.IsInf(x, 0)
}

// unsafeJSON applies the part of the shared input rule (contract.CheckJSON)
// that the parser below cannot: invalid UTF-8, a NUL character, nesting
// deeper than contract.MaxJSONDepth. Such a request is refused and its bytes
// are never stored. Duplicate keys, trailing data and syntax are the
// parser's own issues (with the field they concern).
func unsafeJSON(raw []byte) *Issue {
	err := contract.CheckJSON(raw)
	if err == nil {
		return nil
	}
	e := contract.AsError(err)
	switch e.Code {
	case contract.CodeBadUTF8, contract.CodeNULCharacter, contract.CodeTooDeep:
		return &Issue{Code: e.Code, Message: e.Message}
	}
	return nil
}
