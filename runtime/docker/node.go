package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"strings"

	"slipway/runtime"
	"slipway/runtime/build"
)

// defaultNodeVersion is the Node.js major a JavaScript project that names
// no node_version runs on, as the reference CLI's default.
const defaultNodeVersion = "20"

// nodeDepsFiles are the files beside package.json that shape an install
// (registries, their credentials, workspaces): they reach the dependencies
// image with it, and decide with it whether that image is reused.
var nodeDepsFiles = []string{".npmrc", ".yarnrc", ".yarnrc.yml", "pnpm-workspace.yaml"}

// packageManagers are how yarn and pnpm get into the dependencies image,
// which has npm only: from the npm registry, in the version package.json's
// packageManager field names, else the one their lock files' usual flags
// (--frozen-lockfile) belong to.
var packageManagers = map[string]string{"yarn": "yarn@1", "pnpm": "pnpm@9"}

// nodeBuild builds a revision image of a JavaScript project as pythonBuild
// does a Python one: its dependencies, installed with the package manager
// its lock file names into node_modules beside package.json, in an image
// named by the hash of package.json and the lock file (a code-only change
// reuses it), then its code on top. An install_command replaces that
// install and runs in the revision's image, with the code.
func (d *Driver) nodeBuild(ctx context.Context, s runtime.Spec, tree *build.Tree, cfgPath string, proj *build.Project, g graphFile, tag string, labels map[string]string, log io.Writer) error {
	cfgDir := path.Dir(cfgPath)
	noteUnsupported(proj, cfgPath, log)
	major := proj.NodeVersion
	if major == "" {
		major = defaultNodeVersion
	}
	base, err := d.projectBase(ctx, g, nodeLanguage, major, labels, log)
	if err != nil {
		return err
	}
	var df strings.Builder
	depsHeader(&df, g, base, labels)
	if proj.NodeVersion != "" && g.BaseImage != "" {
		// Slipway's own images are chosen by node_version; a base_image is
		// checked.
		check := fmt.Sprintf(`const [have] = process.versions.node.split("."); if (+have < %s) { console.error("node_version %s asks for Node.js %s or newer, and base_image %s runs node " + process.version); process.exit(1) }`,
			proj.NodeVersion, proj.NodeVersion, proj.NodeVersion, g.BaseImage)
		fmt.Fprintf(&df, "RUN %s\n", execForm([]string{"node", "-e", check}))
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", s.DeploymentID, base)
	var dctx bytes.Buffer
	tw := tar.NewWriter(&dctx)
	if err := tarFile(tw, "deps/.keep", nil); err != nil {
		return err
	}
	lock, tool, install, ok := build.JSLock(tree, cfgDir)
	custom := strings.TrimSpace(s.InstallCommand) != ""
	switch {
	case custom:
		fmt.Fprintf(log, "JavaScript project: install_command replaces the install from the lock file; it runs with the code, so each revision runs it\n")
	case ok:
		why := "no lock file"
		if lock != "" {
			why = lock
		}
		fmt.Fprintf(log, "JavaScript project: installing its dependencies with %s (%s) into the image\n", install, why)
		files := append([]string{"package.json"}, nodeDepsFiles...)
		if lock != "" {
			files = append(files, lock)
		}
		for _, f := range files {
			raw, err := tree.ReadFile(path.Join(cfgDir, f), 0)
			if errors.Is(err, fs.ErrNotExist) && f != "package.json" {
				continue
			} else if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s %x\n", f, sha256.Sum256(raw))
			if err := tarFile(tw, path.Join("deps", cfgDir, f), raw); err != nil {
				return err
			}
			if f == "package.json" {
				if install, err = withPackageManager(tool, install, raw); err != nil {
					return err
				}
			}
		}
		fmt.Fprintf(h, "%s\n", install)
		// npm's cache stays out of the image; HOME is /tmp, which the
		// agent owns.
		fmt.Fprintf(&df, "COPY deps /app\nWORKDIR %s\n", path.Join("/app", cfgDir))
		fmt.Fprintf(&df, "RUN %s\n", execForm([]string{"/bin/sh", "-c", "export npm_config_cache=/tmp/.slipway-npm-cache npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false; " +
			install + " && rm -rf /tmp/.slipway-npm-cache /tmp/.cache /tmp/.yarn"}))
	}
	depsTag := "slipway-deps:" + hex.EncodeToString(h.Sum(nil)[:8])
	if err := d.buildDeps(ctx, s, depsTag, &dctx, tw, df.String(), log); err != nil {
		return err
	}
	var rf strings.Builder
	fmt.Fprintf(&rf, "FROM %s\nCOPY app /app\n", depsTag)
	projectCommands(&rf, s, s.InstallCommand, cfgDir)
	if err := revisionTail(&rf, proj, g, tree, cfgPath, "", labels, log); err != nil {
		return err
	}
	// The upload's own node_modules would land over the installed ones.
	modules := path.Join(cfgDir, "node_modules")
	skip := func(rel string) bool { return !custom && ok && rel == modules }
	return d.buildRevision(ctx, tree, rf.String(), tag, skip, log)
}

// withPackageManager makes install, the command of tool (npm, yarn,
// pnpm), runnable in an image that has npm only: yarn and pnpm are
// installed first, in the version package.json's packageManager names.
func withPackageManager(tool, install string, pkg []byte) (string, error) {
	spec, ok := packageManagers[tool]
	if !ok {
		return install, nil
	}
	var p struct {
		PackageManager string `json:"packageManager"`
	}
	if err := json.Unmarshal(pkg, &p); err != nil {
		return "", fmt.Errorf("package.json is not valid JSON: %w", err)
	}
	if name, version, _ := strings.Cut(p.PackageManager, "@"); name == tool && version != "" {
		version, _, _ = strings.Cut(version, "+") // a hash suffix, for corepack
		if !npmVersionRe.MatchString(version) {
			return "", fmt.Errorf("package.json: packageManager %q is not a version of %s", p.PackageManager, tool)
		}
		spec = tool + "@" + version
	}
	return fmt.Sprintf("npm install --global --prefix /opt/slipway-pm %s && PATH=/opt/slipway-pm/bin:$PATH %s", spec, install), nil
}

// npmVersionRe is a package manager's version in packageManager.
var npmVersionRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,2}(-[0-9A-Za-z.-]+)?$`)
