package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	"slipway/runtime"
)

// agentGatherer relays each serving agent's own /metrics into the control
// plane's, every series labelled with its deployment_id: a single-host
// install scrapes one target. Agents answer only Slipway (they require
// their token), so a scrape reaches them through the runtime's endpoint,
// never through the public proxy.
type agentGatherer struct {
	deployments func() []string
	// driver is the runtime's: its endpoints, and its usage when it is a
	// runtime.UsageReporter.
	driver interface {
		Endpoint(dep string) (string, bool)
	}
	client *http.Client
	// timeout bounds the relay of one scrape; an agent that does not
	// answer in time is reported down (slipway_agent_scrape_up 0).
	timeout time.Duration
}

// maxAgentMetrics bounds what one agent's exposition may take.
const maxAgentMetrics = 4 << 20

const labelDeployment = "deployment_id"

// The families the relay makes itself at each scrape, each labelled with
// deployment_id only (README lists them; the documentation test reads
// this list).
const (
	metricScrapeUp = "slipway_agent_scrape_up"
	metricCPU      = "slipway_deployment_cpu_seconds_total"
	metricMemory   = "slipway_deployment_memory_bytes"
)

var relayFamilies = []string{metricScrapeUp, metricCPU, metricMemory}

// Gather scrapes the agents in parallel and merges their families.
func (g *agentGatherer) Gather() ([]*dto.MetricFamily, error) {
	deps := g.deployments()
	sort.Strings(deps)
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
	defer cancel()
	results := make([]map[string]*dto.MetricFamily, len(deps))
	usage := make([]runtime.Usage, len(deps))
	usageOK := make([]bool, len(deps))
	reporter, _ := g.driver.(runtime.UsageReporter)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, dep := range deps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			fams, err := g.scrapeReplicas(ctx, dep)
			if err == nil {
				results[i] = fams
			}
			if reporter != nil {
				usage[i], usageOK[i] = reporter.Usage(ctx, dep)
			}
		}()
	}
	wg.Wait()
	up := &dto.MetricFamily{Name: proto.String(metricScrapeUp), Type: dto.MetricType_GAUGE.Enum(),
		Help: proto.String("Whether the control plane could read the deployment's agent metrics at this scrape (1) or not (0).")}
	cpu := &dto.MetricFamily{Name: proto.String(metricCPU), Type: dto.MetricType_COUNTER.Enum(),
		Help: proto.String("CPU time the deployment's agent and everything it started used (process runtime: its cgroup; docker: its container).")}
	mem := &dto.MetricFamily{Name: proto.String(metricMemory), Type: dto.MetricType_GAUGE.Enum(),
		Help: proto.String("Memory the deployment's agent and everything it started use now, without inactive page cache.")}
	merged := map[string]*dto.MetricFamily{}
	for i, dep := range deps {
		if usageOK[i] && usage[i].CPUSeconds >= 0 {
			cpu.Metric = append(cpu.Metric, &dto.Metric{Label: []*dto.LabelPair{depLabel(dep)}, Counter: &dto.Counter{Value: proto.Float64(usage[i].CPUSeconds)}})
		}
		if usageOK[i] && usage[i].MemoryBytes >= 0 {
			mem.Metric = append(mem.Metric, &dto.Metric{Label: []*dto.LabelPair{depLabel(dep)}, Gauge: &dto.Gauge{Value: proto.Float64(float64(usage[i].MemoryBytes))}})
		}
		v := 0.0
		if results[i] != nil {
			v = 1
		}
		up.Metric = append(up.Metric, &dto.Metric{Label: []*dto.LabelPair{depLabel(dep)}, Gauge: &dto.Gauge{Value: proto.Float64(v)}})
		for name, f := range results[i] {
			m, ok := merged[name]
			if !ok {
				m = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
				merged[name] = m
			}
			if m.GetType() != f.GetType() {
				continue // another agent disagrees on the type: not relayed
			}
			for _, metric := range f.Metric {
				metric.Label = append(withoutDeploymentLabel(metric.Label), depLabel(dep))
				m.Metric = append(m.Metric, metric)
			}
		}
	}
	out := make([]*dto.MetricFamily, 0, len(merged)+1)
	for _, f := range []*dto.MetricFamily{up, cpu, mem} {
		if len(f.Metric) > 0 {
			out = append(out, f)
		}
	}
	for _, f := range merged {
		out = append(out, f)
	}
	return out, nil
}

func depLabel(dep string) *dto.LabelPair {
	return &dto.LabelPair{Name: proto.String(labelDeployment), Value: proto.String(dep)}
}

// withoutDeploymentLabel drops a deployment_id an agent set itself: the
// label is the control plane's to give.
func withoutDeploymentLabel(ls []*dto.LabelPair) []*dto.LabelPair {
	out := ls[:0]
	for _, l := range ls {
		if l.GetName() != labelDeployment {
			out = append(out, l)
		}
	}
	return out
}

// scrape reads the deployment's agent's exposition.
func (g *agentGatherer) scrape(ctx context.Context, dep string) (map[string]*dto.MetricFamily, error) {
	endpoint, ok := g.driver.Endpoint(dep)
	if !ok {
		return nil, fmt.Errorf("deployment %s has no endpoint", dep)
	}
	return g.scrapeEndpoint(ctx, endpoint)
}

// scrapeEndpoint reads one agent's exposition.
func (g *agentGatherer) scrapeEndpoint(ctx context.Context, endpoint string) (map[string]*dto.MetricFamily, error) {
	base, token, err := agentURL(endpoint)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.JoinPath("/metrics").String(), nil)
	if err != nil {
		return nil, fmt.Errorf("agent metrics request: %w", err)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if token != "" {
		req.Header.Set(runtime.AgentTokenHeader, token)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("agent metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("agent metrics: status %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(io.LimitReader(resp.Body, maxAgentMetrics))
	if err != nil {
		return nil, fmt.Errorf("agent metrics: %w", err)
	}
	return fams, nil
}
