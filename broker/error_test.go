package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		err       error
		status    int
		retryable bool
		timeout   bool
	}{
		{nil, 0, false, false},
		{Errorf("x", 400, "no"), 400, false, false},
		{Errorf("x", 422, "no"), 422, false, false},
		{Errorf("x", 503, "down"), 503, true, false},
		{fmt.Errorf("wrapped: %w", Errorf("x", 500, "boom")), 500, true, false},
		{&Error{Op: "x", Status: 504, Timeout: true}, 504, true, true},
		{context.DeadlineExceeded, 504, true, true},
		{errors.New("connection reset"), 503, true, false},
	} {
		if got := StatusOf(tc.err); got != tc.status {
			t.Errorf("StatusOf(%v) = %d, want %d", tc.err, got, tc.status)
		}
		if got := Retryable(tc.err); got != tc.retryable {
			t.Errorf("Retryable(%v) = %v", tc.err, got)
		}
		if got := IsTimeout(tc.err); got != tc.timeout {
			t.Errorf("IsTimeout(%v) = %v", tc.err, got)
		}
	}
}

func TestDay(t *testing.T) {
	for utc, want := range map[string]string{
		"2026-06-27T03:59:00Z": "2026-06-26", // 23:59 EDT
		"2026-06-27T04:00:00Z": "2026-06-27", // 00:00 EDT
		"2026-12-01T04:59:00Z": "2026-11-30", // 23:59 EST
		"2026-12-01T05:00:00Z": "2026-12-01",
	} {
		tm, _ := time.Parse(time.RFC3339, utc)
		if got := Day(tm); got != want {
			t.Errorf("Day(%s) = %s, want %s", utc, got, want)
		}
	}
}

func TestOrderOpen(t *testing.T) {
	for state, open := range map[string]bool{"queued": true, "confirmed": true, "partially_filled": true, "filled": false, "cancelled": false, "rejected": false, "failed": false, "": false} {
		if (Order{State: state}).Open() != open {
			t.Errorf("%q open = %v", state, !open)
		}
	}
}
