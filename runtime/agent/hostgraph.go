package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"slipway/runtime/agent/hosts"
	"slipway/runtime/agent/hosts/js"
	"slipway/runtime/agent/hosts/py"
)

// HostGraph is a graph a language host runs: a "path:attr" entry of the
// graph configuration. The host keeps no state: the graph's checkpoints
// are the engine's (hostcheckpoints.go), and what the API shows of a
// thread (values, tasks, interrupts) is computed by the host from them.
type HostGraph struct {
	ID       string
	Language string // "javascript" or "python"
	Path     string // as configured, relative to Dir
	Export   string
	Dir      string // the graph configuration's directory (the project)
	// Name is the graph's own name as its host reported it ("" for none):
	// the name of its system assistant, as on the reference.
	Name string

	host *hosts.Pool
}

// Run is not how host graphs run: the engine drives them through the host
// (runHost), since their state lives in checkpoints, not in the thread
// record the Graph interface folds updates into.
func (g *HostGraph) Run(context.Context, Request, func(string, map[string]any, []Event) error) error {
	return fmt.Errorf("graph %q runs in a language host", g.ID)
}

// HostApp is the custom route app of the graph configuration
// ("http": {"app": "./app.py:app"}), served by its language's host for the
// paths the agent's API does not own.
type HostApp struct {
	Language string
	Path     string
	Export   string
	Dir      string

	host    *hosts.Pool
	openAPI json.RawMessage // the app's routes as an OpenAPI document, from the host
}

// HostAppFor is the project's custom routes named by spec ("path:export",
// relative to dir): nil when spec is "", an error when no host of this
// binary serves that file.
func HostAppFor(spec, dir string) (*HostApp, error) {
	if spec == "" {
		return nil, nil
	}
	hg, err := parseHostGraph("http.app", spec, dir)
	if err != nil {
		return nil, err
	}
	if hg == nil {
		return nil, fmt.Errorf("http.app %q: not a Python or JavaScript \"path:export\"", spec)
	}
	return &HostApp{Language: hg.Language, Path: hg.Path, Export: hg.Export, Dir: hg.Dir}, nil
}

// parseHostGraph recognises "path:attr" graphs a host of this binary serves.
func parseHostGraph(id, spec, dir string) (*HostGraph, error) {
	i := strings.LastIndex(spec, ":")
	if i <= 0 || i == len(spec)-1 {
		return nil, fmt.Errorf("graph %q: %q is not \"path:export\"", id, spec)
	}
	path, export := spec[:i], spec[i+1:]
	switch {
	case js.Handles(path):
		return &HostGraph{ID: id, Language: "javascript", Path: path, Export: export, Dir: dir}, nil
	case py.Handles(path):
		return &HostGraph{ID: id, Language: "python", Path: path, Export: export, Dir: dir}, nil
	}
	return nil, nil
}

// StartHosts starts the language hosts the graphs need (one per
// language) and waits until they have loaded every graph. A graph that
// fails to load is an error naming it with the loader's message: the agent
// must not serve without it. The hosts run until ctx ends.
func (e *Engine) StartHosts(ctx context.Context, dataDir string, env []string) error {
	byLang := map[string][]*HostGraph{}
	ids := make([]string, 0, len(e.Graphs))
	for id := range e.Graphs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if hg, ok := e.Graphs[id].(*HostGraph); ok {
			byLang[hg.Language] = append(byLang[hg.Language], hg)
		}
	}
	if env == nil {
		env = os.Environ()
	}
	for _, lang := range []string{"javascript", "python"} {
		var app *HostApp
		if e.App != nil && e.App.Language == lang {
			app = e.App
		}
		if mine := byLang[lang]; len(mine) > 0 || app != nil {
			if err := e.startHost(ctx, lang, dataDir, env, mine, app); err != nil {
				return err
			}
		}
	}
	return nil
}

func (e *Engine) startHost(ctx context.Context, lang, dataDir string, env []string, mine []*HostGraph, app *HostApp) error {
	start := time.Now()
	var dir string
	if len(mine) > 0 {
		dir = mine[0].Dir
	} else {
		dir = app.Dir
	}
	var argv []string
	var err error
	// What the host loads: the graphs, and the custom routes' app under
	// the id each host's configuration gives it.
	graphs := make([]hosts.Graph, 0, len(mine))
	for _, hg := range mine {
		graphs = append(graphs, hosts.Graph{ID: hg.ID, Path: hg.Path, Export: hg.Export})
	}
	appGraph := func(id string) *hosts.Graph {
		if app == nil {
			return nil
		}
		return &hosts.Graph{ID: id, Path: app.Path, Export: app.Export}
	}
	switch lang {
	case "javascript":
		argv, err = js.Prepare(dataDir, dir, graphs, appGraph("http"))
	case "python":
		var python string
		if python, err = py.Interpreter(e.Python, dir); err == nil {
			argv, err = py.Prepare(dataDir, dir, python, graphs, appGraph("http.app"))
		}
	}
	if err != nil {
		return err
	}
	h, ready, err := hosts.StartPool(ctx, hosts.Spec{Language: lang, Argv: argv, Dir: dir, Env: env, Nice: e.HostNice},
		e.hostProcesses(), hostHandler{e}, e.Log)
	if err != nil {
		return err
	}
	var failed []string
	for _, hg := range mine {
		r, ok := ready.Graphs[hg.ID]
		switch {
		case !ok:
			failed = append(failed, fmt.Sprintf("graph %q (%s): the host did not report it", hg.ID, hg.Path))
		case !r.OK:
			failed = append(failed, fmt.Sprintf("graph %q (%s:%s) failed to load: %s", hg.ID, hg.Path, hg.Export, r.Error))
		}
		hg.host, hg.Name = h, r.Name
	}
	if app != nil {
		switch r := ready.HTTP; {
		case r == nil:
			failed = append(failed, fmt.Sprintf("http app %s:%s: the host did not report it", app.Path, app.Export))
		case !r.OK:
			failed = append(failed, fmt.Sprintf("http app %s:%s failed to load: %s", app.Path, app.Export, r.Error))
		default:
			app.openAPI = r.OpenAPI
		}
		app.host = h
	}
	if len(failed) > 0 {
		return errors.New(strings.Join(failed, "\n"))
	}
	e.Log.Info().Str("runtime", ready.Runtime).Int("processes", e.hostProcesses()).Str("langgraph", ready.LangGraph).Int("protocol", ready.Protocol).
		Dur("startup", time.Since(start)).Int("graphs", len(mine)).Msg(lang + " host ready")
	return nil
}

// hostProcesses is the size of each language's host pool.
func (e *Engine) hostProcesses() int {
	return max(e.HostProcesses, 1)
}

type hostHandler struct{ e *Engine }

func (h hostHandler) Request(ctx context.Context, method string, p json.RawMessage) (any, error) {
	return h.e.hostRequest(ctx, method, p)
}

// Notify routes a run's events to its stream.
func (h hostHandler) Notify(method string, p json.RawMessage) {
	if method != "event" {
		return
	}
	var ev struct {
		RunID string          `json:"run_id"`
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
	}
	if json.Unmarshal(p, &ev) != nil {
		return
	}
	if lr := h.e.liveRun(ev.RunID); lr != nil {
		lr.events.publish(ev.Event, ev.Data)
	}
}

// hostOutcome is a host run's end: the thread's state after it.
type hostOutcome struct {
	Status     string         `json:"status"`
	Error      *hosts.Error   `json:"error"`
	Values     map[string]any `json:"values"`
	Next       []string       `json:"next"`
	Tasks      []hostTask     `json:"tasks"`
	Interrupts []any          `json:"interrupts"`
}

type hostTask struct {
	ID         string `json:"id"`
	Interrupts []any  `json:"interrupts"`
}

// interruptsByTask is the thread's interrupts as the API shows them.
func (o *hostOutcome) interruptsByTask() map[string]any {
	out := map[string]any{}
	for _, t := range o.Tasks {
		if len(t.Interrupts) > 0 {
			out[t.ID] = t.Interrupts
		}
	}
	return out
}

// runHost streams one run in the host. Cancelling ctx asks the host to
// abort the run and waits (a bounded time) until it has unwound.
func (g *HostGraph) runHost(ctx context.Context, r *runRecord, req Request) (*hostOutcome, error) {
	modes, _ := r.Kwargs["stream_mode"].([]string)
	if modes == nil {
		if list, ok := r.Kwargs["stream_mode"].([]any); ok {
			for _, m := range list {
				if s, ok := m.(string); ok {
					modes = append(modes, s)
				}
			}
		}
	}
	subgraphs, _ := r.Kwargs["stream_subgraphs"].(bool)
	p := map[string]any{
		"run_id": r.RunID, "graph_id": g.ID, "thread_id": r.ThreadID,
		"assistant_id": req.AssistantID, "metadata": req.Metadata,
		"config": hostConfig(req.Config), "context": req.Context, "input": nilIfEmpty(req.Input),
		"command": req.Command, "stream_mode": modes, "subgraphs": subgraphs,
		"interrupt_before": r.Kwargs["interrupt_before"], "interrupt_after": r.Kwargs["interrupt_after"],
		"checkpoint_id": r.Kwargs["checkpoint_id"],
	}
	var out hostOutcome
	done := make(chan error, 1)
	callCtx, stop := context.WithCancel(context.Background())
	defer stop()
	// The run and its cancel go to one process of the pool.
	member := g.host.Pick()
	go func() { done <- member.Call(callCtx, "run", p, &out) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
	case <-ctx.Done():
		// Cancel is acknowledged once the run has unwound; past the grace
		// period the run is fenced anyway (finish clears it as the
		// thread's active run), so a late write cannot land.
		cctx, cstop := context.WithTimeout(context.Background(), 10*time.Second)
		var ack struct {
			Stuck bool `json:"stuck"`
		}
		_ = member.Call(cctx, "cancel", map[string]any{"run_id": r.RunID}, &ack)
		cstop()
		if ack.Stuck {
			// A synchronous node that never returns cannot be stopped
			// inside the host (a Python thread): past the host's grace
			// period the host is restarted, which ends its other runs
			// with an error too; they continue from their last checkpoint.
			member.Restart("run " + r.RunID + " did not unwind after cancel")
		}
		select {
		case <-done:
		case <-time.After(time.Second):
		}
		return nil, ctx.Err()
	}
	if out.Status == "error" && out.Error != nil {
		return &out, out.Error
	}
	return &out, nil
}

// hostConfig passes the run's configurable on, minus what the engine sets.
func hostConfig(cfg map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range cfg {
		out[k] = v
	}
	return out
}

func nilIfEmpty(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}

func (g *HostGraph) state(ctx context.Context, p map[string]any) (Checkpoint, error) {
	var cp Checkpoint
	err := g.host.Call(ctx, "state", p, &cp)
	return cp, err
}

// Describe asks the language host serving graphID for a description of
// the graph computed from the compiled graph: "graph" (the drawable graph,
// p: xray), "schemas", or "subgraphs" (p: namespace, recurse). ok is false
// for a graph the engine runs itself.
func (e *Engine) Describe(graphID, what string, config map[string]any, p map[string]any) (out json.RawMessage, ok bool, err error) {
	g, _ := e.Graphs[graphID].(*HostGraph)
	if g == nil {
		return nil, false, nil
	}
	if g.host == nil {
		return nil, true, fmt.Errorf("graph %q: its language host is not running", graphID)
	}
	args := map[string]any{"graph_id": g.ID, "config": hostConfig(config)}
	for k, v := range p {
		args[k] = v
	}
	ctx, cancel := context.WithTimeout(e.ctx, hostCallTimeout)
	defer cancel()
	if err := g.host.Call(ctx, what, args, &out); err != nil {
		var he *hosts.Error
		if what == "subgraphs" && errors.As(err, &he) {
			return nil, true, fmt.Errorf("%w: %s", ErrInvalid, he.Message)
		}
		return nil, true, err
	}
	return out, true, nil
}

// JSGraph reports whether graph runs on the JavaScript host. Where the
// JavaScript reference server answers a wait or a join otherwise than the
// Python one (with the thread's last values, whatever they carry),
// Slipway answers as it does for those graphs (JoinEnded, and the API's
// wait).
func (e *Engine) JSGraph(graph string) bool {
	hg, ok := e.Graphs[graph].(*HostGraph)
	return ok && hg.Language == "javascript"
}
