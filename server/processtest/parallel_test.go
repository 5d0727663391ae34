package processtest_test

import "testing"

// longParallel lets a long end-to-end test (a soak with a fixed window,
// real project builds: pip, npm, docker, debootstrap) run beside the
// package's other long tests instead of after them: most of its time goes
// to waiting on processes, containers and the network, and this package is
// the longest of the suite, the last one `go test ./...` still runs alone.
// Go runs such tests after the serial ones, at most -parallel (GOMAXPROCS
// by default) at a time. A test that calls it must own everything it
// touches: its own server, data directory and ports (servertest.Start),
// docker objects labelled by its install's instance id (cleaned up by
// RequireRuntime), processes it finds by its own marker or data
// directory, no t.Setenv.
func longParallel(t *testing.T) {
	t.Helper()
	t.Parallel()
}
