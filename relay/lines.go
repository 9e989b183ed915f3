package relay

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
)

// SessionKeyLines is `caduceus relay session-key`: it reads one
// SessionSource JSON object per line from in and writes one line per input
// line to out — the key, or "error: <why>" for a source the gateway could not
// key — and goes on to the next line. Blank lines are skipped. It returns an
// error only when reading in or writing out fails.
func SessionKeyLines(in io.Reader, out io.Writer, opts SessionKeyOptions) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	w := bufio.NewWriter(out)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		src, err := ParseSource(line)
		var key string
		if err == nil {
			key, err = SessionKey(src, opts)
		}
		if err != nil {
			if _, werr := fmt.Fprintf(w, "error: %v\n", err); werr != nil {
				return werr
			}
			continue
		}
		if _, err := fmt.Fprintln(w, key); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		_ = w.Flush()
		return fmt.Errorf("relay: session-key: read: %w", err)
	}
	return w.Flush()
}
