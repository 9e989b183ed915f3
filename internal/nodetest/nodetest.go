// Package nodetest is what the tests that run Node share: node_modules
// installed once, whichever test package needs them first.
package nodetest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// NPMCI makes sure dir (a directory with a package-lock.json) has its
// node_modules, running `npm ci` there when it has none. The test
// packages that run Node (this one, the Worker's and the JavaScript SDKs'
// tests) run at once under `go test ./...`, and npm ci removes
// node_modules before it installs, so one install runs at a time, under a
// lock file, and a directory counts as installed only once npm wrote its
// hidden lockfile (node_modules/.package-lock.json), at the end.
func NPMCI(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	done := filepath.Join(dir, "node_modules", ".package-lock.json")
	if _, err := os.Stat(done); err == nil {
		return nil
	}
	sum := sha256.Sum256([]byte(dir))
	lock, err := os.OpenFile(filepath.Join(os.TempDir(), "caduceus-npm-"+hex.EncodeToString(sum[:8])+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if _, err := os.Stat(done); err == nil { // another process installed it
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s (Node 20 and npm are needed): %v\n%s", dir, err, out)
	}
	return nil
}
