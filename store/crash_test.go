package store_test

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store"
)

// killAfterAcks runs this test binary as a child running only test child
// with env set, reads its stdout for lines "<ack> <id>" (a line "error …"
// fails t), and kills it with SIGKILL once it has acknowledged max ids or
// within has passed. It returns the ids acknowledged before the kill, and
// fails t when there are fewer than min of them.
func killAfterAcks(t *testing.T, child, env, ack string, max, min int, within time.Duration) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var acked []string
	lines := bufio.NewScanner(out)
	deadline := time.Now().Add(within)
	for len(acked) < max && time.Now().Before(deadline) && lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) >= 2 && f[0] == ack {
			acked = append(acked, f[1])
		} else if len(f) > 0 && f[0] == "error" {
			t.Fatalf("child: %s", lines.Text())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if len(acked) < min {
		t.Fatalf("the child acknowledged only %d: %s", len(acked), stderr.String())
	}
	return acked
}

// crashOnStore makes an empty store at a new SQLite file, runs child on
// it (its env variable envName set to the file's path) and kills it as
// killAfterAcks does, then opens the store again. It returns the store and
// the ids acknowledged before the kill.
func crashOnStore(t *testing.T, child, envName string, max, min int) (*store.DB, []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crash.db")
	db, err := store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	acked := killAfterAcks(t, child, envName+"="+path, "acked", max, min, 30*time.Second)
	db, err = store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, acked
}
