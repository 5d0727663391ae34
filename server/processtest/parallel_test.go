package processtest_test

import (
	"flag"
	"strconv"
	"testing"
)

// This package is the longest of the suite, the last one `go test ./...`
// still runs alone, and most of its time goes to waiting: on builds (pip,
// npm, docker, debootstrap), on Swarm rolling a service out, on health
// checks and leases. Its long tests therefore run beside each other, in
// two classes with a bound each, after the package's serial tests (Go
// runs a test that calls t.Parallel once the serial ones are done):
//
//   - longParallel: real project builds, the images, the soak: they keep
//     the CPU and the network busy, at most buildSlots at a time;
//   - waitParallel: tests whose time goes to waiting on a runtime (Swarm
//     rollouts and rollbacks, scaled deployments, the autoscaler's
//     windows), at most waitSlots at a time, beside the builds.
//
// A test that calls either must own everything it touches: its own server,
// data directory and ports (servertest.Start), docker and swarm objects
// labelled by its install's instance id (cleaned up by RequireRuntime and
// requireSwarm), its own registry, database and Redis user, processes it
// finds by its own marker or data directory, no t.Setenv.
//
// A test whose assertions depend on the machine being otherwise quiet
// stays serial: one that times a kill against a build step
// (TestDockerKilledDuringBuildAndDeploy) or a lease (TestAgentReplicas);
// TestSwarmAutoscale, whose added workers must start before the two
// first ones drain the load (beside the others, they came up after it);
// TestSwarmScaledDeployment, whose agents share 8 database connections
// (beside the others, the JS SDK suite through them met a 500).
const (
	buildSlots = 2
	waitSlots  = 3
)

var (
	buildSem = make(chan struct{}, buildSlots)
	waitSem  = make(chan struct{}, waitSlots)
)

// longParallel runs a long, busy test (see above) beside the others, at
// most buildSlots such at a time.
func longParallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	acquire(t, buildSem)
}

// waitParallel runs a long test that mostly waits on a runtime (see
// above) beside the others, at most waitSlots such at a time.
func waitParallel(t *testing.T) {
	t.Helper()
	t.Parallel()
	acquire(t, waitSem)
}

// acquire takes a slot of sem until the test's end: its cleanup (the
// first one registered, so the last to run) gives it back after the
// test's own cleanups, which remove its servers and docker objects.
func acquire(t *testing.T, sem chan struct{}) {
	sem <- struct{}{}
	t.Cleanup(func() { <-sem })
}

// raiseParallel lifts go test's own bound on parallel tests (-parallel,
// GOMAXPROCS by default: 2 on the CI machine) above the number of this
// package's parallel tests, so that every one of them starts and waits for
// a slot of its class: under go test's bound, builds waiting for a build
// slot would hold its places and keep a waiting test from starting beside
// two builds. The slots above stay the real bound. An explicit -parallel
// is kept. TestMain calls it after parsing the flags.
func raiseParallel() {
	set := false
	flag.Visit(func(f *flag.Flag) {
		if f.Name == "test.parallel" {
			set = true
		}
	})
	if f := flag.Lookup("test.parallel"); f != nil && !set {
		_ = f.Value.Set(strconv.Itoa(allParallel))
	}
}

// allParallel is more than the package has tests that call longParallel
// or waitParallel.
const allParallel = 64
