package storetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caduceus-dev/caduceus/store"
)

// KillAfterAcks runs this test binary as a child running only test child
// with env set, reads its stdout for lines "<ack> <id>" (a line "error …"
// fails t), and kills it with SIGKILL once it has acknowledged max ids or
// within has passed. It returns the ids acknowledged before the kill, and
// fails t when there are fewer than min of them.
func KillAfterAcks(t *testing.T, child, env, ack string, max, min int, within time.Duration) []string {
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

// CrashOnStore makes an empty store at a new SQLite file, runs child on
// it (its env variable envName set to the file's path) and kills it as
// KillAfterAcks does, then opens the store again. It returns the store and
// the ids acknowledged before the kill.
func CrashOnStore(t *testing.T, child, envName string, max, min int) (*store.DB, []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "crash.db")
	db, err := store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	acked := KillAfterAcks(t, child, envName+"="+path, "acked", max, min, 30*time.Second)
	db, err = store.Open(context.Background(), "sqlite:"+path, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, acked
}

// AckPosts is a crash test child's clients: 8 of them post the JSON
// body(client, i) to url in turn, and print "acked <id>" (the answer's
// header idHeader) for each answer they have read in full, until the process is killed; an
// error prints "error …" and exits.
func AckPosts(url, idHeader string, body func(c, i int) string) {
	var out sync.Mutex
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				resp, err := http.Post(url, "application/json", strings.NewReader(body(c, i)))
				if err != nil {
					fmt.Printf("error %v\n", err)
					os.Exit(1)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					fmt.Printf("error status %d\n", resp.StatusCode)
					os.Exit(1)
				}
				out.Lock()
				fmt.Printf("acked %s\n", resp.Header.Get(idHeader))
				out.Unlock()
			}
		})
	}
	wg.Wait()
}

// CPUTime is the process's user plus system CPU time so far.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
