package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"slipway/runtime"
)

// Event is one thing a run emits: values (the whole state), updates (a
// node's update), messages ([chunk, metadata]), custom, or an interrupt.
type Event struct {
	Mode string `json:"event"`
	Data any    `json:"data"`
}

// Request is what a graph receives for one run.
type Request struct {
	Input       map[string]any `json:"input"`
	Command     map[string]any `json:"command,omitempty"`
	Values      map[string]any `json:"values"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	ThreadID    string         `json:"thread_id"`
	RunID       string         `json:"run_id"`
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	// Metadata is the assistant's metadata under the run's: a language
	// host puts it in the run's config, and so in its checkpoints'
	// metadata, as the reference servers do.
	Metadata map[string]any `json:"metadata,omitempty"`
}

// Graph executes runs. emit is called with each update a node makes (the
// engine folds it into the thread state and streams it); Run returns when
// the run is done.
type Graph interface {
	Run(ctx context.Context, req Request, emit func(node string, update map[string]any, extra []Event) error) error
}

// Echo is the built-in graph: it appends an AI message that repeats the
// last human message, after sleeping `sleep` seconds when the input asks
// (tests need slow runs).
type Echo struct{}

func (Echo) Run(ctx context.Context, req Request, emit func(string, map[string]any, []Event) error) error {
	if s, ok := req.Input["sleep"]; ok {
		secs, ok := s.(float64)
		if !ok || secs < 0 || secs > 3600 {
			return fmt.Errorf("sleep must be a number of seconds between 0 and 3600")
		}
		select {
		case <-time.After(time.Duration(secs * float64(time.Second))):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	msgs, _ := req.Values["messages"].([]any)
	var last string
	for i := len(msgs) - 1; i >= 0; i-- {
		if m, ok := msgs[i].(map[string]any); ok && m["type"] == "human" {
			last = contentText(m["content"])
			break
		}
	}
	ai, _ := NormalizeMessage(map[string]any{"type": "ai", "content": last})
	chunk := map[string]any{"type": "AIMessageChunk", "content": last, "id": ai["id"]}
	return emit("echo", map[string]any{"messages": []any{ai}},
		[]Event{{Mode: "messages", Data: []any{chunk, map[string]any{"langgraph_node": "echo"}}}})
}

func contentText(c any) string {
	switch v := c.(type) {
	case string:
		return v
	case []any:
		var b strings.Builder
		for _, block := range v {
			if m, ok := block.(map[string]any); ok {
				if t, ok := m["text"].(string); ok {
					b.WriteString(t)
				}
			}
		}
		return b.String()
	}
	return ""
}

// Command runs an external program per run, speaking a small,
// language-neutral protocol: the Request as one JSON document on stdin;
// JSON Lines on stdout, each {"event": "updates", "node": "...", "data":
// {...}} (folded into the state), {"event": "values", "data": {...}}
// (replaces the state), or {"event": "custom"|"messages", "data": ...}
// (streamed as is), or {"event": "interrupt", "data": ...} (the run stops
// to ask for input: the thread becomes interrupted until a run answers it,
// typically with command {"resume": ...}, which the program receives in
// "command"); exit status 0 is success, anything else an error whose
// message is the tail of stderr. Cancellation sends SIGTERM, then SIGKILL
// after Grace.
type Command struct {
	Argv  []string
	Dir   string
	Env   []string
	Grace time.Duration
	// Stderr, when set, also receives the program's stderr, one whole
	// line at a time naming the graph and the run: the agent passes its
	// own stderr, so that what a graph prints reaches the deployment's
	// logs.
	Stderr io.Writer
	Name   string // the graph id, for those lines
}

// ErrProtocol marks output a command graph should not have produced.
var ErrProtocol = errors.New("graph protocol error")

func (c *Command) Run(ctx context.Context, req Request, emit func(string, map[string]any, []Event) error) error {
	in, err := json.Marshal(req)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.Argv[0], c.Argv[1:]...)
	cmd.Dir, cmd.Env = c.Dir, c.Env
	cmd.Stdin = bytes.NewReader(in)
	var stderr tailBuffer
	cmd.Stderr = &stderr
	if c.Stderr != nil {
		lines := runtime.NewLineWriter(prefixedLines{w: c.Stderr, prefix: fmt.Sprintf("graph %s run %s: ", c.Name, req.RunID)},
			"", "", "stderr")
		defer lines.Close()
		cmd.Stderr = io.MultiWriter(&stderr, lines)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start graph command %q: %w", c.Argv[0], err)
	}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			select {
			case <-stopped:
			case <-time.After(c.Grace):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		case <-stopped:
		}
	}()
	readErr := ReadEvents(out, func(e ProtocolEvent) error {
		switch e.Event {
		case "updates":
			return emit(e.Node, e.Data.(map[string]any), nil)
		case "values":
			return emit("", e.Data.(map[string]any), []Event{{Mode: "__replace__"}})
		case "interrupt":
			return emit("", nil, []Event{{Mode: "__interrupt__", Data: e.Data}})
		default:
			return emit("", nil, []Event{{Mode: e.Event, Data: e.Data}})
		}
	})
	if readErr != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_, _ = io.Copy(io.Discard, out)
	}
	werr := cmd.Wait()
	close(stopped)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case readErr != nil:
		return readErr
	case werr != nil:
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = werr.Error()
		}
		return fmt.Errorf("graph command failed: %s", msg)
	}
	return nil
}

// ProtocolEvent is one line of a command graph's output.
type ProtocolEvent struct {
	Event string `json:"event"`
	Node  string `json:"node"`
	Data  any    `json:"data"`
}

// maxLine bounds one protocol line (a whole state may be on it).
const maxLine = 16 << 20

// ReadEvents parses JSON Lines from a command graph, calling fn per event.
// Blank lines are skipped; anything else that is not a valid event fails.
func ReadEvents(r io.Reader, fn func(ProtocolEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	line := 0
	for sc.Scan() {
		line++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		var e ProtocolEvent
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("%w: stdout line %d is not JSON: %q", ErrProtocol, line, truncate(raw))
		}
		e.Data = denumber(e.Data)
		switch e.Event {
		case "updates", "values":
			if _, ok := e.Data.(map[string]any); !ok {
				return fmt.Errorf("%w: line %d: %s data must be an object", ErrProtocol, line, e.Event)
			}
		case "messages", "custom", "interrupt":
		default:
			return fmt.Errorf("%w: line %d: unknown event %q (want values, updates, messages, custom or interrupt)", ErrProtocol, line, e.Event)
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	return nil
}

// denumber turns json.Number back into float64 after validation.
func denumber(v any) any {
	raw, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(raw, &out)
	return out
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "…"
	}
	return string(b)
}

// prefixedLines writes each line in one call, under a lock shared by every
// graph, so that the lines of runs in parallel never interleave.
type prefixedLines struct {
	w      io.Writer
	prefix string
}

var stderrMu sync.Mutex

func (p prefixedLines) Line(l runtime.OutputLine) {
	stderrMu.Lock()
	defer stderrMu.Unlock()
	_, _ = io.WriteString(p.w, p.prefix+l.Text+"\n")
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// Config is the graph configuration file (the langgraph.json format).
type Config struct {
	Graphs map[string]json.RawMessage `json:"graphs"`
	Env    json.RawMessage            `json:"env"`
}

// LoadGraphs reads the graph configuration. A graph is {"builtin": "echo"},
// {"command": [...]} (run from the configuration's directory), or a
// "path:attr" string: a JavaScript, TypeScript or Python file (or a Python
// module) is a HostGraph, run by its language's host once StartHosts has
// started it; other languages have no host and are reported as such.
// Without a file, the built-in echo graph is served as "echo"; with one,
// only the graphs it names, as the reference servers do: an extra graph
// would show up among the deployment's assistants, and a client taking
// the first one listed could run it instead of the user's.
func LoadGraphs(path string, env []string) (map[string]Graph, []string, error) {
	if path == "" {
		return map[string]Graph{"echo": Echo{}}, nil, nil
	}
	graphs := map[string]Graph{}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("read graph configuration: %w", err)
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, nil, fmt.Errorf("graph configuration %s: %w", path, err)
	}
	dir := filepath.Dir(path)
	var warnings []string
	for id, spec := range cfg.Graphs {
		var s string
		if json.Unmarshal(spec, &s) == nil {
			hg, err := parseHostGraph(id, s, dir)
			if err != nil {
				return nil, nil, err
			}
			if hg != nil {
				graphs[id] = hg
				continue
			}
			warnings = append(warnings, fmt.Sprintf("graph %q (%s) needs a language host slipway agent does not have; it is not served", id, s))
			delete(graphs, id)
			continue
		}
		var g struct {
			Builtin string   `json:"builtin"`
			Command []string `json:"command"`
			Path    string   `json:"path"` // {"path": "./src/agent.ts:graph", "description": ...}
		}
		if err := json.Unmarshal(spec, &g); err != nil {
			return nil, nil, fmt.Errorf("graph %q: %w", id, err)
		}
		switch {
		case g.Path != "":
			hg, err := parseHostGraph(id, g.Path, dir)
			if err != nil {
				return nil, nil, err
			}
			if hg == nil {
				warnings = append(warnings, fmt.Sprintf("graph %q (%s) needs a language host slipway agent does not have; it is not served", id, g.Path))
				delete(graphs, id)
				continue
			}
			graphs[id] = hg
		case g.Builtin == "echo":
			graphs[id] = Echo{}
		case g.Builtin != "":
			return nil, nil, fmt.Errorf("graph %q: unknown builtin %q (available: echo)", id, g.Builtin)
		case len(g.Command) > 0:
			argv := append([]string(nil), g.Command...)
			if strings.HasPrefix(argv[0], "./") || strings.HasPrefix(argv[0], "../") {
				argv[0] = filepath.Join(dir, argv[0])
			}
			graphs[id] = &Command{Argv: argv, Dir: dir, Env: env, Grace: 5 * time.Second, Stderr: os.Stderr, Name: id}
		default:
			return nil, nil, fmt.Errorf("graph %q: want {\"builtin\": ...}, {\"command\": [...]} or \"path:attr\"", id)
		}
	}
	return graphs, warnings, nil
}
