package contract

import (
	"fmt"
	"time"
)

// TimestampLayout formats schema $defs/timestamp: RFC 3339, UTC, trailing Z,
// at most microsecond precision.
const TimestampLayout = "2006-01-02T15:04:05.999999Z"

// Timestamp renders t as a schema timestamp.
func Timestamp(t time.Time) string {
	return t.UTC().Format(TimestampLayout)
}

// ParseTimestamp parses a schema timestamp. It returns an invalid Error for
// anything the schema's pattern would refuse.
func ParseTimestamp(s string) (time.Time, error) {
	if !matchTimestamp(s) {
		return time.Time{}, Invalidf("bad_timestamp", "timestamp %q is not RFC 3339 UTC with a trailing Z", s)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, Invalidf("bad_timestamp", "timestamp %q: %v", s, fmt.Sprint(err))
	}
	return t, nil
}
