package servertest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Browser returns what a headless-Chromium test needs: Chromium
// (SLIPWAY_TEST_CHROMIUM, else /usr/bin/chromium), node, and
// server/dashboard/e2e, whose node_modules has playwright-core; and each
// of extra, a {directory, package} pair whose node_modules must hold that
// package. Anything missing fails the test under CI=true and skips it
// elsewhere, saying what is missing and who needs it (forWhom, e.g. "the
// dashboard's browser tests").
func Browser(t *testing.T, forWhom string, extra ...[2]string) (chromium, node, e2e string) {
	t.Helper()
	missing := func(what string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s need %s (.ci/run installs it)", forWhom, what)
		}
		t.Skipf("skipping: %s need %s (apt-get install chromium nodejs npm; npm ci where .ci/run does); under CI=true this fails instead", forWhom, what)
	}
	chromium = os.Getenv("SLIPWAY_TEST_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		missing("Chromium at " + chromium)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing("node")
	}
	e2e = filepath.Join(RepoRoot(), "server", "dashboard", "e2e")
	need := append([][2]string{{e2e, "playwright-core"}}, extra...)
	for _, n := range need {
		if _, err := os.Stat(filepath.Join(n[0], "node_modules", filepath.FromSlash(n[1]))); err != nil {
			rel, _ := filepath.Rel(RepoRoot(), n[0])
			missing(n[1] + " in " + filepath.ToSlash(rel) + "/node_modules")
		}
	}
	return chromium, node, e2e
}
