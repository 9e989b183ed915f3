package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
)

// Error is a failed broker call. Status is HTTP-like: 4xx means the broker
// refused the request (retrying will not help), 5xx means it failed or could
// not be reached, and Timeout marks a call whose outcome is unknown (the
// broker may have acted on it).
type Error struct {
	Op      string // the tool name, e.g. "place_equity_order"
	Status  int
	Message string
	Timeout bool
	Err     error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("broker: %s: status %d", e.Op, e.Status)
	if e.Timeout {
		s += " (timeout)"
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error for op with status and a formatted message.
func Errorf(op string, status int, format string, args ...any) *Error {
	return &Error{Op: op, Status: status, Message: fmt.Sprintf(format, args...)}
}

// StatusTimeout is the status given to a call that timed out.
const StatusTimeout = 504

// StatusOf returns the HTTP-like status of err: the Status of an *Error,
// 504 for a deadline or network timeout, 503 for any other failure, 0 for nil.
func StatusOf(err error) int {
	if err == nil {
		return 0
	}
	if e, ok := errors.AsType[*Error](err); ok && e.Status != 0 {
		return e.Status
	}
	if IsTimeout(err) {
		return StatusTimeout
	}
	return 503
}

// IsTimeout reports whether err is a timeout: the call's outcome is unknown.
func IsTimeout(err error) bool {
	if err == nil {
		return false
	}
	if e, ok := errors.AsType[*Error](err); ok && e.Timeout {
		return true
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Retryable reports whether one retry of the call may help: a 5xx status or
// a timeout. A 4xx refusal is final.
func Retryable(err error) bool {
	if err == nil {
		return false
	}
	if IsTimeout(err) {
		return true
	}
	return StatusOf(err) >= 500
}
