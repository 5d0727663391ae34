package processtest_test

import (
	"flag"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestParallelSlots checks the harness of parallel_test.go: go test's own
// bound is raised (unless -parallel was given), and parallel tests run
// beside each other up to the slots of their classes, never more: builds
// at most buildSlots at once, waiting tests at most waitSlots, both
// classes at once. Its subtests run while the package's real parallel
// tests are still paused (this test is serial), so they have the slots to
// themselves.
func TestParallelSlots(t *testing.T) {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	p, err := strconv.Atoi(flag.Lookup("test.parallel").Value.String())
	if err != nil {
		t.Fatal(err)
	}
	if !explicit && p < buildSlots+waitSlots {
		t.Fatalf("-parallel is %d, want at least %d (the two classes' slots): TestMain did not raise it", p, buildSlots+waitSlots)
	}
	want := min(p, buildSlots+waitSlots)

	var mu sync.Mutex
	running := map[string]int{}
	most := map[string]int{}
	reached := make(chan struct{})
	var reachedOnce sync.Once
	enter := func(class string) {
		mu.Lock()
		defer mu.Unlock()
		running[class]++
		most[class] = max(most[class], running[class])
		total := running["build"] + running["wait"]
		most["total"] = max(most["total"], total)
		if total == want {
			reachedOnce.Do(func() { close(reached) })
		}
	}
	leave := func(class string) {
		mu.Lock()
		defer mu.Unlock()
		running[class]--
	}
	// Each subtest holds its slot until as many as the slots allow run
	// at once, and a moment more: a test let in beyond its class's slots
	// would be counted meanwhile (then the rest run as slots free up).
	hold := func(t *testing.T) {
		select {
		case <-reached:
			time.Sleep(200 * time.Millisecond)
		case <-time.After(60 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Errorf("60 s without %d tests at once: %v running", want, running)
		}
	}
	t.Run("classes", func(t *testing.T) {
		for i := range buildSlots + 2 {
			t.Run("build-"+strconv.Itoa(i), func(t *testing.T) {
				longParallel(t)
				enter("build")
				defer leave("build")
				hold(t)
			})
		}
		for i := range waitSlots + 2 {
			t.Run("wait-"+strconv.Itoa(i), func(t *testing.T) {
				waitParallel(t)
				enter("wait")
				defer leave("wait")
				hold(t)
			})
		}
	})
	if most["build"] > buildSlots || most["wait"] > waitSlots {
		t.Errorf("at most %d builds and %d waiting tests ran at once, want at most %d and %d", most["build"], most["wait"], buildSlots, waitSlots)
	}
	if most["total"] != want {
		t.Errorf("at most %d tests ran at once, want %d", most["total"], want)
	}
}
