package processtest_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"slipway/runtime/docker"
	"slipway/server/servertest"
)

// TestDockerTwoInstallsOnOneEngine runs two installs on one Docker
// engine. Each deploys; install B creates a thread through the proxy. An
// unclaimed object of A's (a base image of an older binary) and a
// container of an older version without an install id are planted. Then A
// restarts from a moved data dir (same install id), reconciles, collects
// its images and adopts its own agent; and the test suite's cleanup runs
// for A alone. Through all of it B's agent container is never replaced,
// its deployment keeps serving and its thread is still there; the
// unlabelled container stays too.
func TestDockerTwoInstallsOnOneEngine(t *testing.T) {
	waitParallel(t)
	requireRuntime(t, "docker")
	ctx := context.Background()
	e := engine(t)
	dirA := filepath.Join(t.TempDir(), "a")
	a := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker", "SLIPWAY_DATA_DIR": dirA})
	b := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker"})
	if len(a.InstanceID) != 32 || a.InstanceID == b.InstanceID {
		t.Fatalf("instance ids %q and %q: want two different ones", a.InstanceID, b.InstanceID)
	}
	deploy := func(s *servertest.Server, name string) (dep, url string) {
		dep = s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "internal_source", "source_config": map[string]any{},
			"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": []any{}}).Map()["id"].(string)
		rev := deploySource(t, s, dep, appFiles(t, ""))
		if st := waitStatus(t, s, dep, rev); st != "DEPLOYED" {
			t.Fatalf("%s ended %s: %s", name, st, s.Do("GET", "/v2/deployments/"+dep+"/revisions/"+rev+"/logs", nil).Body)
		}
		return dep, s.URL + "/agents/" + name
	}
	depA, _ := deploy(a, "alpha")
	depB, urlB := deploy(b, "bravo")
	agentB := agentContainers(t, depB, "agent")
	agentA := agentContainers(t, depA, "agent")
	thread := servertest.Do(t, "POST", urlB+"/threads", map[string]any{"metadata": map[string]any{"owner": "b"}}, "X-Api-Key", b.Key)
	if thread.Status != 200 {
		t.Fatalf("create a thread on B: %d %s", thread.Status, thread.Body)
	}
	threadID := thread.Map()["thread_id"].(string)

	// Every object either install created carries its id.
	for _, c := range []struct {
		s   *servertest.Server
		dep string
	}{{a, depA}, {b, depB}} {
		f := client.Filters{}.Add("label", docker.LabelDeployment+"="+c.dep)
		cs, err := e.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		vs, err := e.VolumeList(ctx, client.VolumeListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		ns, err := e.NetworkList(ctx, client.NetworkListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		is, err := e.ImageList(ctx, client.ImageListOptions{Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		var all []map[string]string
		for _, x := range cs.Items {
			all = append(all, x.Labels)
		}
		for _, x := range vs.Items {
			all = append(all, x.Labels)
		}
		for _, x := range ns.Items {
			all = append(all, x.Labels)
		}
		for _, x := range is.Items {
			all = append(all, x.Labels)
		}
		if len(cs.Items) == 0 || len(vs.Items) == 0 || len(ns.Items) == 0 || len(is.Items) == 0 {
			t.Fatalf("deployment %s: %d containers, %d volumes, %d networks, %d images", c.dep, len(cs.Items), len(vs.Items), len(ns.Items), len(is.Items))
		}
		for _, l := range all {
			if l[docker.LabelInstance] != c.s.InstanceID {
				t.Errorf("an object of deployment %s carries instance %q, want %q", c.dep, l[docker.LabelInstance], c.s.InstanceID)
			}
		}
	}
	bases := func(inst string) []string {
		res, err := e.ImageList(ctx, client.ImageListOptions{Filters: client.Filters{}.
			Add("label", docker.LabelRole+"=base").Add("label", docker.LabelInstance+"="+inst)})
		if err != nil {
			t.Fatal(err)
		}
		var tags []string
		for _, i := range res.Items {
			tags = append(tags, i.RepoTags...)
		}
		slices.Sort(tags)
		return tags
	}
	baseA, baseB := bases(a.InstanceID), bases(b.InstanceID)
	if len(baseA) != 1 || len(baseB) != 1 || baseA[0] == baseB[0] {
		t.Fatalf("agent base images: A %v, B %v; want one each, distinct", baseA, baseB)
	}
	// A base image of A's older binary (another tag of the same image
	// stands in for it): no revision uses it.
	stale := "slipway-agent:000000000000"
	if _, err := e.ImageTag(ctx, client.ImageTagOptions{Source: baseA[0], Target: stale}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.ImageRemove(context.Background(), stale, client.ImageRemoveOptions{}) })
	// A container of a Slipway before install ids: managed, no instance
	// (the empty label hides the one the image carries), a deployment
	// neither install has on record.
	legacy, err := e.ContainerCreate(ctx, client.ContainerCreateOptions{Name: "slipway-legacy-" + a.InstanceID[:8],
		Config: &container.Config{Image: baseB[0], Labels: map[string]string{docker.LabelManaged: "true", docker.LabelInstance: "",
			docker.LabelDeployment: "0190aaaa-0000-7000-8000-000000000000", docker.LabelRole: "agent"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = e.ContainerRemove(context.Background(), legacy.ID, client.ContainerRemoveOptions{Force: true})
	})

	// A restarts from a moved data dir: same install id, so it adopts its
	// running agent, reconciles and collects its images.
	a.Stop()
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(dirA, moved); err != nil {
		t.Fatal(err)
	}
	a2 := servertest.Start(t, map[string]string{"SLIPWAY_RUNTIME": "docker", "SLIPWAY_DATA_DIR": moved})
	if a2.InstanceID != a.InstanceID {
		t.Fatalf("the moved data dir has instance %s, was %s", a2.InstanceID, a.InstanceID)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r := servertest.Do(t, "GET", a2.URL+"/agents/alpha/ok", nil, "X-Api-Key", a2.Key); r.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A does not serve after its restart:\n%s", a2.Logs())
		}
	}
	if got := agentContainers(t, depA, "agent"); !slices.Equal(got, agentA) {
		t.Errorf("A's agent containers %v after the restart, were %v: not adopted", got, agentA)
	}
	if got := bases(a.InstanceID); !slices.Equal(got, baseA) {
		t.Errorf("A's base images after the restart: %v, want only %v (the stale one collected)", got, baseA)
	}
	checkB := func(when string) {
		t.Helper()
		if got := agentContainers(t, depB, "agent"); !slices.Equal(got, agentB) {
			t.Fatalf("%s: B's agent containers %v, were %v", when, got, agentB)
		}
		if r := servertest.Do(t, "GET", urlB+"/threads/"+threadID, nil, "X-Api-Key", b.Key); r.Status != 200 {
			t.Fatalf("%s: B's thread: %d %s", when, r.Status, r.Body)
		}
		if got := bases(b.InstanceID); !slices.Equal(got, baseB) {
			t.Fatalf("%s: B's base images %v, were %v", when, got, baseB)
		}
		if _, err := e.ContainerInspect(ctx, legacy.ID, client.ContainerInspectOptions{}); err != nil {
			t.Fatalf("%s: the unlabelled container of an older version is gone: %v", when, err)
		}
	}
	checkB("after A restarted")

	// The test suite's cleanup for A's install only.
	a2.Stop()
	d := &docker.Driver{Client: e, Root: t.TempDir(), Instance: a.InstanceID}
	if err := d.Reconcile(ctx, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	f := client.Filters{}.Add("label", docker.LabelDeployment+"="+depA)
	cs, err := e.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Items)+len(vs.Items) > 0 || len(bases(a.InstanceID)) > 0 {
		t.Errorf("A's cleanup left %d containers, %d volumes, base images %v", len(cs.Items), len(vs.Items), bases(a.InstanceID))
	}
	checkB("after A's cleanup")
}
