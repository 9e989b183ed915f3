//go:build !unix

package contracttest

import "time"

func cpuTime() (time.Duration, bool) { return 0, false }
