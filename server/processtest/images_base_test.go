package processtest_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/server/servertest"
)

// startRegistry runs Debian's docker-registry on a free port of 127.0.0.1
// (the engine pulls from 127.0.0.0/8 over plain HTTP by default) until the
// test ends, and returns its host:port.
func startRegistry(t *testing.T) string {
	t.Helper()
	bin, err := osexec.LookPath("docker-registry")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("the base image tests need a registry (apt-get install docker-registry)")
		}
		t.Skip("skipping: docker-registry is not installed (apt-get install docker-registry); under CI=true this fails instead")
	}
	dir := t.TempDir()
	addr := servertest.FreeAddr(t)
	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), addr)
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start docker-registry: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if resp, err := http.Get("http://" + addr + "/v2/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("docker-registry does not answer at %s:\n%s", addr, out.String())
		}
	}
}

// privateImageCache is an image cache of the test's own, with copies of
// the Debian bookworm root filesystems the shared cache already has (else
// debootstrap fills it): pruning removes cached root filesystems, and the
// shared ones serve other tests.
func privateImageCache(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	found, _ := filepath.Glob(filepath.Join(docker.DefaultImageCache, "rootfs-bookworm-*"))
	for _, src := range found {
		if _, err := os.Stat(filepath.Join(src, ".slipway-complete")); err != nil {
			continue
		}
		if out, err := osexec.Command("cp", "-a", src, dir+"/").CombinedOutput(); err != nil {
			t.Fatalf("copy %s: %v\n%s", src, err, out)
		}
	}
	return dir
}

// languageImages are the Python and Node.js agent images of an install.
func languageImages(t *testing.T, e *client.Client, instance string) map[string]map[string]string {
	t.Helper()
	res, err := e.ImageList(context.Background(), client.ImageListOptions{Filters: client.Filters{}.Add("label", docker.LabelInstance+"="+instance)})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]string{}
	for _, img := range res.Items {
		if r := img.Labels[docker.LabelRole]; (r == "python-base" || r == "node-base") && len(img.RepoTags) > 0 {
			out[img.RepoTags[0]] = img.Labels
		}
	}
	return out
}

func imageExists(t *testing.T, e *client.Client, ref string) bool {
	t.Helper()
	_, err := e.ImageInspect(context.Background(), ref)
	if err != nil && !cerrdefs.IsNotFound(err) {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	return err == nil
}

// waitGone waits until none of refs is in the engine.
func waitGone(t *testing.T, e *client.Client, what string, refs ...string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		left := 0
		for _, r := range refs {
			if imageExists(t, e, r) {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %v still in the engine", what, left, refs)
		}
	}
}

// TestAgentImageBases builds the Python agent image both ways: with the
// configured official image unreachable (a registry address where nothing
// listens), from Debian packages, the build log saying why; then, with
// that image served under the configured name by a registry on the test
// network, on the pulled image, the log saying "pulled". Both deployments
// serve. `slipway images build` then `slipway images prune` remove what no
// deployment of the install uses and keep what one does; deleting the last
// deployment built on an agent image removes it, the official image
// Slipway pulled for it, and the cached root filesystem.
func TestAgentImageBases(t *testing.T) {
	longParallel(t)
	servertest.SkipShort(t, "agent images built on two bases")
	requireRuntime(t, "docker")
	requireDebootstrap(t)
	e := engine(t)
	reg := startRegistry(t)
	cache := privateImageCache(t)
	nowhere := servertest.FreeAddr(t) // nothing listens there
	s1 := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker", "SLIPWAY_IMAGE_CACHE": cache,
		"SLIPWAY_PYTHON_BASE_IMAGE": nowhere + "/library/python:{version}-slim-bookworm"})
	dep1 := createProject(t, s1, "py-fallback")
	start := time.Now()
	rev1 := deploySource(t, s1, dep1, pyDeployFiles(t))
	if st := waitPyRevision(t, s1, dep1, rev1, 15*time.Minute); st != "DEPLOYED" {
		t.Fatalf("the fallback build ended %s:\n%s", st, phaseLogs(s1, dep1, rev1))
	}
	t.Logf("deployed on the Debian packages' image in %s", time.Since(start).Round(time.Second))
	if l := phaseLogs(s1, dep1, rev1); !strings.Contains(l, "could not pull "+nowhere+"/library/python:3.11-slim-bookworm: ") ||
		!strings.Contains(l, "; building from Debian packages with debootstrap") {
		t.Fatalf("the build log does not say why it built from Debian packages:\n%s", l)
	}
	url1, _ := s1.Do("GET", "/v2/deployments/"+dep1, nil).Map()["url"].(string)
	if st := servertest.Do(t, "GET", url1+"/ok", nil, "X-Api-Key", s1.Key).Status; st != 200 {
		t.Fatalf("GET /ok of the fallback deployment: %d", st)
	}
	imgs1 := languageImages(t, e, s1.InstanceID)
	if len(imgs1) != 1 {
		t.Fatalf("install 1's agent images: %v", imgs1)
	}
	var lang1, rootfs string
	for tag, l := range imgs1 {
		lang1, rootfs = tag, l[docker.LabelBase]
	}
	if !strings.HasPrefix(rootfs, "slipway-rootfs:bookworm-") || imgs1[lang1][docker.LabelPulled] != "" {
		t.Fatalf("the fallback image's labels: %v", imgs1[lang1])
	}
	info, err := e.ImageInspect(context.Background(), rootfs)
	if err != nil {
		t.Fatal(err)
	}
	rootfsDir := info.Config.Labels[docker.LabelRootfs]
	if filepath.Dir(rootfsDir) != cache {
		t.Fatalf("the root filesystem image %s names the directory %q, not one in %s", rootfs, rootfsDir, cache)
	}
	if _, err := os.Stat(rootfsDir); err != nil {
		t.Fatal(err)
	}

	// The registry serves a Python image under the configured name: the
	// Debian one, without Slipway's labels, pushed and removed locally.
	ref := reg + "/library/python:3.11-slim-bookworm"
	df := "FROM " + rootfs + "\nLABEL " + docker.LabelManaged + "=\"\" " + docker.LabelInstance + "=\"\" " + docker.LabelRole + "=\"\" " + docker.LabelRootfs + "=\"\"\n"
	build := osexec.Command("docker", "build", "-q", "-t", ref, "-")
	build.Stdin = strings.NewReader(df)
	for _, cmd := range []*osexec.Cmd{build, osexec.Command("docker", "push", ref), osexec.Command("docker", "rmi", ref)} {
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
	}
	t.Cleanup(func() { osexec.Command("docker", "rmi", ref).Run() })

	s2 := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker", "SLIPWAY_IMAGE_CACHE": cache,
		"SLIPWAY_PYTHON_BASE_IMAGE": reg + "/library/python:{version}-slim-bookworm"})
	dep2 := createProject(t, s2, "py-pulled")
	start = time.Now()
	rev2 := deploySource(t, s2, dep2, pyDeployFiles(t))
	if st := waitPyRevision(t, s2, dep2, rev2, 15*time.Minute); st != "DEPLOYED" {
		t.Fatalf("the build on the pulled image ended %s:\n%s", st, phaseLogs(s2, dep2, rev2))
	}
	t.Logf("deployed on the pulled image in %s", time.Since(start).Round(time.Second))
	if l := phaseLogs(s2, dep2, rev2); !strings.Contains(l, "pulled "+ref) || strings.Contains(l, "debootstrap") {
		t.Fatalf("the build log does not say it pulled %s:\n%s", ref, l)
	}
	url2, _ := s2.Do("GET", "/v2/deployments/"+dep2, nil).Map()["url"].(string)
	if got := pySDKGreeting(t, url2, s2.Key, "Ada"); got != "hello from langgraph.json, Ada" {
		t.Fatalf("the deployment on the pulled image answered %q", got)
	}
	imgs2 := languageImages(t, e, s2.InstanceID)
	var lang2 string
	for tag, l := range imgs2 {
		if lang2 = tag; l[docker.LabelBase] != ref || l[docker.LabelPulled] != "true" {
			t.Fatalf("the pulled image's agent image labels: %v", l)
		}
	}
	if len(imgs2) != 1 {
		t.Fatalf("install 2's agent images: %v", imgs2)
	}

	// `slipway images build` for install 1 on the image now in the engine
	// (not pulled by it), then `slipway images prune`: the unused image
	// goes, the one its deployment runs on stays.
	bin := servertest.Binary(t)
	cli := func(args ...string) (string, error) {
		cmd := osexec.Command(bin, append([]string{"images"}, args...)...)
		cmd.Env = append(os.Environ(), "SLIPWAY_DATA_DIR="+s1.DataDir, "SLIPWAY_IMAGE_CACHE="+cache,
			"SLIPWAY_PYTHON_BASE_IMAGE="+reg+"/library/python:{version}-slim-bookworm")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := cli("build", "-python", "3.11")
	if err != nil || !strings.Contains(out, "using "+ref+", already in the engine") {
		t.Fatalf("images build: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	extra, _, _ := strings.Cut(lines[len(lines)-1], " ")
	if _, ok := languageImages(t, e, s1.InstanceID)[extra]; !ok || extra == lang1 {
		t.Fatalf("images build made %q; install 1 has %v", extra, languageImages(t, e, s1.InstanceID))
	}
	out, err = cli("prune")
	if err != nil || !strings.Contains(out, "removed "+extra+"\n") || strings.Contains(out, lang1) || strings.Contains(out, ref) {
		t.Fatalf("images prune: %v\n%s", err, out)
	}
	if imageExists(t, e, extra) || !imageExists(t, e, lang1) || !imageExists(t, e, rootfs) || !imageExists(t, e, ref) || !imageExists(t, e, lang2) {
		t.Fatalf("after the prune: %s %v, %s %v, %s %v, %s %v, %s %v", extra, imageExists(t, e, extra), lang1, imageExists(t, e, lang1),
			rootfs, imageExists(t, e, rootfs), ref, imageExists(t, e, ref), lang2, imageExists(t, e, lang2))
	}
	if st := servertest.Do(t, "GET", url1+"/ok", nil, "X-Api-Key", s1.Key).Status; st != 200 {
		t.Fatalf("GET /ok after the prune: %d", st)
	}

	// The last deployment on each agent image takes it along: install 2's
	// with the official image Slipway pulled for it, install 1's with its
	// root filesystem, imported and cached.
	if r := s2.Do("DELETE", "/v2/deployments/"+dep2, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	waitGone(t, e, "after deleting the deployment on the pulled image", lang2, ref)
	if !imageExists(t, e, lang1) {
		t.Fatal("deleting install 2's deployment removed install 1's agent image")
	}
	if r := s1.Do("DELETE", "/v2/deployments/"+dep1, nil); r.Status != 204 {
		t.Fatalf("delete: %d %s", r.Status, r.Body)
	}
	waitGone(t, e, "after deleting the deployment on the Debian image", lang1, rootfs)
	// The directory goes after the images, in the same collection.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		if _, err := os.Stat(rootfsDir); os.IsNotExist(err) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the cached root filesystem %s is still there: %v", rootfsDir, err)
		}
	}
}
