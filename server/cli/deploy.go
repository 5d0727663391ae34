package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/joho/godotenv"

	"slipway/runtime/build"
)

// listFlag collects a repeated flag (--secret K=V --secret K2=V2).
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// graphConfig is what deploy needs of the graph configuration: the graph
// names, and whether the first one is a Python graph (the closing SDK line
// is then Python's).
type graphConfig struct {
	Names  []string
	Python bool
}

// readGraphConfig checks that the graph configuration exists inside dir and
// names at least one graph.
func readGraphConfig(dir, rel string) (graphConfig, error) {
	if !filepath.IsLocal(rel) {
		return graphConfig{}, fail(ExitUsage, "--config %q must be a path inside the directory being deployed", rel)
	}
	full := filepath.Join(dir, rel)
	raw, err := os.ReadFile(full)
	if errors.Is(err, fs.ErrNotExist) {
		return graphConfig{}, fail(ExitUsage, "there is no graph configuration at %s: a deployment needs a %s naming its graphs, "+
			`e.g. {"graphs": {"agent": "./agent.py:graph"}} (or point --config at it)`, full, filepath.Base(rel))
	}
	if err != nil {
		return graphConfig{}, fail(ExitUsage, "cannot read the graph configuration %s: %v", full, err)
	}
	var cfg struct {
		Graphs map[string]json.RawMessage `json:"graphs"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return graphConfig{}, fail(ExitUsage, "the graph configuration %s is not valid JSON: %v", full, err)
	}
	if len(cfg.Graphs) == 0 {
		return graphConfig{}, fail(ExitUsage, `the graph configuration %s names no graphs: it needs a "graphs" object`, full)
	}
	names := make([]string, 0, len(cfg.Graphs))
	for n := range cfg.Graphs {
		names = append(names, n)
	}
	sort.Strings(names)
	return graphConfig{Names: names, Python: build.PythonSpec(cfg.Graphs[names[0]])}, nil
}

// sdkLine is the closing hint of a deploy: the official SDK of the
// project's language, calling its first graph.
func sdkLine(depURL string, g graphConfig) string {
	graph := "agent"
	if len(g.Names) > 0 {
		graph = g.Names[0]
	}
	if g.Python {
		return fmt.Sprintf("SDK: client = get_client(url=%q, api_key=os.environ[\"SLIPWAY_API_KEY\"]); "+
			"await client.runs.wait(None, %q, input={\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]})\n", depURL, graph)
	}
	return fmt.Sprintf("SDK: const client = new Client({ apiUrl: %q, apiKey: process.env.SLIPWAY_API_KEY }); "+
		"await client.runs.wait(null, %q, { input: { messages: [{ role: \"user\", content: \"hi\" }] } });\n", depURL, graph)
}

// readSecrets merges --env-file (dotenv syntax) and --secret K=V, the
// latter winning. nil means none were given.
func readSecrets(envFile string, pairs []string) (map[string]string, error) {
	if envFile == "" && len(pairs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	if envFile != "" {
		f, err := os.Open(envFile)
		if err != nil {
			return nil, fail(ExitUsage, "cannot read the env file: %v", err)
		}
		defer f.Close()
		m, err := godotenv.Parse(f)
		if err != nil {
			return nil, fail(ExitUsage, "the env file %s is not in KEY=VALUE form: %v", envFile, err)
		}
		for k, v := range m {
			out[k] = v
		}
	}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fail(ExitUsage, "secret %q must be given as NAME=VALUE", p)
		}
		out[k] = v
	}
	return out, nil
}

func secretList(m map[string]string) []Secret {
	out := []Secret{}
	for _, k := range sortedKeys(m) {
		out = append(out, Secret{Name: k, Value: m[k]})
	}
	return out
}

// dropped lists the deployment's secret names that next does not give.
// The server never returns secret values and a PATCH replaces the whole
// list, so a change that leaves one out deletes it.
func dropped(existing []Secret, next map[string]string) []string {
	var out []string
	for _, s := range existing {
		if _, ok := next[s.Name]; !ok {
			out = append(out, s.Name)
		}
	}
	return out
}

// defaultName makes a deployment name (a DNS label) of a directory's name:
// "My_Agent" becomes "my-agent".
func defaultName(base string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "-") {
			b.WriteByte('-')
		}
	}
	name := strings.Trim(b.String(), "-")
	if len(name) > 63 {
		name = strings.Trim(name[:63], "-")
	}
	if name == "" {
		name = "agent"
	}
	return name
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// deploy: slipway deploy [DIR] [--name N] [--config langgraph.json]
// [--secret K=V ...] [--env-file .env] [--no-wait]. Only the spec's
// control-plane endpoints and the documented logs endpoint are used.
func (a *app) deploy(ctx context.Context, args []string) error {
	fs := a.flags("deploy", "[DIR] [--name N] [--config langgraph.json] [--secret K=V ...] [--env-file .env] [--no-wait]")
	name := fs.String("name", "", "deployment name (default: the directory's name)")
	config := fs.String("config", "langgraph.json", "graph configuration, relative to DIR")
	var secretPairs listFlag
	fs.Var(&secretPairs, "secret", "secret NAME=VALUE (repeatable); exposed to the agent as an environment variable")
	envFile := fs.String("env-file", "", "read secrets from a dotenv file (never packed)")
	noWait := fs.Bool("no-wait", false, "return once the revision is created, without following it")
	installCmd := fs.String("install-command", "", "install command, run from DIR's root on the server")
	buildCmd := fs.String("build-command", "", "build command, run from the graph configuration's directory on the server")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	dir, abs, err := deployDir(pos)
	if err != nil {
		return err
	}
	if *name == "" {
		*name = defaultName(filepath.Base(abs))
	}
	graphs, err := readGraphConfig(abs, *config)
	if err != nil {
		return err
	}
	secrets, err := readSecrets(*envFile, secretPairs)
	if err != nil {
		return err
	}
	if err := a.connect(); err != nil {
		return err
	}
	say := a.env.Stdout
	if a.jsonOut {
		say = a.env.Stderr // stdout carries only the final JSON
	}

	// Pack first: a directory that cannot be packed should not leave a
	// deployment behind.
	archive, err := os.CreateTemp("", "slipway-deploy-*.tar.gz")
	if err != nil {
		return fmt.Errorf("temporary archive: %w", err)
	}
	defer os.Remove(archive.Name())
	defer archive.Close()
	cfgSlash := filepath.ToSlash(filepath.Clean(*config))
	size, err := pack(say, archive, dir, abs, *config)
	if err != nil {
		return err
	}

	sourceConfig := map[string]any{}
	if *installCmd != "" {
		sourceConfig["install_command"] = *installCmd
	}
	if *buildCmd != "" {
		sourceConfig["build_command"] = *buildCmd
	}
	dep, patchSecrets, err := a.deploymentFor(ctx, say, *name, cfgSlash, sourceConfig, secrets)
	if err != nil {
		return err
	}
	rev, err := a.uploadRevision(ctx, dep.ID, archive, size, func(objectPath string) map[string]any {
		patch := map[string]any{"source_revision_config": map[string]any{"source_tarball_path": objectPath, "graph_config_path": cfgSlash}}
		if len(sourceConfig) > 0 {
			patch["source_config"] = sourceConfig
		}
		if patchSecrets != nil {
			patch["secrets"] = patchSecrets
		}
		return patch
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(say, "Uploaded %s; revision %s created\n", humanBytes(size), short(rev))
	if *noWait {
		if a.jsonOut {
			return a.printJSON(map[string]any{"deployment_id": dep.ID, "name": dep.Name, "revision_id": rev, "status": "QUEUED"})
		}
		fmt.Fprintf(say, "Not following it (--no-wait): slipway logs %s -f\n", dep.Name)
		return nil
	}
	return a.watch(ctx, dep.ID, dep.Name, rev, FollowOptions{}, graphs)
}

// deployDir is deploy's directory argument (default "."), as given and
// absolute.
func deployDir(pos []string) (dir, abs string, err error) {
	if len(pos) > 1 {
		return "", "", fail(ExitUsage, "deploy takes one directory, got %d arguments: %s", len(pos), strings.Join(pos, " "))
	}
	dir = "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	if abs, err = filepath.Abs(dir); err != nil {
		return "", "", fail(ExitUsage, "bad directory %q: %v", dir, err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return "", "", fail(ExitUsage, "%s is not a directory", dir)
	}
	return dir, abs, nil
}

// pack writes the directory abs into archive, refuses an upload that
// would leave out the graph configuration config, says what it packed,
// and returns the archive's size.
func pack(say io.Writer, archive *os.File, dir, abs, config string) (int64, error) {
	stats, err := Pack(abs, archive)
	if err != nil {
		return 0, fail(ExitUsage, "cannot pack %s: %v", dir, err)
	}
	cfgSlash := filepath.ToSlash(filepath.Clean(config))
	for _, ex := range stats.Excluded {
		if cfgSlash == ex || strings.HasPrefix(cfgSlash, ex+"/") {
			return 0, fail(ExitUsage, "the graph configuration %s is excluded from the upload (by .gitignore, .dockerignore or a rule that never packs %s)", config, ex)
		}
	}
	size, err := archive.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, fmt.Errorf("temporary archive: %w", err)
	}
	files := "files"
	if stats.Files == 1 {
		files = "file"
	}
	fmt.Fprintf(say, "Packed %d %s (%s, %s compressed) from %s", stats.Files, files, humanBytes(stats.Bytes), humanBytes(size), dir)
	if len(stats.Excluded) > 0 {
		shown := make([]string, 0, 7)
		for _, ex := range stats.Excluded[:min(6, len(stats.Excluded))] {
			shown = append(shown, displayName(ex))
		}
		if len(stats.Excluded) > 6 {
			shown = append(shown, fmt.Sprintf("and %d more", len(stats.Excluded)-6))
		}
		fmt.Fprintf(say, "; left out %s", strings.Join(shown, ", "))
	}
	fmt.Fprintln(say)
	return size, nil
}

// deploymentFor finds the deployment called name or creates it (with the
// secrets). For an existing one it returns the secrets the revision's
// PATCH replaces the list with: nil when the deploy gives none, and an
// error when it would silently drop some (the server never reveals
// values, so they cannot be carried over).
func (a *app) deploymentFor(ctx context.Context, say io.Writer, name, cfgSlash string, sourceConfig map[string]any, secrets map[string]string) (*Deployment, []Secret, error) {
	dep, err := a.client.FindDeployment(ctx, name)
	if err != nil {
		return nil, nil, err
	}
	if dep == nil {
		var created Deployment
		err := a.client.Do(ctx, http.MethodPost, "/v2/deployments", map[string]any{
			"name": name, "source": "internal_source", "source_config": sourceConfig,
			"source_revision_config": map[string]any{"graph_config_path": cfgSlash},
			"secrets":                secretList(secrets),
		}, &created)
		if err != nil {
			return nil, nil, err
		}
		fmt.Fprintf(say, "Created deployment %s (%s)\n", created.Name, created.ID)
		return &created, nil, nil
	}
	var patchSecrets []Secret
	if secrets != nil {
		if gone := dropped(dep.Secrets, secrets); len(gone) > 0 {
			return nil, nil, fail(ExitUsage, "deployment %s also has the secrets %s, which this deploy does not give; the server never reveals "+
				"secret values and replaces the whole list, so give them again (--secret or --env-file), or drop them with "+
				"`slipway secrets %s set ... --replace`", dep.Name, strings.Join(gone, ", "), dep.Name)
		}
		patchSecrets = secretList(secrets)
	}
	fmt.Fprintf(say, "Updating deployment %s (%s)\n", dep.Name, dep.ID)
	return dep, patchSecrets, nil
}

// uploadRevision uploads the archive to a fresh upload URL of deployment
// depID and PATCHes it with patch(the uploaded object's path), returning
// the revision that creates.
func (a *app) uploadRevision(ctx context.Context, depID string, archive io.ReadSeeker, size int64, patch func(objectPath string) map[string]any) (string, error) {
	var up struct {
		UploadURL  string `json:"upload_url"`
		ObjectPath string `json:"object_path"`
	}
	if err := a.client.Do(ctx, http.MethodPost, "/v2/deployments/"+url.PathEscape(depID)+"/upload-url", nil, &up); err != nil {
		return "", err
	}
	if _, err := archive.Seek(0, io.SeekStart); err != nil {
		return "", fmt.Errorf("temporary archive: %w", err)
	}
	if err := a.client.Upload(ctx, up.UploadURL, archive, size); err != nil {
		return "", err
	}
	var updated Deployment
	if err := a.client.Do(ctx, http.MethodPatch, "/v2/deployments/"+url.PathEscape(depID), patch(up.ObjectPath), &updated); err != nil {
		return "", err
	}
	if updated.LatestRevisionID == nil {
		return "", fail(ExitFailed, "the server created no revision for the upload")
	}
	return *updated.LatestRevisionID, nil
}

// watch follows a revision's build and deploy with a progress display and
// ends with the deployment's URL and an SDK line, or with the failing step
// and the end of its log.
func (a *app) watch(ctx context.Context, depID, name, rev string, from FollowOptions, graphs graphConfig) error {
	say := a.env.Stdout
	if a.jsonOut {
		say = a.env.Stderr
	}
	p := newProgress(say, tty(say), name)
	var seen []LogEntry
	follower := LogFollower(&Streamer{Client: a.client})
	status, err := follower.Follow(ctx, depID, rev, FollowOptions{After: from.After, AfterAgent: from.AfterAgent,
		Entry:  func(e LogEntry) { seen = append(seen, e); p.Entry(e) },
		Status: p.Status})
	p.Close()
	if err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintf(a.env.Stderr, "Stopped following; the deploy goes on on the server (slipway logs %s -f)\n", name)
		}
		return err
	}
	if status != "DEPLOYED" {
		what := map[string]string{"BUILD_FAILED": "the build", "DEPLOY_FAILED": "the deploy",
			"CREATE_FAILED": "creating the revision"}[status]
		if status == "SKIPPED" {
			return fail(ExitFailed, "revision %s was superseded by a newer one before it deployed (SKIPPED)", short(rev))
		}
		if what == "" {
			what = "the revision"
		}
		tail := seen[max(0, len(seen)-20):]
		fmt.Fprintf(a.env.Stderr, "\n%s of %s failed after %s. The log ends:\n", strings.ToUpper(what[:1])+what[1:], name, p.Elapsed())
		for _, e := range tail {
			fmt.Fprintf(a.env.Stderr, "  %-6s | %s\n", e.Phase, strings.TrimRight(e.Message, "\n"))
		}
		return fail(ExitFailed, "%s failed (%s); see slipway logs %s --revision %s", what, status, name, short(rev))
	}
	d, err := a.client.Deployment(ctx, depID)
	if err != nil {
		return err
	}
	depURL := deref(d.URL, "")
	if a.jsonOut {
		return a.printJSON(map[string]any{"deployment_id": depID, "name": name, "revision_id": rev, "status": status, "url": depURL})
	}
	fmt.Fprintf(a.env.Stdout, "Deployed %s (revision %s) in %s\n", name, short(rev), p.Elapsed())
	if depURL == "" {
		return nil
	}
	fmt.Fprintf(a.env.Stdout, "URL: %s\n", depURL)
	fmt.Fprint(a.env.Stdout, sdkLine(depURL, graphs))
	return nil
}
