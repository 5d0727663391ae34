package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"slipway/runtime"
	"slipway/runtime/build"
)

// DefaultImageCache is where debootstrap's root filesystems are kept
// between builds (SLIPWAY_IMAGE_CACHE): building one takes about a minute,
// importing it a few seconds.
const DefaultImageCache = "/var/cache/slipway"

// language is an agent image Slipway builds: on the official image of a
// version (base.go), or from Debian packages: the Debian release that
// carries each version, and the packages beyond minbase.
type language struct {
	name, repo string
	releases   map[string]string
	carry      string // the versions, for errors
	packages   []string
	// apt are installed with apt-get in the bootstrapped system:
	// debootstrap's own resolver cannot configure npm's dependencies.
	apt  []string
	role string // LabelRole
}

var (
	pythonLanguage = language{name: "Python", repo: "slipway-python", releases: map[string]string{"3.11": "bookworm", "3.13": "trixie"},
		carry: "3.11 (bookworm) and 3.13 (trixie)", packages: []string{"python3", "python3-venv", "ca-certificates"}, role: "python-base"}
	nodeLanguage = language{name: "Node.js", repo: "slipway-node", releases: map[string]string{"18": "bookworm", "20": "trixie"},
		carry: "18 (bookworm) and 20 (trixie)", packages: []string{"nodejs", "ca-certificates"}, apt: []string{"npm"}, role: "node-base"}
)

// debianMirror is where debootstrap fetches packages.
const debianMirror = "http://deb.debian.org/debian"

// hostCAFile is the host's trust store (Debian's layout), which the agent
// images carry instead of Debian's stock one: a build reaches PyPI and npm
// through whatever TLS-inspecting proxy the host trusts, as the process
// runtime's builds do.
const hostCAFile = "/etc/ssl/certs/ca-certificates.crt"

// imageTag names this install's agent image of l's version for the
// slipway binary bin, the host's trust store ca and the base it is built
// on (source: the official image's reference and id, or the Debian
// packages): <repo>:<version>-<hash of them, the install and the recipe>.
// The install is in the hash, as in agentRecipe: each install prunes its
// own images without taking one from under another's builds.
func (d *Driver) imageTag(l language, version string, bin, ca []byte, source string, certs bool) string {
	h := sha256.New()
	h.Write(bin)
	h.Write(ca)
	h.Write([]byte(languageRecipe("base", ca != nil, certs)))
	h.Write([]byte(strings.Join(l.packages, " ") + "+" + strings.Join(l.apt, " ")))
	h.Write([]byte("\x00" + source + "\x00" + d.Instance))
	return l.repo + ":" + version + "-" + hex.EncodeToString(h.Sum(nil)[:6])
}

// languageRecipe is the Dockerfile that puts Slipway's binary (and the
// host's trust store, when ca) on base: an official language image or an
// imported Debian root filesystem. certs says the image has a trust store
// at hostCAFile (the host's, or Debian's ca-certificates package), which
// the tools are then pointed at; without one they keep their defaults.
func languageRecipe(base string, ca, certs bool) string {
	df := "FROM " + base + "\nUSER root\nCOPY slipway /slipway\n" +
		"COPY --chown=" + agentUser + " data /data\n"
	if ca {
		df += "COPY ca-certificates.crt " + hostCAFile + "\n"
	}
	df += "ENV HOME=/tmp TMPDIR=/tmp LANG=C.UTF-8 PYTHONUNBUFFERED=1"
	if ca || certs {
		df += " SSL_CERT_FILE=" + hostCAFile + " PIP_CERT=" + hostCAFile + " REQUESTS_CA_BUNDLE=" + hostCAFile + " NODE_EXTRA_CA_CERTS=" + hostCAFile
	}
	return df + "\nRUN chmod 1777 /tmp\nWORKDIR /app\nUSER " + agentUser + "\n" +
		"ENTRYPOINT [\"/slipway\", \"agent\"]\n"
}

func (d *Driver) imageCache() string {
	if d.ImageCache != "" {
		return d.ImageCache
	}
	return DefaultImageCache
}

// PythonImage makes sure the Python agent image of version py
// (slipway-python:<py>-<hash>) exists and returns its tag.
func (d *Driver) PythonImage(ctx context.Context, py string, log io.Writer) (string, error) {
	return d.languageImage(ctx, pythonLanguage, py, log)
}

// NodeImage is PythonImage for Node.js (slipway-node:<major>-<hash>).
func (d *Driver) NodeImage(ctx context.Context, major string, log io.Writer) (string, error) {
	return d.languageImage(ctx, nodeLanguage, major, log)
}

// languageImage builds an agent image of l's version when it is missing:
// on the official image of that version when the engine has it or can
// pull it (base.go), else on a Debian root filesystem (debootstrap
// --variant=minbase, kept in the image cache, imported into the engine),
// with Slipway's binary and the host's trust store added. Progress, and
// which base was used and why, go to log.
func (d *Driver) languageImage(ctx context.Context, l language, version string, log io.Writer) (string, error) {
	// Two builds of one version would do the same work; other versions
	// and languages build meanwhile.
	unlock, err := d.builds.lock(ctx, l.repo+":"+version, log)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := CheckStatic(d.Bin); err != nil {
		return "", err
	}
	bin, err := os.ReadFile(d.Bin)
	if err != nil {
		return "", fmt.Errorf("read the slipway binary: %w", err)
	}
	ca, err := os.ReadFile(hostCAFile)
	if err != nil || len(ca) == 0 {
		ca = nil // not Debian's layout: the image keeps its own store
	}
	ref, setting := d.baseRef(l, version)
	id, pulled, pullErr := d.officialBase(ctx, ref, log)
	if pullErr == nil {
		if pulled {
			fmt.Fprintf(log, "pulled %s: the %s %s agent image is built on it\n", ref, l.name, version)
		} else {
			fmt.Fprintf(log, "using %s, already in the engine: the %s %s agent image is built on it\n", ref, l.name, version)
		}
		// Only a Python image is known to carry Debian's trust store
		// (python:*-slim installs ca-certificates; node:*-slim does not).
		certs := l.role == pythonLanguage.role
		tag := d.imageTag(l, version, bin, ca, "image "+ref+"@"+id, certs)
		labels := map[string]string{LabelBase: ref}
		if pulled {
			labels[LabelPulled] = "true"
		}
		return tag, d.buildLanguage(ctx, l, version, tag, ref, bin, ca, certs, labels, log)
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	suite, ok := l.releases[version]
	if !ok {
		return "", fmt.Errorf("%w: could not pull %s (%v), and Slipway builds %s images from Debian packages only for %s, not %s: let the engine pull %s (or docker load it), set %s to an image with %s %s, or set base_image in the graph configuration",
			runtime.ErrUnsupported, ref, pullErr, l.name, l.carry, version, ref, setting, l.name, version)
	}
	fmt.Fprintf(log, "could not pull %s: %v; building from Debian packages with debootstrap\n", ref, pullErr)
	tag := d.imageTag(l, version, bin, ca, "debian "+suite, true)
	if _, err := d.Client.ImageInspect(ctx, tag); err == nil {
		return tag, nil
	}
	rootfs, err := d.rootfsImage(ctx, suite, l.packages, l.apt, log)
	if err != nil {
		return "", err
	}
	return tag, d.buildLanguage(ctx, l, version, tag, rootfs, bin, ca, true, map[string]string{LabelBase: rootfs}, log)
}

// buildLanguage builds the agent image tag on base unless it exists; labels
// (which base, whether Slipway pulled it) join the install's.
func (d *Driver) buildLanguage(ctx context.Context, l language, version, tag, base string, bin, ca []byte, certs bool, labels map[string]string, log io.Writer) error {
	if _, err := d.Client.ImageInspect(ctx, tag); err == nil {
		return nil
	}
	start := time.Now()
	fmt.Fprintf(log, "==> build the %s %s agent image %s on %s\n", l.name, version, tag, base)
	buf, err := tarContext(contextFile{"Dockerfile", 0o644, []byte(languageRecipe(base, ca != nil, certs))}, contextFile{"slipway", 0o755, bin}, contextFile{"data/.keep", 0o600, nil}, contextFile{"ca-certificates.crt", 0o644, ca})
	if err != nil {
		return err
	}
	// The install's: prune removes it once no deployment is built on it.
	labels[LabelManaged], labels[LabelRole], labels[LabelInstance] = "true", l.role, d.Instance
	if err := d.build(ctx, buf, tag, labels, log); err != nil {
		return fmt.Errorf("build the %s agent image: %w", l.name, err)
	}
	fmt.Fprintf(log, "<== build the %s %s agent image done in %s\n", l.name, version, time.Since(start).Round(time.Millisecond))
	return nil
}

// rootfsImage imports the Debian root filesystem of suite with packages,
// bootstrapping it first when the cache has none.
func (d *Driver) rootfsImage(ctx context.Context, suite string, packages, apt []string, log io.Writer) (string, error) {
	key := suite + " " + strings.Join(packages, ",")
	if len(apt) > 0 {
		key += " apt " + strings.Join(apt, ",")
	}
	h := sha256.Sum256([]byte(key))
	id := suite + "-" + hex.EncodeToString(h[:6])
	// The directory is shared by the installs that use the cache; the
	// imported image is this install's, which prune may remove.
	hi := sha256.Sum256([]byte(id + "\x00" + d.Instance))
	tag := "slipway-rootfs:" + id + "-" + hex.EncodeToString(hi[:4])
	if _, err := d.Client.ImageInspect(ctx, tag); err == nil {
		return tag, nil
	}
	// The cache directory is bootstrapped by one build at a time.
	unlock, err := d.builds.lock(ctx, tag, log)
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := d.Client.ImageInspect(ctx, tag); err == nil {
		return tag, nil // imported by the build this one waited for
	}
	dir := filepath.Join(d.imageCache(), "rootfs-"+id)
	unlockDir, err := BootstrapRootfs(ctx, dir, suite, packages, apt, log)
	if err != nil {
		return "", err
	}
	defer unlockDir()
	start := time.Now()
	fmt.Fprintf(log, "==> import %s as %s\n", dir, tag)
	if err := ImportRootfs(ctx, d.Client, dir, tag, []string{
		"LABEL " + LabelManaged + "=true " + LabelRole + "=rootfs " + LabelInstance + "=" + d.Instance + " " + LabelRootfs + "=" + quote(dir),
		"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	}); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "<== import done in %s\n", time.Since(start).Round(time.Millisecond))
	return tag, nil
}

// debootstrap builds a minimal Debian root filesystem in dir.
func debootstrap(ctx context.Context, dir, suite string, packages, apt []string, log io.Writer) error {
	bin, err := exec.LookPath("debootstrap")
	if err != nil {
		return fmt.Errorf("%w: building a Python agent image needs debootstrap (apt-get install debootstrap), or base_image in the graph configuration", runtime.ErrUnsupported)
	}
	tmp := dir + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Errorf("image cache: %w", err)
	}
	start := time.Now()
	argv := []string{"--variant=minbase", "--include=" + strings.Join(packages, ","), suite, tmp, debianMirror}
	fmt.Fprintf(log, "==> debootstrap %s\n", strings.Join(argv, " "))
	cmd := exec.CommandContext(ctx, bin, argv...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("debootstrap %s: %w", suite, err)
	}
	if len(apt) > 0 {
		fmt.Fprintf(log, "==> apt-get install %s\n", strings.Join(apt, " "))
		cmd := exec.CommandContext(ctx, "chroot", append([]string{tmp, "apt-get", "install", "-y", "-q", "--no-install-recommends"}, apt...)...)
		cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "DEBIAN_FRONTEND=noninteractive", "LANG=C.UTF-8"}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("apt-get install %s in the %s root filesystem: %w", strings.Join(apt, " "), suite, err)
		}
	}
	// What the image does not need: package lists and caches.
	for _, p := range []string{"var/cache/apt/archives", "var/lib/apt/lists"} {
		entries, _ := os.ReadDir(filepath.Join(tmp, p))
		for _, e := range entries {
			if e.Name() != "partial" && e.Name() != "lock" {
				os.RemoveAll(filepath.Join(tmp, p, e.Name()))
			}
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".slipway-complete"), nil, 0o644); err != nil {
		return err
	}
	os.RemoveAll(dir)
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	fmt.Fprintf(log, "<== debootstrap done in %s\n", time.Since(start).Round(time.Millisecond))
	return nil
}

// tarTree writes dir as a tar stream, owners, modes, links and devices
// as they are (a root filesystem).
func tarTree(dir string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." || rel == ".slipway-complete" {
			return err
		}
		// The engine provides these; debootstrap's /proc may even still
		// be mounted after a failure.
		if top, _, nested := strings.Cut(filepath.ToSlash(rel), "/"); nested && (top == "proc" || top == "sys" || top == "dev") {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		return tarEntry(tw, p, filepath.ToSlash(rel), info, true)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// pythonBuild builds a revision image of a Python project in two images:
// its dependencies (slipway-deps:<hash>, built once per set of dependency
// files and interpreter, so a code-only change reuses it) and, on top, the
// project's code.
func (d *Driver) pythonBuild(ctx context.Context, s runtime.Spec, tree *build.Tree, cfgPath string, proj *build.Project, g graphFile, tag string, labels map[string]string, log io.Writer) error {
	cfgDir := path.Dir(cfgPath)
	plan, err := proj.PythonPlan(tree, cfgDir)
	if err != nil {
		return err
	}
	noteUnsupported(proj, cfgPath, log)
	py := proj.PythonVersion
	if py == "" {
		py = build.DefaultPythonVersion
	}
	base, err := d.projectBase(ctx, g, pythonLanguage, py, labels, log)
	if err != nil {
		return err
	}
	// The dependencies' image: only the files that name dependencies
	// reach its build context, so only they decide whether it is reused.
	inApp := func(rel string) string { return path.Join(cfgDir, rel) }
	files := map[string]bool{}
	for _, f := range plan.RequirementFiles {
		files[inApp(f)] = true
	}
	if plan.PipConfigFile != "" {
		files[inApp(plan.PipConfigFile)] = true
	}
	var args []string
	for _, f := range plan.RequirementFiles {
		args = append(args, "-r", "/deps/"+inApp(f))
	}
	args = append(args, plan.Requirements...)
	for _, p := range plan.Packages {
		args = append(args, "/deps/"+inApp(p))
	}
	install := pipInstall(plan.Installer, args)
	// Per deployment: a dependencies image holds its pip_config_file
	// (which may carry an index's credentials) and goes with it.
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", s.DeploymentID, base, strings.Join(install, "\x00"))
	var dctx bytes.Buffer
	tw := tar.NewWriter(&dctx)
	// COPY needs the directory even when no file names dependencies.
	if err := tarFile(tw, "deps/.keep", nil); err != nil {
		return err
	}
	for f := range files {
		raw, err := tree.ReadFile(f, 0)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s %x\n", f, sha256.Sum256(raw))
		if err := tarFile(tw, "deps/"+f, raw); err != nil {
			return err
		}
	}
	for _, p := range plan.Packages {
		// Installed from their code: the whole directory is a dependency.
		fmt.Fprintf(h, "package %s %d\n", p, time.Now().UnixNano())
		if err := addTree(tw, tree, inApp(p), "deps/"+inApp(p)); err != nil {
			return err
		}
	}
	depsTag := "slipway-deps:" + hex.EncodeToString(h.Sum(nil)[:8])
	var df strings.Builder
	depsHeader(&df, g, base, labels)
	df.WriteString("COPY deps /deps\n")
	if plan.PipConfigFile != "" {
		fmt.Fprintf(&df, "ENV PIP_CONFIG_FILE=%s\n", quote("/deps/"+inApp(plan.PipConfigFile)))
	}
	df.WriteString("RUN [\"python3\", \"-m\", \"venv\", \"/venv\"]\n")
	if len(args) > 0 {
		if plan.Installer == "uv" {
			// uv is on PyPI: it is installed beside the environment, from
			// the same index, and used for the project's dependencies.
			df.WriteString("RUN [\"python3\", \"-m\", \"venv\", \"/opt/uv\"]\n")
			df.WriteString("RUN [\"/opt/uv/bin/python\", \"-m\", \"pip\", \"install\", \"--no-cache-dir\", \"--disable-pip-version-check\", \"uv\"]\n")
		}
		fmt.Fprintf(&df, "RUN %s\n", execForm(install))
	}
	if err := d.buildDeps(ctx, s, depsTag, &dctx, tw, df.String(), log); err != nil {
		return err
	}
	// The revision: the code, its directories on the path, the agent.
	var paths []string
	for _, p := range plan.Paths {
		paths = append(paths, path.Join("/app", cfgDir, p))
	}
	pth := `import os, sys, sysconfig; p = os.path.join(sysconfig.get_paths()["purelib"], "_slipway_project.pth"); open(p, "w").write("".join(a + "\n" for a in sys.argv[1:]))`
	run := execForm(append([]string{"/venv/bin/python", "-I", "-c", pth}, paths...))
	var rf strings.Builder
	fmt.Fprintf(&rf, "FROM %s\nCOPY app /app\nRUN %s\n", depsTag, run)
	projectCommands(&rf, s, s.InstallCommand, cfgDir)
	extra := "VIRTUAL_ENV=/venv PATH=/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin SLIPWAY_AGENT_PYTHON=/venv/bin/python"
	if err := revisionTail(&rf, proj, g, tree, cfgPath, extra, labels, log); err != nil {
		return err
	}
	return d.buildRevision(ctx, tree, rf.String(), tag, nil, log)
}

// pipInstall is the command that installs args into /venv with installer
// ("uv", else pip).
func pipInstall(installer string, args []string) []string {
	if installer == "uv" {
		return append([]string{"/opt/uv/bin/uv", "pip", "install", "--no-cache", "--python", "/venv/bin/python"}, args...)
	}
	return append([]string{"/venv/bin/python", "-m", "pip", "install", "--no-cache-dir", "--disable-pip-version-check"}, args...)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// addTree adds the regular files and directories under dir (relative to
// the tree) as name/; links are left out, not followed.
func addTree(tw *tar.Writer, tree *build.Tree, dir, name string) error {
	return tree.WalkDir(dir, func(p string, e fs.DirEntry) error {
		rel := p // below dir
		if dir != "." {
			rel = strings.TrimPrefix(strings.TrimPrefix(p, dir), "/")
		}
		n := path.Join(name, rel)
		switch {
		case e.IsDir():
			return tw.WriteHeader(&tar.Header{Name: n + "/", Mode: 0o755, Typeflag: tar.TypeDir})
		case e.Type().IsRegular():
			raw, err := tree.ReadFile(p, 0)
			if err != nil {
				return err
			}
			if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(raw)), Typeflag: tar.TypeReg}); err != nil {
				return err
			}
			_, err = tw.Write(raw)
			return err
		}
		return nil
	})
}
