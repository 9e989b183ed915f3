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
// [0,1], in that order. It returns every issue it finds; the request is
// acceptable when there are none. Fields that decoded are set even when there
// are issues, so a refusal can still name the decision. Whether a risk mode
// is in the configured set is the Service's check, not this one's.
func ParseRequest(raw []byte) (Request, []Issue) {
	var req Request
	if len(raw) > MaxRequestBytes {
		return req, []Issue{{Code: CodeBodyTooLarge, Message: fmt.Sprintf("request body is %d bytes; the limit is %d", len(raw), MaxRequestBytes)}}
	}
	if is := unsafeJSON(raw); is != nil {
		return req, []Issue{*is}
	}
	if !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v)
		msg := "request body is not valid JSON"
		if err != nil {
			msg += ": " + err.Error()
		}
		return req, []Issue{{Code: CodeBadJSON, Message: msg}}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return req, []Issue{{Code: CodeNotAnObject, Message: "request body must be a JSON object"}}
	}
	values := make([]json.RawMessage, len(requestFields))
	var issues []Issue
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return req, []Issue{{Code: CodeBadJSON, Message: "request body is not valid JSON: " + err.Error()}}
		}
		key := tok.(string) // json.Valid held: an object key is a string
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return req, []Issue{{Code: CodeBadJSON, Message: "request body is not valid JSON: " + err.Error()}}
		}
		i, known := fieldIndex[key]
		switch {
		case !known:
			issues = append(issues, Issue{Code: CodeUnknownField, Field: key, Message: fmt.Sprintf("unknown field %q", clip(key, 64))})
		case values[i] != nil:
			issues = append(issues, Issue{Code: CodeDuplicateField, Field: key, Message: fmt.Sprintf("field %s appears more than once", key)})
		default:
			values[i] = v
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return req, []Issue{{Code: CodeBadJSON, Message: "request body is not valid JSON: " + err.Error()}}
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, []Issue{{Code: CodeBadJSON, Message: "request body is not valid JSON: trailing data after the object"}}
	}

	str := map[string]*string{
		"decision_id": &req.DecisionID, "concern_id": &req.ConcernID, "account_id": &req.AccountID,
		"market_symbol": &req.MarketSymbol, "action": (*string)(&req.Action),
		"target_strategy_id": &req.TargetStrategyID, "expected_active_strategy_id": &req.ExpectedActiveStrategyID,
		"risk_mode": &req.RiskMode, "reason": &req.Reason, "requested_at": &req.RequestedAt,
	}
	boolean := map[string]*bool{"dry_run": &req.DryRun, "override": &req.Override}
	present := make([]bool, len(requestFields))
	for i, f := range requestFields {
		v := values[i]
		if v == nil {
			continue
		}
		if string(v) == "null" {
			if f.required {
				issues = append(issues, Issue{Code: CodeWrongType, Field: f.name, Message: fmt.Sprintf("field %s must be a %s, not null", f.name, kindName(f.kind))})
			}
			continue
		}
		ok := false
		switch f.kind {
		case kString:
			ok = v[0] == '"' && json.Unmarshal(v, str[f.name]) == nil
		case kBool:
			ok = json.Unmarshal(v, boolean[f.name]) == nil
		case kNumber:
			if c := v[0]; c == '-' || (c >= '0' && c <= '9') {
				ok = true
				present[i] = true
				x, inRange := confidenceOf(string(v))
				if !inRange {
					issues = append(issues, Issue{Code: CodeConfidenceOutOfRange, Field: f.name, Message: fmt.Sprintf("confidence %s is not a finite number in [0, 1]", clip(string(v), 40))})
					continue
				}
				req.Confidence = x
			}
		}
		if !ok {
			issues = append(issues, Issue{Code: CodeWrongType, Field: f.name, Message: fmt.Sprintf("field %s must be a %s", f.name, kindName(f.kind))})
			continue
		}
		present[i] = true
	}
	wrongType := func(name string) bool {
		return values[fieldIndex[name]] != nil && !present[fieldIndex[name]] && string(values[fieldIndex[name]]) != "null"
	}

	// Required fields: present and, for strings, not empty.
	for i, f := range requestFields {
		if !f.required || wrongType(f.name) {
			continue
		}
		if !present[i] || (f.kind == kString && *str[f.name] == "") {
			if values[i] == nil || string(values[i]) != "null" {
				issues = append(issues, Issue{Code: CodeMissingField, Field: f.name, Message: fmt.Sprintf("field %s is required", f.name)})
			}
		}
	}

	// Formats.
	format := func(name string, ok bool, msg string) {
		if !ok && *str[name] != "" {
			issues = append(issues, Issue{Code: CodeInvalidField, Field: name, Message: msg})
		}
	}
	format("decision_id", decisionRE.MatchString(req.DecisionID), "decision_id must be 1 to 128 characters of A-Z a-z 0-9 . _ : -")
	format("concern_id", len(req.ConcernID) <= 129, "concern_id must be at most 129 characters (account_id:market_symbol)")
	format("account_id", keyRE.MatchString(req.AccountID), "account_id must be 1 to 64 characters of A-Z a-z 0-9 . _ / -")
	format("market_symbol", keyRE.MatchString(req.MarketSymbol), "market_symbol must be 1 to 64 characters of A-Z a-z 0-9 . _ / -")
	format("target_strategy_id", refRE.MatchString(req.TargetStrategyID), "target_strategy_id must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
	format("expected_active_strategy_id", refRE.MatchString(req.ExpectedActiveStrategyID), "expected_active_strategy_id must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
	format("risk_mode", riskRE.MatchString(req.RiskMode), "risk_mode must be a lowercase name of at most 32 characters")
	format("reason", utf8.RuneCountInString(req.Reason) <= MaxReasonChars, fmt.Sprintf("reason must be at most %d characters", MaxReasonChars))
	format("requested_at", validRFC3339(req.RequestedAt), "requested_at must be an RFC 3339 timestamp")

	// The action, then its conditional fields.
	if req.Action != "" && !wrongType("action") {
		switch {
		case req.Action == ActionKeep:
			issues = append(issues, Issue{Code: CodeUnsupportedAction, Field: "action", Message: "keep is not a Trader write action; record it on the Hermes side"})
		case !req.Action.Supported():
			issues = append(issues, Issue{Code: CodeUnsupportedAction, Field: "action", Message: fmt.Sprintf("action %q is not supported; use switch, pause, resume or set_risk_mode", clip(string(req.Action), 64))})
		case req.Action == ActionSwitch && req.TargetStrategyID == "" && !wrongType("target_strategy_id"):
			issues = append(issues, Issue{Code: CodeMissingField, Field: "target_strategy_id", Message: "field target_strategy_id is required for switch"})
		case req.Action == ActionSetRiskMode && req.RiskMode == "" && !wrongType("risk_mode"):
			issues = append(issues, Issue{Code: CodeMissingField, Field: "risk_mode", Message: "field risk_mode is required for set_risk_mode"})
		}
	}

	// The schema is the edge contract; the checks above are meant to be at
	// least as strict (the fuzz target holds them to it). This is the backstop.
	if len(issues) == 0 {
		if err := requestSchema().ValidateJSON(raw); err != nil {
			ce := contract.AsError(err)
			issues = append(issues, Issue{Code: CodeSchemaInvalid, Field: ce.Field, Message: ce.Message})
		}
	}
	return req, issues
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
