package docker

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"slipway/runtime"
	"slipway/runtime/build"
)

// The build context is the generated Dockerfile and the unpacked source
// under app/, nothing else: RUN steps see only what the archive held, and
// nothing of the directory around it (Slipway's data dir) is sent.
func TestContextTarHoldsOnlyTheSource(t *testing.T) {
	dataDir := t.TempDir()
	for name, body := range map[string]string{"master.key": "secret-master-key", "secrets/creds/token": "secret-token"} {
		p := filepath.Join(dataDir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	app := filepath.Join(dataDir, "builds", "dep", "rev", "app")
	for name, body := range map[string]string{"langgraph.json": "{}", "src/agent.py": "print(1)"} {
		p := filepath.Join(app, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("src/agent.py", filepath.Join(app, "main.py")); err != nil {
		t.Fatal(err)
	}
	tree, err := build.OpenTree(app)
	if err != nil {
		t.Fatal(err)
	}
	defer tree.Close()
	rd, err := contextTar(tree, "FROM x\n")
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(rd)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		names = append(names, h.Name)
		if h.Name != "Dockerfile" && !strings.HasPrefix(h.Name, "app/") {
			t.Errorf("the context holds %q, outside app/", h.Name)
		}
		if strings.Contains(h.Name, dataDir) || strings.Contains(h.Linkname, dataDir) || strings.Contains(string(body), "secret-") {
			t.Errorf("the context names or holds the data dir: %+v", h)
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s keeps its owner on the host: %d:%d %s:%s", h.Name, h.Uid, h.Gid, h.Uname, h.Gname)
		}
	}
	want := "Dockerfile app/ app/langgraph.json app/main.py app/src/ app/src/agent.py"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("context: %s, want %s", got, want)
	}
}

// Secrets never reach the Dockerfile: the recipe is made without them,
// and the only ENV it sets is the agent's own configuration.
func TestDockerfileSetsNoSecret(t *testing.T) {
	df, err := dockerfile("base", graphFile{BaseImage: "debian:12"}, "langgraph.json", "make", "make build", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(df, "\n") {
		if strings.HasPrefix(line, "ENV ") && line != `ENV SLIPWAY_AGENT_ADDR=0.0.0.0:8000 SLIPWAY_AGENT_DATA_DIR=/data SLIPWAY_GRAPH_CONFIG="/app/langgraph.json"` {
			t.Errorf("unexpected ENV: %s", line)
		}
		if strings.HasPrefix(line, "ARG ") {
			t.Errorf("unexpected ARG: %s", line)
		}
	}
}

func TestLineImages(t *testing.T) {
	cases := []struct{ line, want string }{
		{"FROM slipway/other:rev", "slipway/other:rev"},
		{"from --platform=linux/amd64 docker.io/slipway/other@sha256:abc AS x", "docker.io/slipway/other@sha256:abc"},
		{"COPY --from=slipway/other:rev /app /stolen", "slipway/other:rev"},
		{`ADD --chown=1:1 --from="img" a b`, "img"},
		{"COPY --from=builder /out /app", "builder"},
		{"RUN echo FROM x", ""},
		{"COPY a b", ""},
		{"FROM", ""},
		{"", ""},
	}
	for _, c := range cases {
		if got := strings.Join(lineImages(c.line), ","); got != c.want {
			t.Errorf("lineImages(%q) = %q, want %q", c.line, got, c.want)
		}
	}
}

// imageEngine knows a few images by reference, with their labels.
type imageEngine struct {
	Engine
	images map[string]map[string]string
}

func (e imageEngine) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	l, ok := e.images[ref]
	if !ok {
		return client.ImageInspectResult{}, cerrdefs.ErrNotFound
	}
	var r client.ImageInspectResult
	raw, _ := json.Marshal(map[string]any{"Config": map[string]any{"Labels": l}})
	err := json.Unmarshal(raw, &r.InspectResponse)
	return r, err
}

func TestOwnImage(t *testing.T) {
	built := func(dep, ws string) map[string]string {
		l := (&Driver{}).labels(dep, "r", "image")
		if ws != "" {
			l[LabelWorkspace] = ws
		}
		return l
	}
	d := &Driver{Client: imageEngine{images: map[string]map[string]string{
		"slipway/mine:r1":       built("mine", "ws"),
		"slipway/sibling:r1":    built("sibling", "ws"),
		"slipway/other:r1":      built("other", "ws2"),
		"sha256:0123456789ab":   built("other", "ws2"),
		"slipway/unlabelled:r1": built("old", ""), // built before images named their workspace
		"slipway-agent:x":       {LabelManaged: "true", LabelRole: "base"},
		"debian:12":             nil,
		"forged":                {LabelDeployment: "other"}, // not made by Slipway: no managed label
	}}}
	for ref, ok := range map[string]bool{"slipway/mine:r1": true, "slipway/sibling:r1": true, "slipway/other:r1": false,
		"sha256:0123456789ab": false, "slipway/unlabelled:r1": false, "slipway-agent:x": true, "debian:12": true,
		"absent:1": true, "forged": true} {
		err := d.ownImage(context.Background(), ref, runtime.Spec{DeploymentID: "mine", WorkspaceID: "ws"})
		if (err == nil) != ok || err != nil && !errors.Is(err, runtime.ErrUnsupported) {
			t.Errorf("ownImage(%q) = %v, want ok=%v", ref, err, ok)
		}
	}
}

// TestOurs: an install touches objects with its own id, and unlabelled
// ones (older versions) only when its record claims their deployment.
func TestOurs(t *testing.T) {
	d := &Driver{Instance: "me"}
	for _, c := range []struct {
		name    string
		labels  map[string]string
		claimed bool
		want    bool
	}{
		{"own id", map[string]string{LabelManaged: "true", LabelInstance: "me"}, false, true},
		{"own id, claimed", map[string]string{LabelManaged: "true", LabelInstance: "me"}, true, true},
		{"another install", map[string]string{LabelManaged: "true", LabelInstance: "other"}, false, false},
		{"another install, same deployment id", map[string]string{LabelManaged: "true", LabelInstance: "other"}, true, false},
		{"older version, claimed", map[string]string{LabelManaged: "true"}, true, true},
		{"older version, unclaimed", map[string]string{LabelManaged: "true"}, false, false},
		{"not slipway's", map[string]string{LabelInstance: "me"}, true, false},
	} {
		if got := d.ours(c.labels, c.claimed); got != c.want {
			t.Errorf("%s: ours = %v, want %v", c.name, got, c.want)
		}
	}
	if (&Driver{}).ours(map[string]string{LabelManaged: "true", LabelInstance: ""}, false) {
		t.Error("a driver without an instance id claims unlabelled objects")
	}
}

// TestCheckStatic: a dynamically linked binary (the host's shell) is
// refused with a message naming the fix.
func TestCheckStatic(t *testing.T) {
	err := CheckStatic("/bin/sh")
	if err == nil || !errors.Is(err, runtime.ErrUnsupported) || !strings.Contains(err.Error(), "CGO_ENABLED=0") {
		t.Fatalf("CheckStatic(/bin/sh) = %v", err)
	}
}
