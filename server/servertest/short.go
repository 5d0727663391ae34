package servertest

import "testing"

// SkipShort skips a test under `go test -short`: the fast loop of the
// README leaves out the tests that run the slipway binary (Binary calls
// this), build real projects, start reference servers or soak, which take
// from seconds to minutes each. CI runs without -short.
func SkipShort(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("-short: %s is left out of the fast loop", what)
	}
}
