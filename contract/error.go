package contract

import (
	"errors"
	"fmt"
)

// Kind classifies an Error. The list mirrors the audit outcomes plus invalid
// and internal. It is append-only: a kind, once published, keeps its meaning.
type Kind uint8

// Kinds of Error.
const (
	KindInternal        Kind = iota // something broke; details are logged, never sent
	KindInvalid                     // the input is not acceptable; nothing changed
	KindDeny                        // the caller may not do this
	KindNotFound                    // the thing does not exist (for this tenant)
	KindConflict                    // a revision, idempotency key or state disagrees
	KindFlagOff                     // the capability is switched off
	KindUnauthenticated             // no acceptable credential was presented
	KindPrecondition                // a write of a revisioned record came without If-Match; nothing changed
)

// The codes of the one If-Match rule (seed 002 revision: "Mutations send
// If-Match; a mismatch is 409") on every revisioned resource: a write of an
// existing record without If-Match is KindPrecondition (428)
// if_match_required; one whose If-Match is not the record's revision is
// KindConflict (409) revision_mismatch.
const (
	CodeIfMatchRequired  = "if_match_required"
	CodeRevisionMismatch = "revision_mismatch"
)

var kindNames = [...]string{
	KindInternal:        "internal",
	KindInvalid:         "invalid",
	KindDeny:            "deny",
	KindNotFound:        "not_found",
	KindConflict:        "conflict",
	KindFlagOff:         "flag_off",
	KindUnauthenticated: "unauthenticated",
	KindPrecondition:    "precondition_required",
}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Error is the one error shape of Caduceus. Message is safe to show to the
// caller; Err is the wrapped internal cause, logged and never sent.
type Error struct {
	Kind    Kind
	Code    string // stable, machine-readable: "missing_field", "decision_id_conflict", ...
	Message string // human-readable, safe to show
	Field   string // the offending input field (a JSON pointer or name), when there is one
	Err     error
}

func (e *Error) Error() string {
	msg := e.Message
	if msg == "" {
		msg = e.Kind.String()
	}
	if e.Code != "" {
		msg = e.Code + ": " + msg
	}
	if e.Err != nil {
		return msg + ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Invalidf returns an invalid Error with a code and a formatted message.
func Invalidf(code, format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Code: code, Message: fmt.Sprintf(format, args...)}
}

// FieldError returns an invalid Error naming the offending field.
func FieldError(field, code, format string, args ...any) *Error {
	return &Error{Kind: KindInvalid, Code: code, Field: field, Message: fmt.Sprintf(format, args...)}
}

// Denyf returns a deny Error.
func Denyf(code, format string, args ...any) *Error {
	return &Error{Kind: KindDeny, Code: code, Message: fmt.Sprintf(format, args...)}
}

// PreconditionRequiredf returns a precondition Error (428): the write
// needs If-Match.
func PreconditionRequiredf(code, format string, args ...any) *Error {
	return &Error{Kind: KindPrecondition, Code: code, Field: "If-Match", Message: fmt.Sprintf(format, args...)}
}

// NotFoundf returns a not_found Error.
func NotFoundf(code, format string, args ...any) *Error {
	return &Error{Kind: KindNotFound, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Conflictf returns a conflict Error.
func Conflictf(code, format string, args ...any) *Error {
	return &Error{Kind: KindConflict, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Internal wraps err as an internal Error. The message sent to callers is
// always "internal error"; err is kept for the log.
func Internal(err error) *Error {
	return &Error{Kind: KindInternal, Code: "internal", Message: "internal error", Err: err}
}

// CodeStoreUnavailable is the code of an internal Error whose cause is
// that the store could not be reached or cannot take a write now (the
// database is down or restarting, its disk is full): the server answers it
// 503 with Retry-After, and the same request may succeed once the store is
// back. Nothing was changed by the request.
const CodeStoreUnavailable = "store_unavailable"

// Unavailable wraps err, a failure to reach the store, as the internal
// Error with the code CodeStoreUnavailable. Its message is safe to send;
// err is kept for the log.
func Unavailable(err error) *Error {
	return &Error{Kind: KindInternal, Code: CodeStoreUnavailable, Message: "the store is unavailable; retry shortly", Err: err}
}

// IsUnavailable reports whether e is Unavailable's error: an internal
// failure that a retry after Retry-After may not meet.
func (e *Error) IsUnavailable() bool {
	return e != nil && e.Kind == KindInternal && e.Code == CodeStoreUnavailable
}

// AsError returns err as an *Error. Anything that is not one already is an
// internal error wrapping err. A nil err returns nil.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e
	}
	return Internal(err)
}

// KindOf returns the Kind of err (KindInternal for foreign errors).
func KindOf(err error) Kind {
	if e := AsError(err); e != nil {
		return e.Kind
	}
	return KindInternal
}

// HTTPStatus maps a Kind to its HTTP status. This is the only such map (the
// numbers are written out so that contract needs no net/http).
func (k Kind) HTTPStatus() int {
	switch k {
	case KindInvalid:
		return 400
	case KindUnauthenticated:
		return 401
	case KindDeny:
		return 403
	case KindNotFound:
		return 404
	case KindConflict:
		return 409
	case KindPrecondition:
		return 428
	case KindFlagOff:
		return 501
	default:
		return 500
	}
}

// JSON-RPC error codes. The first two are the protocol's own; the rest are in
// the implementation-defined server error range.
const (
	RPCInvalidParams   = -32602
	RPCInternal        = -32603
	RPCUnauthenticated = -32001
	RPCDeny            = -32003
	RPCNotFound        = -32004
	RPCConflict        = -32009
	RPCFlagOff         = -32010
	RPCPrecondition    = -32028
)

// RPCCode maps a Kind to its JSON-RPC error code. This is the only such map.
func (k Kind) RPCCode() int64 {
	switch k {
	case KindInvalid:
		return RPCInvalidParams
	case KindUnauthenticated:
		return RPCUnauthenticated
	case KindDeny:
		return RPCDeny
	case KindNotFound:
		return RPCNotFound
	case KindConflict:
		return RPCConflict
	case KindFlagOff:
		return RPCFlagOff
	case KindPrecondition:
		return RPCPrecondition
	default:
		return RPCInternal
	}
}

// Outcome maps a Kind to the audit outcome recorded for it. Invalid input and
// missing credentials are refusals (deny); a missing If-Match is a conflict,
// as a stale one is (the revision disagrees); internal failures are
// recorded as deny with the reason "internal" by the caller.
func (k Kind) Outcome() Outcome {
	switch k {
	case KindNotFound:
		return OutcomeNotFound
	case KindConflict, KindPrecondition:
		return OutcomeConflict
	case KindFlagOff:
		return OutcomeFlagOff
	default:
		return OutcomeDeny
	}
}
