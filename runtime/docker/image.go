package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"

	"slipway/runtime"
	"slipway/runtime/build"
)

// agentUser runs the agent in every image Slipway builds: an unprivileged
// uid that owns only the agent's data and scratch directories.
const agentUser = agentID + ":" + agentID

// agentID is the agent user's uid and gid: nobody and nogroup.
const agentID = "65534"

// graphFile is the part of the graph configuration file (langgraph.json
// format) that shapes the image.
type graphFile struct {
	BaseImage       string   `json:"base_image"`
	DockerfileLines []string `json:"dockerfile_lines"`
}

// ParseGraphFile reads the image-related keys of a graph configuration.
func ParseGraphFile(raw []byte) (graphFile, error) {
	var g graphFile
	if err := json.Unmarshal(raw, &g); err != nil {
		return g, fmt.Errorf("graph configuration is not valid JSON: %w", err)
	}
	if strings.ContainsAny(g.BaseImage, " \t\r\n") {
		return g, fmt.Errorf("base_image %q must be one image reference", g.BaseImage)
	}
	for i, l := range g.DockerfileLines {
		if strings.ContainsAny(l, "\r\n") {
			return g, fmt.Errorf("dockerfile_lines[%d] spans several lines; give one instruction per entry", i)
		}
	}
	return g, nil
}

// dockerfile is the recipe of a revision image. The default base is the
// agent image (FROM scratch plus the static slipway binary), which has no
// shell; a base_image brings its own userland and gets the binary copied in.
// The classic builder runs a container per instruction, so the default
// recipe inherits its working directory, user and entrypoint from the agent
// image and sets every label in one instruction.
func dockerfile(agentImage string, g graphFile, graphConfig, install, buildCmd string, labels map[string]string) (string, error) {
	var b strings.Builder
	custom := g.BaseImage != ""
	if !custom && (strings.TrimSpace(install) != "" || strings.TrimSpace(buildCmd) != "") {
		return "", fmt.Errorf("%w: install_command and build_command run in a shell, and the default agent image is FROM scratch without one: set base_image in the graph configuration to an image with a shell", runtime.ErrUnsupported)
	}
	if custom {
		fmt.Fprintf(&b, "FROM %s AS slipway\nFROM %s\n", agentImage, g.BaseImage)
		fmt.Fprintf(&b, "COPY --from=slipway /slipway /slipway\n")
		fmt.Fprintf(&b, "COPY --from=slipway --chown=%s /data /data\nCOPY --from=slipway --chown=%s /tmp /tmp\n", agentUser, agentUser)
		b.WriteString("COPY app /app\nWORKDIR /app\n")
	} else {
		fmt.Fprintf(&b, "FROM %s\nCOPY app /app\n", agentImage)
	}
	if strings.TrimSpace(install) != "" {
		fmt.Fprintf(&b, "RUN %s\n", oneLine(install))
	}
	cfgDir := path.Dir(graphConfig)
	if strings.TrimSpace(buildCmd) != "" {
		fmt.Fprintf(&b, "WORKDIR %s\nRUN %s\nWORKDIR /app\n", path.Join("/app", cfgDir), oneLine(buildCmd))
	}
	for _, l := range g.DockerfileLines {
		b.WriteString(l + "\n")
	}
	fmt.Fprintf(&b, "ENV SLIPWAY_AGENT_ADDR=0.0.0.0:8000 SLIPWAY_AGENT_DATA_DIR=/data SLIPWAY_GRAPH_CONFIG=%s\n", quote(path.Join("/app", graphConfig)))
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b.WriteString("LABEL")
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%s", quote(k), quote(labels[k]))
	}
	b.WriteString("\n")
	if custom || len(g.DockerfileLines) > 0 {
		// A base image or a dockerfile line may have changed them.
		fmt.Fprintf(&b, "WORKDIR /app\nUSER %s\nENTRYPOINT [\"/slipway\", \"agent\"]\n", agentUser)
	}
	return b.String(), nil
}

// quote makes a value one Dockerfile word that the builder does not expand.
func quote(v string) string {
	return strings.ReplaceAll(strconv.Quote(v), "$", `\$`)
}

// oneLine keeps a shell command inside its RUN instruction.
func oneLine(cmd string) string {
	return strings.ReplaceAll(strings.TrimSpace(cmd), "\n", " \\\n  ")
}

// CheckStatic refuses a dynamically linked binary: the agent image has no
// libc, so it would fail at start with a baffling "no such file". Slipway
// checks its own binary at start-up, so that the log and GET /info say so
// before the first docker build fails.
func CheckStatic(bin string) error {
	f, err := elf.Open(bin)
	if err != nil {
		return fmt.Errorf("read %s: %w", bin, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%w: %s is dynamically linked; build slipway with CGO_ENABLED=0 for the docker runtime", runtime.ErrUnsupported, bin)
		}
	}
	return nil
}

// agentRecipe is the agent base image's Dockerfile and tag. The tag hashes
// the binary and the recipe, which names the install: each install has
// base images of its own, so collecting them (CollectImages) never takes
// one from under another install's builds.
func (d *Driver) agentRecipe(bin []byte) (df, tag string) {
	df = "FROM scratch\nCOPY slipway /slipway\n" +
		"COPY --chown=" + agentUser + " data /data\nCOPY --chown=" + agentUser + " tmp /tmp\n" +
		"ENV HOME=/tmp TMPDIR=/tmp\nWORKDIR /app\nUSER " + agentUser + "\n" +
		"LABEL " + quote(LabelInstance) + "=" + quote(d.Instance) + "\n" +
		"ENTRYPOINT [\"/slipway\", \"agent\"]\n"
	h := sha256.New()
	h.Write(bin)
	h.Write([]byte(df))
	return df, "slipway-agent:" + hex.EncodeToString(h.Sum(nil)[:6])
}

// agentImage builds (once per binary) the image every revision starts
// from: the static slipway binary in an otherwise empty filesystem, with
// data and scratch directories owned by the agent's user.
func (d *Driver) agentImage(ctx context.Context, log io.Writer) (string, error) {
	d.baseMu.Lock()
	defer d.baseMu.Unlock()
	if d.base != "" {
		return d.base, nil
	}
	if err := CheckStatic(d.Bin); err != nil {
		return "", err
	}
	bin, err := os.ReadFile(d.Bin)
	if err != nil {
		return "", fmt.Errorf("read the slipway binary: %w", err)
	}
	df, tag := d.agentRecipe(bin)
	if _, err := d.Client.ImageInspect(ctx, tag); err == nil {
		d.base = tag
		return tag, nil
	}
	buf, err := tarContext(contextFile{"Dockerfile", 0o644, []byte(df)}, contextFile{"slipway", 0o755, bin}, contextFile{"data/.keep", 0o600, nil}, contextFile{"tmp/.keep", 0o600, nil})
	if err != nil {
		return "", err
	}
	fmt.Fprintf(log, "building the agent base image %s\n", tag)
	if err := d.build(ctx, buf, tag, map[string]string{LabelManaged: "true", LabelInstance: d.Instance, LabelRole: "base"}, log); err != nil {
		return "", fmt.Errorf("build the agent base image: %w", err)
	}
	d.base = tag
	return tag, nil
}

// CollectImages removes this install's agent base images that no revision
// image uses: one is built per Slipway binary, and upgrades would pile
// them up. The current binary's image stays. A revision image names its
// base (LabelBase); one built before that label existed keeps its base
// through the engine, which refuses to remove an image with children.
func (d *Driver) CollectImages(ctx context.Context) error {
	_, err := d.collectBases(ctx)
	return err
}

// collectBases is CollectImages, returning the tags it removed.
func (d *Driver) collectBases(ctx context.Context) (removed []string, err error) {
	if d.Instance == "" {
		return nil, nil
	}
	mine := client.Filters{}.Add("label", LabelManaged+"=true").Add("label", LabelInstance+"="+d.Instance)
	res, err := d.Client.ImageList(ctx, client.ImageListOptions{Filters: mine})
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	used := map[string]bool{}
	if d.Bin != "" {
		if bin, err := os.ReadFile(d.Bin); err == nil {
			_, tag := d.agentRecipe(bin)
			used[tag] = true
		}
	}
	for _, img := range res.Items {
		if b := img.Labels[LabelBase]; b != "" {
			used[b] = true
		}
	}
	var errs []error
	for _, img := range res.Items {
		if img.Labels[LabelRole] != "base" {
			continue
		}
		for _, tag := range img.RepoTags {
			if used[tag] || !strings.HasPrefix(tag, "slipway-agent:") {
				continue
			}
			_, err := d.Client.ImageRemove(ctx, tag, client.ImageRemoveOptions{PruneChildren: true})
			switch {
			case err == nil:
				d.Log.Info().Str("image", tag).Msg("removed an agent base image no revision uses")
				removed = append(removed, tag)
			case cerrdefs.IsConflict(err) || cerrdefs.IsNotFound(err):
				// Still the parent of an image, or already gone.
			default:
				errs = append(errs, fmt.Errorf("remove image %s: %w", tag, err))
			}
		}
	}
	return removed, errors.Join(errs...)
}

// build runs one image build and reads its whole output stream: a failed
// build is not an API error but an errorDetail line in that stream.
func (d *Driver) build(ctx context.Context, context io.Reader, tag string, labels map[string]string, log io.Writer) error {
	res, err := d.Client.ImageBuild(ctx, context, client.ImageBuildOptions{
		Tags: []string{tag}, Labels: labels, Remove: true, ForceRemove: true, Dockerfile: "Dockerfile",
	})
	if err != nil {
		return fmt.Errorf("start image build: %w", err)
	}
	defer res.Body.Close()
	dec := json.NewDecoder(res.Body)
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("read build output: %w", err)
		}
		if m.Stream != "" {
			io.WriteString(log, m.Stream)
		}
		if m.Error != nil {
			return errors.New(strings.TrimSpace(m.Error.Message))
		}
	}
}

// contextTar packs the build context: the generated Dockerfile and the
// unpacked source tree under app/. The unpacker already refused links
// that leave the tree, so links are copied as they are (never followed:
// the tree is read through build.Tree).
func contextTar(tree *build.Tree, df string) (io.Reader, error) {
	return contextTarSkip(tree, df, nil)
}

// contextTarSkip is contextTar without the files and directories skip
// names (slash-separated, relative to the source).
func contextTarSkip(tree *build.Tree, df string, skip func(rel string) bool) (io.Reader, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "Dockerfile", Mode: 0o644, Size: int64(len(df)), Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := io.WriteString(tw, df); err != nil {
		return nil, err
	}
	err := tree.WalkDir(".", func(rel string, e fs.DirEntry) error {
		if skip != nil && rel != "." && skip(rel) {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		info, err := tree.Lstat(rel)
		if err != nil {
			return err
		}
		return treeEntry(tw, tree, rel, path.Join("app", rel), info)
	})
	if err != nil {
		return nil, fmt.Errorf("pack build context: %w", err)
	}
	return &buf, tw.Close()
}

// ensureImage makes an image given by reference available: used as it is
// when present, pulled otherwise (or always, or never, per policy).
func (d *Driver) ensureImage(ctx context.Context, ref, policy string, log io.Writer) error {
	if policy != "Always" {
		if _, err := d.Client.ImageInspect(ctx, ref); err == nil {
			return nil
		} else if !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("inspect image %s: %w", ref, err)
		}
		if policy == "Never" {
			return fmt.Errorf("%w: image %s is not present and its imagePullPolicy is Never", runtime.ErrUnsupported, ref)
		}
	}
	fmt.Fprintf(log, "pulling image %s\n", ref)
	resp, err := d.Client.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return fmt.Errorf("pull image %s: %w", ref, err)
	}
	defer resp.Close()
	if err := resp.Wait(ctx); err != nil {
		return fmt.Errorf("pull image %s: %w", ref, err)
	}
	return nil
}

// ownImage refuses an image that a revision build made for a deployment
// of another workspace: such an image holds that deployment's source, so
// naming it as a base_image, an image_uri, an init container's or a
// sidecar's image, or in a dockerfile line, would read another tenant's
// files. The labels are checked rather than the name, so any tag, digest or
// image id of it is refused alike. Deployments of one workspace may share
// images (their users can deploy either). An image that is not present is
// left to the pull.
func (d *Driver) ownImage(ctx context.Context, ref string, s runtime.Spec) error {
	res, err := d.Client.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if res.Config == nil {
		return nil
	}
	l := res.Config.Labels
	if l[LabelManaged] != "true" || l[LabelDeployment] == "" || l[LabelDeployment] == s.DeploymentID {
		return nil
	}
	if l[LabelWorkspace] == "" || l[LabelWorkspace] != s.WorkspaceID {
		return fmt.Errorf("%w: image %s was built for a deployment of another workspace; a deployment may use only its workspace's revision images",
			runtime.ErrUnsupported, ref)
	}
	return nil
}

// lineImages are the images a dockerfile line names: FROM's image, and
// COPY or ADD --from= (which may also name a build stage; a name that is
// no image is no concern of ownImage).
func lineImages(line string) []string {
	f := strings.Fields(line)
	if len(f) < 2 {
		return nil
	}
	switch strings.ToUpper(f[0]) {
	case "FROM":
		for _, w := range f[1:] {
			if !strings.HasPrefix(w, "--") {
				return []string{w}
			}
		}
	case "COPY", "ADD":
		var out []string
		for _, w := range f[1:] {
			if v, ok := strings.CutPrefix(w, "--from="); ok {
				out = append(out, strings.Trim(v, `"'`))
			}
		}
		return out
	}
	return nil
}

// treeEntry adds the file rel of tree, described by info, to tw as name,
// as tarEntry does for a build context (owned by root), reading it
// through the tree (no link followed).
func treeEntry(tw *tar.Writer, tree *build.Tree, rel, name string, info fs.FileInfo) error {
	return tarInfo(tw, name, info, false, func() (string, error) { return tree.Readlink(rel) },
		func() (*os.File, error) { return tree.Open(rel) })
}

// tarEntry adds the file at p, described by info, to tw as name: its mode,
// link target and contents as they are. keepOwner false makes it root's
// (a build context); true keeps the owner (a root filesystem).
func tarEntry(tw *tar.Writer, p, name string, info fs.FileInfo, keepOwner bool) error {
	return tarInfo(tw, name, info, keepOwner, func() (string, error) { return os.Readlink(p) },
		func() (*os.File, error) { return os.Open(p) })
}

// tarInfo writes one entry: info's header as name (a link's target from
// readlink), then a regular file's contents from open, at most its size.
func tarInfo(tw *tar.Writer, name string, info fs.FileInfo, keepOwner bool, readlink func() (string, error), open func() (*os.File, error)) error {
	link := ""
	if info.Mode()&fs.ModeSymlink != 0 {
		var err error
		if link, err = readlink(); err != nil {
			return err
		}
	}
	h, err := tar.FileInfoHeader(info, link)
	if err != nil {
		return err
	}
	h.Name = name
	if info.IsDir() {
		h.Name += "/"
	}
	if !keepOwner {
		h.Uid, h.Gid, h.Uname, h.Gname = 0, 0, "", ""
	}
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return nil
	}
	f, err := open()
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, io.LimitReader(f, info.Size()))
	return err
}
