// Package fake is a runtime driver for tests of the control plane: it walks
// revisions through their lifecycle without running anything, and can be
// told to fail. It is selected only by SLIPWAY_RUNTIME=fake.
package fake

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"slipway/runtime"
)

// Driver records what it was asked to do.
type Driver struct {
	// Delay is how long Build and Deploy each take.
	Delay time.Duration

	mu      sync.Mutex
	running map[string]map[string]bool // deployment → revision → running
	// endpoints: deployments whose image_uri is a loopback HTTP URL are
	// "served" there, so tests can put a server of their own behind the
	// proxy.
	endpoints map[string]string
}

// New returns a fake driver whose steps take delay.
func New(delay time.Duration) *Driver {
	return &Driver{Delay: delay, running: map[string]map[string]bool{}, endpoints: map[string]string{}}
}

func (d *Driver) Name() string { return "fake" }

func (d *Driver) wait(ctx context.Context) error {
	select {
	case <-time.After(d.Delay):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Build fails when the image URI or graph config path contains "fail-build",
// so tests can drive BUILD_FAILED through the public API.
func (d *Driver) Build(ctx context.Context, s runtime.Spec, log io.Writer) (string, error) {
	fmt.Fprintf(log, "fake build of revision %s\n", s.RevisionID)
	if err := d.wait(ctx); err != nil {
		return "", err
	}
	if strings.Contains(s.ImageURI+s.GraphConfig, "fail-build") {
		return "", fmt.Errorf("build failed as requested by %q", s.ImageURI+s.GraphConfig)
	}
	return "fake-artifact-" + s.RevisionID, nil
}

// Deploy fails when the image URI or graph config path contains "fail-deploy".
func (d *Driver) Deploy(ctx context.Context, s runtime.Spec, artifact string, log io.Writer) (string, error) {
	fmt.Fprintf(log, "fake deploy of %s\n", artifact)
	if err := d.wait(ctx); err != nil {
		return "", err
	}
	if strings.Contains(s.ImageURI+s.GraphConfig, "fail-deploy") {
		return "", fmt.Errorf("health check failed as requested by %q", s.ImageURI+s.GraphConfig)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.running[s.DeploymentID] == nil {
		d.running[s.DeploymentID] = map[string]bool{}
	}
	d.running[s.DeploymentID][s.RevisionID] = true
	if strings.HasPrefix(s.ImageURI, "http://127.0.0.1:") {
		d.endpoints[s.DeploymentID] = s.ImageURI
	} else {
		delete(d.endpoints, s.DeploymentID)
	}
	return d.endpoints[s.DeploymentID], nil
}

func (d *Driver) Stop(_ context.Context, dep, rev string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.running[dep], rev)
	return nil
}

func (d *Driver) Remove(_ context.Context, dep string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.running, dep)
	delete(d.endpoints, dep)
	return nil
}

// Running lists the revisions of a deployment that are running.
func (d *Driver) Running(dep string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for r := range d.running[dep] {
		out = append(out, r)
	}
	return out
}

// Endpoint: the fake driver serves nothing, but reports whether a revision
// of dep is "running" so that restoring after a restart settles, and the
// loopback URL given as its image_uri, if any.
func (d *Driver) Endpoint(dep string) (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.endpoints[dep], len(d.running[dep]) > 0
}

// Scales: the fake driver "runs" a scaled revision as it runs any other
// (runtime.Scaler), so that the control plane's provisioning for replicas
// can be tested without processes.
func (d *Driver) Scales() bool { return true }
