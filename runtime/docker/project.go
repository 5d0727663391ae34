package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"slipway/runtime"
	"slipway/runtime/build"
)

// What Python and JavaScript project builds share: both build a
// dependencies image (slipway-deps:<hash>, reused while the files that name
// dependencies do not change) on a language's agent image, then the
// revision's image on top of it with the project's code.

// projectBuild builds a project revision's image on a language's agent image.
type projectBuild func(d *Driver, ctx context.Context, s runtime.Spec, tree *build.Tree, cfgPath string, proj *build.Project, g graphFile, tag string, labels map[string]string, log io.Writer) error

// projectLanguage is how a project is built: with Node.js for JavaScript
// graphs (or a node_version), with Python for Python graphs (or a
// python_version), nil for neither (built-in and command graphs, on the
// agent image). Slipway's images carry one language: a project with graphs
// in both is refused, with what to do instead.
func projectLanguage(proj *build.Project) (projectBuild, error) {
	js, py := proj.JSGraphs(), proj.PythonGraphs()
	switch {
	case js && py:
		return nil, fmt.Errorf("%w: the project has both Python and JavaScript graphs, and Slipway's agent images carry one language each: deploy the two as separate deployments, or use the process runtime, whose host has both", runtime.ErrUnsupported)
	case js || (proj.NodeVersion != "" && !proj.NeedsPython()):
		return (*Driver).nodeBuild, nil
	case proj.NeedsPython():
		return (*Driver).pythonBuild, nil
	}
	return nil, nil
}

// noteUnsupported names, in the build log, the keys of the graph
// configuration that Slipway does not act on.
func noteUnsupported(proj *build.Project, cfgPath string, log io.Writer) {
	for _, k := range proj.Unsupported {
		fmt.Fprintf(log, "note: %s in %s is not supported by Slipway and is ignored\n", k, path.Base(cfgPath))
	}
}

// projectBase is the image a project's dependencies are installed on: its
// base_image when it names one (labels then record the agent image the
// slipway binary is copied from), else Slipway's agent image of l's
// version, built on first need.
func (d *Driver) projectBase(ctx context.Context, g graphFile, l language, version string, labels map[string]string, log io.Writer) (string, error) {
	if g.BaseImage != "" {
		agent, err := d.agentImage(ctx, log)
		if err != nil {
			return "", err
		}
		labels[LabelBase] = agent
		return g.BaseImage, nil
	}
	base, err := d.languageImage(ctx, l, version, log)
	if err != nil {
		return "", err
	}
	labels[LabelBase] = base
	return base, nil
}

// depsHeader starts a dependencies image's Dockerfile on base, as root:
// a base_image gets Slipway's binary and data directory copied in.
func depsHeader(df *strings.Builder, g graphFile, base string, labels map[string]string) {
	if g.BaseImage != "" {
		fmt.Fprintf(df, "FROM %s AS slipway\nFROM %s\nUSER root\n", labels[LabelBase], base)
		fmt.Fprintf(df, "COPY --from=slipway /slipway /slipway\nCOPY --from=slipway --chown=%s /data /data\n", agentUser)
		return
	}
	fmt.Fprintf(df, "FROM %s\nUSER root\n", base)
}

// execForm is argv as a RUN instruction's JSON array, as written (the
// build log shows it): without escaping < and >, which requirement
// specifiers use.
func execForm(argv []string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(argv) // strings always encode
	return strings.TrimSuffix(b.String(), "\n")
}

// tarFile adds a regular file to a build context.
func tarFile(tw *tar.Writer, name string, body []byte) error {
	return tarFileMode(tw, name, 0o644, body)
}

func tarFileMode(tw *tar.Writer, name string, mode int64, body []byte) error {
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: mode, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(body)
	return err
}

// contextFile is one regular file of a small build context.
type contextFile struct {
	name string
	mode int64
	body []byte
}

// tarContext is a build context of the given files.
func tarContext(files ...contextFile) (*bytes.Buffer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		if err := tarFileMode(tw, f.name, f.mode, f.body); err != nil {
			return nil, err
		}
	}
	return &buf, tw.Close()
}

// buildDeps builds the dependencies image depsTag from its context (whose
// writer tw is still open, for the Dockerfile df) unless it exists.
// Dependencies images are the deployment's: they may hold an index's
// credentials (pip_config_file, .npmrc), and go with it.
func (d *Driver) buildDeps(ctx context.Context, s runtime.Spec, depsTag string, dctx *bytes.Buffer, tw *tar.Writer, df string, log io.Writer) error {
	// The same dependencies are installed once: a second build of them
	// waits, then reuses the image.
	unlock, err := d.builds.lock(ctx, depsTag, log)
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := d.Client.ImageInspect(ctx, depsTag); err == nil {
		fmt.Fprintf(log, "reusing the dependencies image %s (same dependencies)\n", depsTag)
		return nil
	}
	if err := tarFile(tw, "Dockerfile", []byte(df)); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(log, "==> install the dependencies into %s\n", depsTag)
	if err := d.build(ctx, dctx, depsTag, map[string]string{LabelManaged: "true", LabelRole: "deps", LabelInstance: d.Instance, LabelWorkspace: s.WorkspaceID, LabelDeployment: s.DeploymentID}, log); err != nil {
		fmt.Fprintf(log, "<== install the dependencies failed after %s\n", time.Since(start).Round(time.Millisecond))
		return fmt.Errorf("install the dependencies: %w", err)
	}
	fmt.Fprintf(log, "<== install the dependencies done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// projectCommands adds the revision's install_command (run in the
// source's root) and build_command (in the configuration's directory).
func projectCommands(rf *strings.Builder, s runtime.Spec, install, cfgDir string) {
	if strings.TrimSpace(install) != "" {
		fmt.Fprintf(rf, "WORKDIR /app\nRUN %s\n", oneLine(install))
	}
	if strings.TrimSpace(s.BuildCommand) != "" {
		fmt.Fprintf(rf, "WORKDIR %s\nRUN %s\n", path.Join("/app", cfgDir), oneLine(s.BuildCommand))
	}
}

// revisionTail ends a project revision's Dockerfile: the dockerfile_lines,
// the project's env (Slipway's own variables and extra win), the agent's
// settings, the labels, and the agent as its unprivileged user.
func revisionTail(rf *strings.Builder, proj *build.Project, g graphFile, tree *build.Tree, cfgPath, extra string, labels map[string]string, log io.Writer) error {
	for _, l := range g.DockerfileLines {
		rf.WriteString(l + "\n")
	}
	env, err := proj.Env(tree, path.Dir(cfgPath))
	if errors.Is(err, build.ErrNoEnvFile) {
		fmt.Fprintf(log, "note: %v\n", err)
		err = nil
	}
	if err != nil {
		return err
	}
	rf.WriteString("ENV")
	for _, k := range sortedKeys(env) {
		if !strings.HasPrefix(k, "SLIPWAY_") {
			fmt.Fprintf(rf, " %s=%s", k, quote(env[k]))
		}
	}
	if extra != "" {
		rf.WriteString(" " + extra)
	}
	fmt.Fprintf(rf, " SLIPWAY_AGENT_ADDR=0.0.0.0:8000 SLIPWAY_AGENT_DATA_DIR=/data SLIPWAY_GRAPH_CONFIG=%s\n", quote(path.Join("/app", cfgPath)))
	rf.WriteString("LABEL")
	for _, k := range sortedKeys(labels) {
		fmt.Fprintf(rf, " %s=%s", quote(k), quote(labels[k]))
	}
	fmt.Fprintf(rf, "\nWORKDIR /app\nUSER %s\nENTRYPOINT [\"/slipway\", \"agent\"]\n", agentUser)
	return nil
}

// buildRevision builds the revision image tag from the source tree and
// the Dockerfile df, leaving out what skip names (slash-separated, relative
// to the source).
func (d *Driver) buildRevision(ctx context.Context, tree *build.Tree, df, tag string, skip func(rel string) bool, log io.Writer) error {
	bc, err := contextTarSkip(tree, df, skip)
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(log, "==> build image %s\n", tag)
	if err := d.build(ctx, bc, tag, nil, log); err != nil {
		return err
	}
	fmt.Fprintf(log, "<== build image done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}
