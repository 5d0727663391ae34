// Package servertest starts `slipway serve` for HTTP-level tests and offers
// small JSON request helpers. A Server runs either in the test's process
// (StartWith, with the factory of package apptest: no build, no exec) or,
// for what needs a real process (signals, crashes, the sandbox, docker,
// other users), as the binary, built once per test binary (Start).
package servertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// RepoRoot is the directory holding go.mod.
func RepoRoot() string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			panic("servertest: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Binary builds ./ (the slipway command) once and returns its path. Under
// -short it skips the test instead: every test that runs the binary (a
// `slipway serve` or `slipway agent` process, the CLI, the sandbox) is an
// end-to-end test, left out of the fast loop; the HTTP suites run
// in-process (package apptest) and stay in it.
func Binary(t testing.TB) string {
	t.Helper()
	SkipShort(t, "a test that runs the slipway binary")
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "slipway-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "slipway")
		cmd := exec.Command("go", "build", "-o", binPath, ".")
		cmd.Dir = RepoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// FreeAddr returns a loopback address with a currently free port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// Server is a running `slipway serve`.
type Server struct {
	URL     string
	Key     string // the initial organization-admin key
	DataDir string
	Env     map[string]string
	// InstanceID is the install's identity (GET /info): the docker
	// runtime labels what it creates with it, and tests clean up by it.
	InstanceID string
	cmd        *exec.Cmd
	logs       *SyncBuffer
	t          testing.TB
	bin        string              // the binary to run; Binary(t) when empty
	cred       *syscall.Credential // run as another user (the test is root)
	// factory, when set, builds the control plane in this process
	// (StartWith) instead of exec'ing the binary; app and hs serve it.
	factory Factory
	app     App
	hs      *httptest.Server
	// agentsHS serves SLIPWAY_AGENTS_ADDR when the env names one.
	agentsHS *httptest.Server
}

// StartAs is Start running bin (a copy of Binary that the user can
// execute) with the credentials cred; env must name a data directory that
// user owns.
func StartAs(t testing.TB, env map[string]string, bin string, cred *syscall.Credential) *Server {
	t.Helper()
	s := &Server{Env: map[string]string{}, t: t, bin: bin, cred: cred}
	for k, v := range env {
		s.Env[k] = v
	}
	if s.Env["SLIPWAY_ADDR"] == "" {
		s.Env["SLIPWAY_ADDR"] = FreeAddr(t)
	}
	s.DataDir = s.Env["SLIPWAY_DATA_DIR"]
	s.URL = "http://" + s.Env["SLIPWAY_ADDR"]
	s.start()
	t.Cleanup(s.Stop)
	return s
}

// SyncBuffer collects a process's output while a test may read it.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Start runs `slipway serve` with env added to a minimal environment. When
// env has no SLIPWAY_DATA_DIR a fresh temporary one is used. The server is
// stopped when the test ends.
func Start(t testing.TB, env map[string]string) *Server {
	t.Helper()
	s := StartUnmanaged(t, env)
	t.Cleanup(s.Stop)
	return s
}

// StartUnmanaged is Start for servers that outlive one test (benchmarks
// sharing a server): the caller stops it and removes its data directory.
func StartUnmanaged(t testing.TB, env map[string]string) *Server {
	t.Helper()
	s := &Server{Env: unmanagedEnv(t, env), t: t}
	if s.Env["SLIPWAY_ADDR"] == "" {
		s.Env["SLIPWAY_ADDR"] = FreeAddr(t)
	}
	if s.Env["SLIPWAY_RUNTIME"] == "" {
		s.Env["SLIPWAY_RUNTIME"] = "fake"
	}
	s.DataDir = s.Env["SLIPWAY_DATA_DIR"]
	s.URL = "http://" + s.Env["SLIPWAY_ADDR"]
	s.start()
	return s
}

// unmanagedEnv copies env, with a fresh data directory when it names none
// (removed when the test ends, unless the caller manages the server), for
// the servers the caller stops.
func unmanagedEnv(t testing.TB, env map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		out[k] = v
	}
	if out["SLIPWAY_DATA_DIR"] == "" {
		dir, err := os.MkdirTemp("", "slipway-test-")
		if err != nil {
			t.Fatal(err)
		}
		out["SLIPWAY_DATA_DIR"] = dir
		if !unmanaged(t) {
			t.Cleanup(func() { os.RemoveAll(dir) })
		}
	}
	return out
}

// unmanaged reports whether cleanup must be left to the caller: a
// benchmark's Cleanup runs after each calibration round.
func unmanaged(t testing.TB) bool {
	_, isB := t.(*testing.B)
	return isB
}

func (s *Server) start() {
	t := s.t
	t.Helper()
	if s.factory != nil {
		s.startInProcess(nil)
		return
	}
	s.logs = &SyncBuffer{}
	bin := s.bin
	if bin == "" {
		bin = Binary(t)
	}
	s.cmd = launch(t, bin, "serve", s.Env, s.cred, s.logs)
	checkAPI(s.URL)
	waitReady(t, s.cmd, s.URL, "slipway", s.logs)
	s.afterStart()
}

// afterStart learns what a started server reports about itself: its
// instance id and its initial key.
func (s *Server) afterStart() {
	t := s.t
	t.Helper()
	if r, err := http.Get(s.URL + "/info"); err == nil {
		var info struct {
			InstanceID string `json:"instance_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&info)
		r.Body.Close()
		if s.InstanceID == "" {
			register(t, s)
		}
		s.InstanceID = info.InstanceID
	}
	if key := s.Env["SLIPWAY_BOOTSTRAP_API_KEY"]; key != "" {
		s.Key = key
	} else if b, err := os.ReadFile(filepath.Join(s.DataDir, "initial-api-key")); err == nil {
		s.Key = strings.TrimSpace(string(b))
	}
}

var (
	startedMu sync.Mutex
	started   = map[testing.TB][]*Server{}
)

func register(t testing.TB, s *Server) {
	// Kept for the life of the test binary: cleanups registered before
	// the server started (they run after its own) still read it.
	startedMu.Lock()
	defer startedMu.Unlock()
	started[t] = append(started[t], s)
}

// Started lists the servers t started, so that its cleanup removes what
// they created outside their data dirs (and nothing of anyone else's).
func Started(t testing.TB) []*Server {
	startedMu.Lock()
	defer startedMu.Unlock()
	return append([]*Server(nil), started[t]...)
}

// Logs returns everything the process printed so far.
func (s *Server) Logs() string { return s.logs.String() }

// Stop sends SIGTERM and waits for the process to exit (an in-process
// server: closes its App).
func (s *Server) Stop() {
	if s.factory != nil {
		s.stopInProcess()
		return
	}
	terminate(s.cmd, 25*time.Second)
	s.cmd = nil
}

// Kill sends SIGKILL (a crash) and waits for the process to die. Only a
// real process can crash: an in-process server fails the test.
func (s *Server) Kill() {
	if s.factory != nil {
		s.t.Fatal("servertest: Kill needs a server started as a process (Start), not in-process")
	}
	kill(s.cmd)
	s.cmd = nil
}

// launch starts `bin sub` with env added to a minimal environment (as the
// user cred, when not nil), its output going to logs.
func launch(t testing.TB, bin, sub string, env map[string]string, cred *syscall.Credential, logs *SyncBuffer) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, sub)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// waitReady waits up to 15s for GET url/ok to answer 200.
func waitReady(t testing.TB, cmd *exec.Cmd, url, what string, logs *SyncBuffer) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := http.Get(url + "/ok")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			t.Fatalf("%s did not start: %v\n%s", what, err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// terminate sends cmd's process SIGTERM and waits for it to exit, killing
// it after grace.
func terminate(cmd *exec.Cmd, grace time.Duration) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		_ = cmd.Process.Kill()
		<-done
	}
}

// kill sends cmd's process SIGKILL and waits for it to die.
func kill(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
}

// Restart starts the server again on the same data dir and address.
func (s *Server) Restart() {
	s.Stop()
	s.start()
}

// Response is a decoded JSON response.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic value.
func (r *Response) JSON() any {
	var v any
	_ = json.Unmarshal(r.Body, &v)
	return v
}

// Map decodes the body as an object (nil when it is not one).
func (r *Response) Map() map[string]any {
	m, _ := r.JSON().(map[string]any)
	return m
}

// Do sends a request with the server's initial key unless headers set
// X-Api-Key or Authorization themselves ("" removes the key). body may be
// nil, a string or []byte (sent raw), or anything else (sent as JSON); it
// is labelled application/json unless its bytes are binary (a gzip archive).
func (s *Server) Do(method, path string, body any, headers ...string) *Response {
	s.t.Helper()
	return Do(s.t, method, s.URL+path, body, append([]string{"X-Api-Key", s.Key}, headers...)...)
}

// Do performs one request against url. headers are name, value pairs; a
// later pair overrides an earlier one and an empty value removes the header.
func Do(t testing.TB, method, url string, body any, headers ...string) *Response {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		// JSON unless the bytes are plainly something else (a gzipped
		// source archive): the document check reads the body by its type.
		ct := "application/json"
		if sniffed := http.DetectContentType(raw); len(raw) > 0 && !strings.HasPrefix(sniffed, "text/") {
			ct = sniffed
		}
		req.Header.Set("Content-Type", ct)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	CheckExchange(t, method, url, req.Header, raw, resp.StatusCode, resp.Header, out)
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: out}
}

// PID is the server's process id (0 when stopped or in-process).
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// RSS returns the resident set size of the server process in bytes.
func (s *Server) RSS() (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.PID()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", s.PID())
}

// LinesWith returns the lines of log that mention what, for a failure
// message that shows what the server did about one deployment.
func LinesWith(log, what string) string {
	var b strings.Builder
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, what) {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
