package server

import (
	"context"
	"fmt"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"slipway/runtime"
)

// labelReplica names the agent process a scaled deployment's series come
// from: its API replicas and queue workers each count their own requests
// and runs, and without it their series would collide.
const labelReplica = "replica"

// scrapeReplicas reads every agent of a scaled deployment
// (runtime.ReplicaLister) and merges their families, each series labelled
// with its replica; a deployment that is not scaled is read as one agent
// (scrape). One replica that cannot be read fails the deployment's
// scrape (slipway_agent_scrape_up 0), as one unscaled agent would.
func (g *agentGatherer) scrapeReplicas(ctx context.Context, dep string) (map[string]*dto.MetricFamily, error) {
	lister, ok := g.driver.(runtime.ReplicaLister)
	if !ok {
		return g.scrape(ctx, dep)
	}
	replicas := lister.ReplicaEndpoints(dep)
	if len(replicas) == 0 {
		return g.scrape(ctx, dep)
	}
	merged := map[string]*dto.MetricFamily{}
	for _, r := range replicas {
		fams, err := g.scrapeEndpoint(ctx, r.URL)
		if err != nil {
			return nil, fmt.Errorf("replica %s: %w", r.Name, err)
		}
		for name, f := range fams {
			m, ok := merged[name]
			if !ok {
				m = &dto.MetricFamily{Name: f.Name, Help: f.Help, Type: f.Type, Unit: f.Unit}
				merged[name] = m
			}
			if m.GetType() != f.GetType() {
				continue // the replicas disagree on the type: not relayed
			}
			for _, metric := range f.Metric {
				metric.Label = append(withoutLabel(metric.Label, labelReplica),
					&dto.LabelPair{Name: proto.String(labelReplica), Value: proto.String(r.Name)})
				m.Metric = append(m.Metric, metric)
			}
		}
	}
	return merged, nil
}

// withoutLabel drops the label name an agent set itself.
func withoutLabel(ls []*dto.LabelPair, name string) []*dto.LabelPair {
	out := ls[:0]
	for _, l := range ls {
		if l.GetName() != name {
			out = append(out, l)
		}
	}
	return out
}
