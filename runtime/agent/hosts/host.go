package hosts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
)

// Ready is the host's first message: which protocol it speaks, what it
// runs on, and how loading each graph went.
type Ready struct {
	Protocol  int                  `json:"protocol"`
	Language  string               `json:"language"`
	Runtime   string               `json:"runtime"`   // e.g. "node v20.20.2"
	LangGraph string               `json:"langgraph"` // version of the user's langgraph library
	Graphs    map[string]GraphLoad `json:"graphs"`
	// HTTP is the custom routes' load result, when the project has some.
	HTTP *GraphLoad `json:"http,omitempty"`
}

// GraphLoad is one graph's load result.
type GraphLoad struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Name is the graph's own name (a compiled Python graph's name when it
	// is not the default), which names its system assistant.
	Name string `json:"name,omitempty"`
	// Schemas are the graph's JSON schemas (input, output, state, config, context) when the host could derive them.
	Schemas json.RawMessage `json:"schemas,omitempty"`
	// OpenAPI is the custom routes' OpenAPI document (the "http" result
	// only), when the host could derive one from the app.
	OpenAPI json.RawMessage `json:"openapi,omitempty"`
}

// Spec says how to start a host.
type Spec struct {
	Language string
	Argv     []string
	Dir      string
	Env      []string
	// ReadyTimeout bounds the time from start to "ready".
	ReadyTimeout time.Duration
	// Nice lowers the host process's CPU priority below Slipway's by as
	// many steps (0 to MaxNice; see startNiced).
	Nice int
}

// Host supervises one language host process: it starts it, waits for
// "ready", restarts it with back-off when it dies, and routes calls to the
// current process.
type Host struct {
	spec    Spec
	handler Handler
	log     zerolog.Logger

	mu      sync.Mutex
	conn    *Conn
	cmd     *exec.Cmd
	up      chan struct{} // closed when conn is ready; replaced on restart
	ready   Ready
	stopped bool
	tail    tailBuffer // the current process's last stderr bytes
	// restarts counts the processes started after the first (metrics).
	restarts atomic.Int64
}

// Restarts is how many times the host died and was started again.
func (h *Host) Restarts() int64 { return h.restarts.Load() }

// ErrHostDied is wrapped by calls whose host process ended under them.
var ErrHostDied = errors.New("the language host exited")

// Start starts the host and waits until it is ready. The caller decides
// whether the load results are acceptable; the process keeps running (and
// is restarted when it dies) until ctx ends.
func Start(ctx context.Context, spec Spec, h Handler, log zerolog.Logger) (*Host, Ready, error) {
	if spec.ReadyTimeout <= 0 {
		spec.ReadyTimeout = 2 * time.Minute
	}
	host := &Host{spec: spec, handler: h, log: log.With().Str("host", spec.Language).Logger(), up: make(chan struct{})}
	r, err := host.launch(false)
	if err != nil {
		host.kill()
		return nil, Ready{}, err
	}
	go host.supervise(ctx)
	return host, r, nil
}

// Pid is the current host process's id (0 when none is running).
func (h *Host) Pid() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil || h.cmd.Process == nil {
		return 0
	}
	return h.cmd.Process.Pid
}

// launch starts one process and waits for its ready message. A restart
// is counted before the process is marked up, so whoever sees it up (Pick,
// a test) also sees it counted.
func (h *Host) launch(restart bool) (Ready, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return Ready{}, fmt.Errorf("socketpair for the %s host: %w", h.spec.Language, err)
	}
	parent := os.NewFile(uintptr(fds[0]), "host-channel")
	child := os.NewFile(uintptr(fds[1]), "host-channel-child")
	defer child.Close()
	nc, err := net.FileConn(parent)
	parent.Close()
	if err != nil {
		return Ready{}, fmt.Errorf("host channel: %w", err)
	}
	cmd := exec.Command(h.spec.Argv[0], h.spec.Argv[1:]...)
	cmd.Dir, cmd.Env = h.spec.Dir, h.spec.Env
	cmd.ExtraFiles = []*os.File{child} // fd 3
	h.mu.Lock()
	h.tail = tailBuffer{}
	h.mu.Unlock()
	out := &lineLog{log: h.log, tail: &h.tail, mu: &h.mu}
	cmd.Stdout, cmd.Stderr = out, out
	// The host ends with Slipway even when Slipway is killed: Pdeathsig,
	// besides EOF on its channel. Its own process group lets a restart
	// kill what it spawned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	readyCh := make(chan Ready, 1)
	rh := &readyHandler{Handler: h.handler, ready: readyCh}
	conn := NewConn(nc, rh)
	waited, niceErr, err := startNiced(cmd, h.spec.Nice)
	if err != nil {
		conn.Close()
		return Ready{}, fmt.Errorf("start the %s host (%s): %w", h.spec.Language, h.spec.Argv[0], err)
	}
	if niceErr != nil {
		h.log.Warn().Err(niceErr).Msg("the host runs at the agent's own CPU priority")
	}
	h.mu.Lock()
	h.cmd, h.conn = cmd, conn
	h.mu.Unlock()
	exited := make(chan error, 1)
	go func() { exited <- <-waited; conn.Close() }()
	timer := time.NewTimer(h.spec.ReadyTimeout)
	defer timer.Stop()
	select {
	case r := <-readyCh:
		if r.Protocol != ProtocolVersion {
			return r, fmt.Errorf("the %s host speaks protocol version %d; this Slipway speaks %d", h.spec.Language, r.Protocol, ProtocolVersion)
		}
		if restart {
			h.restarts.Add(1)
		}
		h.mu.Lock()
		h.ready = r
		close(h.up)
		h.mu.Unlock()
		go func() { <-conn.Done(); <-exited }()
		return r, nil
	case err := <-exited:
		<-conn.Done()
		return Ready{}, fmt.Errorf("the %s host exited before it was ready (%v): %s", h.spec.Language, err, h.Tail())
	case <-timer.C:
		return Ready{}, fmt.Errorf("the %s host was not ready within %v: %s", h.spec.Language, h.spec.ReadyTimeout, h.Tail())
	}
}

// supervise restarts the host when it dies, with back-off.
func (h *Host) supervise(ctx context.Context) {
	backoff := 250 * time.Millisecond
	for {
		h.mu.Lock()
		conn := h.conn
		h.mu.Unlock()
		started := time.Now()
		select {
		case <-ctx.Done():
			h.mu.Lock()
			h.stopped = true
			h.mu.Unlock()
			h.kill()
			return
		case <-conn.Done():
		}
		h.kill()
		h.log.Error().Str("stderr_tail", h.Tail()).Msg("language host exited; restarting")
		h.mu.Lock()
		h.up = make(chan struct{})
		h.mu.Unlock()
		if time.Since(started) > 30*time.Second {
			backoff = 250 * time.Millisecond
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 10*time.Second)
			if _, err := h.launch(true); err != nil {
				h.log.Error().Err(err).Msg("restart language host")
				h.kill()
				continue
			}
			break
		}
	}
}

// kill ends the current process group, if any.
func (h *Host) kill() {
	h.mu.Lock()
	cmd := h.cmd
	h.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// Restart kills the current process; the supervisor starts a new one
// (its calls in flight fail with ErrHostDied).
func (h *Host) Restart(reason string) {
	h.log.Warn().Str("reason", reason).Msg("restarting language host")
	h.kill()
}

// Tail is the end of the current (or last) process's stderr.
func (h *Host) Tail() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return strings.TrimSpace(h.tail.String())
}

// isUp says whether the current process is ready (not restarting).
func (h *Host) isUp() bool {
	h.mu.Lock()
	up := h.up
	h.mu.Unlock()
	select {
	case <-up:
		return true
	default:
		return false
	}
}

// Ready returns the current process's ready message.
func (h *Host) Ready() Ready {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ready
}

// Call sends a request to the host, waiting for it to be up first. When
// the process dies during the call, the error wraps ErrHostDied and carries
// the tail of its stderr.
func (h *Host) Call(ctx context.Context, method string, params, out any) error {
	h.mu.Lock()
	up := h.up
	h.mu.Unlock()
	select {
	case <-up:
	case <-ctx.Done():
		return ctx.Err()
	}
	h.mu.Lock()
	conn := h.conn
	h.mu.Unlock()
	err := conn.Call(ctx, method, params, out)
	if err != nil && ctx.Err() == nil && conn.Err() != nil {
		// Give the exit a moment to flush the last stderr lines.
		time.Sleep(50 * time.Millisecond)
		return fmt.Errorf("%w: %s", ErrHostDied, h.Tail())
	}
	return err
}

// Notify sends a notification to the current process (dropped while it is down).
func (h *Host) Notify(method string, params any) error {
	h.mu.Lock()
	conn := h.conn
	h.mu.Unlock()
	return conn.Notify(method, params)
}

// readyHandler catches the "ready" notification and passes everything else on.
type readyHandler struct {
	Handler
	ready chan Ready
	once  sync.Once
}

func (r *readyHandler) Notify(method string, p json.RawMessage) {
	if method == "ready" {
		var rd Ready
		if err := json.Unmarshal(p, &rd); err == nil {
			r.once.Do(func() { r.ready <- rd })
		}
		return
	}
	r.Handler.Notify(method, p)
}

// lineLog writes a host's output to the agent's log, a line per entry,
// and keeps its tail for error messages.
type lineLog struct {
	log  zerolog.Logger
	tail *tailBuffer
	mu   *sync.Mutex
	buf  []byte
}

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.tail.Write(p)
	l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if line := strings.TrimRight(string(l.buf[:i]), "\r"); line != "" {
			l.log.Info().Str("stream", "stderr").Msg(line)
		}
		l.buf = l.buf[i+1:]
	}
	if len(l.buf) > 64<<10 { // a line without end: log what we have
		l.log.Info().Str("stream", "stderr").Msg(string(l.buf))
		l.buf = nil
	}
	return len(p), nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
}

func (t *tailBuffer) String() string { return string(t.b) }
