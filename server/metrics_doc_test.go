package server

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"slipway/runtime/agent"
	"slipway/runtime/swarm"
	"slipway/server/servertest"
)

// describedMetrics are the metric names a registry registers, each with
// its labels (sorted), read from the descriptors.
func describedMetrics(t *testing.T, reg prometheus.Collector, extra ...string) map[string][]string {
	t.Helper()
	descRE := regexp.MustCompile(`^Desc\{fqName: "([^"]+)".*variableLabels: \{([^}]*)\}\}$`)
	ch := make(chan *prometheus.Desc, 256)
	go func() { reg.Describe(ch); close(ch) }()
	out := map[string][]string{}
	for d := range ch {
		m := descRE.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("unreadable descriptor %s", d)
		}
		labels := append([]string{}, extra...)
		if m[2] != "" {
			labels = append(labels, strings.Split(m[2], ",")...)
		}
		sort.Strings(labels)
		out[m[1]] = labels
	}
	return out
}

// documentedMetrics reads the metric tables of README's "Metrics" section:
// name → labels (sorted).
func documentedMetrics(t *testing.T, readme string) map[string][]string {
	t.Helper()
	start := strings.Index(readme, "\n## Metrics\n")
	if start < 0 {
		t.Fatal("README has no Metrics section")
	}
	section := readme[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	rowRE := regexp.MustCompile("^\\| `([a-z_]+)` \\| (counter|gauge|histogram) \\| ([^|]*) \\|")
	out := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		m := rowRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var labels []string
		for _, l := range strings.Split(m[3], ",") {
			if l = strings.Trim(strings.TrimSpace(l), "`"); l != "" && l != "—" {
				labels = append(labels, l)
			}
		}
		sort.Strings(labels)
		if _, dup := out[m[1]]; dup {
			t.Errorf("README documents %s twice", m[1])
		}
		out[m[1]] = labels
	}
	return out
}

// TestMetricsDocumented: README's metric tables list exactly the metrics
// `slipway serve` exposes, with their labels: the control plane's
// registry, the relay's own gauge, every agent metric, which the relay
// labels with deployment_id, and the swarm runtime's autoscaler's.
func TestMetricsDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(servertest.RepoRoot(), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	exposed := describedMetrics(t, newMetrics("unused-token-0123456789").reg)
	for name, labels := range describedMetrics(t, agent.NewMetrics().Registry, labelDeployment) {
		exposed[name] = labels
	}
	// The swarm runtime's autoscaler registers its own (wireAutoscale).
	for name, labels := range describedMetrics(t, &swarm.Driver{}) {
		exposed[name] = labels
	}
	for _, name := range relayFamilies { // made by the relay at each scrape
		exposed[name] = []string{labelDeployment}
	}
	for _, p := range checkDocumented(exposed, documentedMetrics(t, string(raw))) {
		t.Error(p)
	}
}

// checkDocumented lists the differences between the exposed metrics and
// the documented ones.
func checkDocumented(exposed, documented map[string][]string) []string {
	var problems []string
	for name, labels := range exposed {
		doc, ok := documented[name]
		switch {
		case !ok:
			problems = append(problems, name+" is exposed but not documented in README's Metrics section")
		case !slices.Equal(doc, labels):
			problems = append(problems, fmt.Sprintf("%s: README lists labels %v, exposed with %v", name, doc, labels))
		}
	}
	for name := range documented {
		if _, ok := exposed[name]; !ok {
			problems = append(problems, name+" is documented in README but not exposed")
		}
	}
	sort.Strings(problems)
	return problems
}

// TestMetricsDocumentedCheckFails: the comparison above reports a metric
// missing from the tables, one documented but gone, and a label that
// differs.
func TestMetricsDocumentedCheckFails(t *testing.T) {
	exposed := map[string][]string{"a_total": {"x"}, "b_total": nil, "c_total": {"y"}}
	documented := map[string][]string{"a_total": {"x"}, "c_total": {"z"}, "d_total": nil}
	want := []string{
		"b_total is exposed but not documented in README's Metrics section",
		"c_total: README lists labels [z], exposed with [y]",
		"d_total is documented in README but not exposed",
	}
	if got := checkDocumented(exposed, documented); !slices.Equal(got, want) {
		t.Fatalf("reported %q, want %q", got, want)
	}
}
