package main

import (
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// podman runs podman with runc (crun refuses this machine's hybrid cgroup
// setup) and returns its combined output.
func podman(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command("podman", append([]string{"--runtime", "runc"}, args...)...).CombinedOutput()
	return string(out), err
}

func mustPodman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podman(t, args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestContainerImage builds the image with `make image` (Containerfile,
// FROM scratch, nothing pulled), runs it with Debian's podman, and checks:
// /healthz answers on a random port, the HEALTHCHECK (caduceus health)
// passes, the server runs as a non-root user, the binary is stamped, and
// the data in the /data volume survives a stop and start: the admin key
// the first start made still works and no second one is made. The podman
// flags the sandbox needs are here, not in the image. Every container,
// volume and image the test made is removed.
func TestContainerImage(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the container test builds an image")
	}
	for _, tool := range []string{"podman", "runc", "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install -y podman runc; .ci/run installs them)", tool)
		}
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	var b [5]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	image := "localhost/caduceus-test:" + id
	name, volume := "caduceus-test-"+id, "caduceus-test-"+id

	build := exec.Command("make", "-s", "image", "IMAGE="+image, "IMAGE_CONTEXT="+filepath.Join(t.TempDir(), "context"))
	build.Dir = root
	t.Cleanup(func() { podman(t, "rmi", "-f", image) })
	start := time.Now()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("make image: %v\n%s", err, out)
	}
	t.Logf("make image: %s", time.Since(start).Round(time.Second))
	size := mustPodman(t, "image", "inspect", "--format", "{{.Size}}", image)
	t.Logf("image size: %s bytes", strings.TrimSpace(size))
	cfg := mustPodman(t, "image", "inspect", "--format", "{{.Config.User}} {{json .Config.Volumes}} {{.HealthCheck}}", image)
	if !strings.HasPrefix(cfg, "65532:65532 ") || !strings.Contains(cfg, `"/data"`) || !strings.Contains(cfg, "caduceus health") {
		t.Errorf("image config (user, volumes, healthcheck): %s", cfg)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url := "http://" + addr

	mustPodman(t, "volume", "create", volume)
	t.Cleanup(func() { podman(t, "volume", "rm", "-f", volume) })
	t.Cleanup(func() { podman(t, "rm", "-f", "-t", "5", name) })
	mustPodman(t, "run", "-d", "--name", name, "--network", "host",
		"--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096",
		"-e", "CADUCEUS_ADDR="+addr, "-v", volume+":/data", image)

	// healthy waits until serve in the container says it listens (for the
	// starts-th time: the log keeps the starts before), reading its log
	// as podman follows it, and then /healthz must answer 200. A
	// container that stops first fails the test with its log.
	starts := 0
	healthy := func() {
		t.Helper()
		starts++
		follow := exec.Command("podman", "--runtime", "runc", "logs", "-f", name)
		var log syncBuffer
		follow.Stdout, follow.Stderr = &log, &log
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		exited, done := make(chan int, 1), make(chan struct{})
		go func() {
			follow.Wait()
			exited <- follow.ProcessState.ExitCode()
			close(done)
		}()
		defer func() {
			follow.Process.Kill()
			<-done
		}()
		log.await(t, regexp.MustCompile("(?s)"+strings.Repeat(listenAnyRE.String()+".*?", starts-1)+listenAnyRE.String()), exited)
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			t.Fatalf("/healthz once serve listened: %v\n%s", err, log.String())
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("/healthz once serve listened: %d\n%s", resp.StatusCode, log.String())
		}
	}
	healthy()
	logs := mustPodman(t, "logs", name)
	m := keyRE.FindStringSubmatch(logs)
	if m == nil {
		t.Fatalf("the first start printed no admin key:\n%s", logs)
	}
	admin := m[1]
	if out, err := podman(t, "healthcheck", "run", name); err != nil {
		t.Errorf("the image's HEALTHCHECK failed: %v\n%s", err, out)
	}
	if out := mustPodman(t, "top", name, "user"); !regexp.MustCompile(`(?m)^65532\s*$`).MatchString(out) {
		t.Errorf("the server does not run as 65532: %s", out)
	}
	// The build host's CA certificates and tzdata are in the image (scratch
	// has neither of its own).
	export := exec.Command("podman", "--runtime", "runc", "export", name)
	tarOut, err := export.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	list := exec.Command("tar", "-t")
	list.Stdin = tarOut
	var files strings.Builder
	list.Stdout = &files
	if err := export.Start(); err != nil {
		t.Fatal(err)
	}
	if err := list.Run(); err != nil {
		t.Fatal(err)
	}
	export.Wait()
	for _, want := range []string{"etc/ssl/certs/ca-certificates.crt", "usr/share/zoneinfo/America/New_York", "usr/local/bin/caduceus", "data/"} {
		if !regexp.MustCompile(`(?m)^\.?/?` + regexp.QuoteMeta(want) + `$`).MatchString(files.String()) {
			t.Errorf("the image lacks %s", want)
		}
	}
	ver := mustPodman(t, "exec", name, "/usr/local/bin/caduceus", "version")
	if !regexp.MustCompile(`^caduceus \S+ commit [0-9a-f]{40} go\S+ linux/\S+ schema \S+\n$`).MatchString(ver) {
		t.Errorf("caduceus version in the image: %q", ver)
	}
	keyID, err := createKey(http.DefaultClient, url, admin)
	if err != nil {
		t.Fatal(err)
	}

	mustPodman(t, "stop", "-t", "10", name)
	if out := mustPodman(t, "inspect", "--format", "{{.State.ExitCode}}", name); strings.TrimSpace(out) != "0" {
		t.Errorf("serve exited %s on podman stop (SIGTERM)", out)
	}
	mustPodman(t, "start", name)
	healthy()
	req, _ := http.NewRequest("GET", url+"/v1/admin/keys", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the admin key after a restart: %d", resp.StatusCode)
	}
	out := mustPodman(t, "exec", name, "/usr/local/bin/caduceus", "keys", "list")
	if !strings.Contains(out, keyID) {
		t.Errorf("the key made before the restart is gone: %s", out)
	}
	if logs := mustPodman(t, "logs", name); strings.Count(logs, "no admin key existed") != 1 {
		t.Errorf("a restart made another admin key:\n%s", logs)
	}
}

// testSystemdUnit (TestExamples/systemd): examples/systemd/caduceus.service restarts on failure,
// is hardened, reads its config from /etc/caduceus, and passes
// `systemd-analyze verify` without a warning (with ExecStart pointed at
// this binary: verify checks the program exists). A misspelt directive
// makes verify warn, so a clean run means something. Its serve command line
// is one this binary accepts.
func testSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Fatal("systemd-analyze is not installed (apt-get install -y systemd; .ci/run installs it)")
	}
	unit, err := os.ReadFile(ex("systemd/caduceus.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\nRestart=on-failure\n", "--config /etc/caduceus/caduceus.yaml", "\nNoNewPrivileges=yes\n",
		"\nProtectSystem=strict\n", "\nDynamicUser=yes\n", "\nStateDirectory=caduceus\n", "\nCapabilityBoundingSet=\n"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("the unit lacks %q", strings.TrimSpace(want))
		}
	}
	// systemd's SIGKILL must come after serve's own bound on a stop (the
	// requests in flight), so its background work and the store get their turn.
	if m := regexp.MustCompile(`\nTimeoutStopSec=(\S+)\n`).FindStringSubmatch(string(unit)); m == nil {
		t.Error("the unit sets no TimeoutStopSec")
	} else if d, err := time.ParseDuration(m[1]); err != nil || d <= 30*time.Second {
		t.Errorf("TimeoutStopSec=%s: want a duration longer than serve's --shutdown-timeout default (30s)", m[1])
	}
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	verify := func(text string) (string, error) {
		dir := t.TempDir()
		file := filepath.Join(dir, "caduceus.service")
		if err := os.WriteFile(file, []byte(strings.ReplaceAll(text, "/usr/local/bin/caduceus", bin)), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("systemd-analyze", "verify", file).CombinedOutput()
		return string(out), err
	}
	if out, err := verify(string(unit)); err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// systemd's own exposure score of the unit (0 best, 10 worst; offline:
	// no running systemd is needed) stays at most 2.0.
	dir := t.TempDir()
	file := filepath.Join(dir, "caduceus.service")
	os.WriteFile(file, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/caduceus", bin)), 0o644)
	if out, err := exec.Command("systemd-analyze", "security", "--offline=yes", "--threshold=20", file).CombinedOutput(); err != nil {
		t.Errorf("systemd-analyze security: the unit's exposure is above 2.0: %v\n%s", err, out)
	} else if m := regexp.MustCompile(`Overall exposure level for caduceus.service: (\S+)`).FindSubmatch(out); m != nil {
		t.Logf("systemd-analyze security: exposure %s", m[1])
	}
	bad := strings.Replace(string(unit), "ProtectSystem=strict", "ProtectSistem=strict", 1)
	if out, _ := verify(bad); !strings.Contains(out, "ProtectSistem") {
		t.Errorf("systemd-analyze verify did not name a misspelt directive: %q", out)
	}

	exec_ := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/caduceus (.*)$`).FindStringSubmatch(string(unit))
	if exec_ == nil {
		t.Fatal("no ExecStart running /usr/local/bin/caduceus")
	}
	args := strings.Fields(exec_[1])
	missing := filepath.Join(t.TempDir(), "caduceus.yaml")
	for i, a := range args {
		switch a {
		case "/etc/caduceus/caduceus.yaml":
			args[i] = missing
		case "/var/lib/caduceus":
			args[i] = t.TempDir()
		}
	}
	code, _, stderr := cli(t, args...)
	if code != 2 || !strings.Contains(stderr, "config: open "+missing) {
		t.Errorf("the unit's command line %v: exit %d: %s (want only the missing config refused)", args, code, stderr)
	}
}
