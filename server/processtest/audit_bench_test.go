package processtest_test

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/audit"
	"slipway/server/servertest"
	"slipway/storage"
)

// BenchmarkAuditQuery1M loads 1,000,000 audit events across 10
// organizations (100,000 each over ~30 days, so an hour holds ~140 events
// per organization) into a real data directory, starts `slipway serve` on
// it, and measures one-hour-window queries of 100 events over HTTP, with
// and without an operations filter. Reproduce with:
//
//	go test -run '^$' -bench AuditQuery1M -benchtime 2000x -timeout 30m ./server/processtest/
func BenchmarkAuditQuery1M(b *testing.B) {
	dir := b.TempDir()
	master := make([]byte, 32)
	for i := range master {
		master[i] = byte(i)
	}
	if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte(hex.EncodeToString(master)), 0o600); err != nil {
		b.Fatal(err)
	}
	env := map[string]string{"SLIPWAY_DATA_DIR": dir, "DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true", "SLIPWAY_LOG_LEVEL": "warn"}
	s := servertest.StartUnmanaged(b, env) // bootstrap the Default organization and its key
	key := s.Key
	mustOK(b, s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "bench"}))
	start, end := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	r := s.Do("GET", "/api/v1/audit-logs?start_time="+url.QueryEscape(start.Format(time.RFC3339))+"&end_time="+url.QueryEscape(end.Format(time.RFC3339)), nil)
	mustOK(b, r)
	orgID := r.Map()["items"].([]any)[0].(map[string]any)["unmapped"].(map[string]any)["original_audit_log"].(map[string]any)["organization_id"].(string)
	s.Stop()

	sealer, _ := storage.NewSealer(master)
	// Event time never goes backwards within an organization, so the load
	// starts after the bootstrap's real events (and lies in the future).
	base := time.Now().Add(time.Hour).Truncate(time.Hour)
	loadStart := time.Now()
	generate(b, filepath.Join(dir, "slipway.db"), sealer.Key("slipway audit chain v1"), uuid.MustParse(orgID), base)
	b.Logf("generated 1,000,000 events in %v", time.Since(loadStart))

	s = servertest.StartUnmanaged(b, env)
	defer func() { s.Stop(); os.RemoveAll(dir) }()
	s.Key = key
	winStart := base.Add(15 * 24 * time.Hour)
	q := "/api/v1/audit-logs?limit=100&start_time=" + url.QueryEscape(winStart.Format(time.RFC3339)) +
		"&end_time=" + url.QueryEscape(winStart.Add(time.Hour).Format(time.RFC3339))
	for _, tc := range []struct{ name, query string }{
		{"no-filter", q},
		{"operations-filter", q + "&operations=create_deployment&operations=update_deployment"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := s.Do("GET", tc.query, nil)
			mustOK(b, r)
			if n := len(r.Map()["items"].([]any)); n < 50 {
				b.Fatalf("window holds only %d events", n)
			}
			c := &http.Client{}
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				req, _ := http.NewRequest("GET", s.URL+tc.query, nil)
				req.Header.Set("X-Api-Key", key)
				t0 := time.Now()
				resp, err := c.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				lat = append(lat, time.Since(t0))
			}
			sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}

func mustOK(b *testing.B, r *servertest.Response) {
	b.Helper()
	if r.Status/100 != 2 {
		b.Fatalf("status %d: %s", r.Status, r.Body)
	}
}

// generate appends 100,000 events to each of 10 organizations (the
// Default one and 9 others), spread evenly over 30 days, through the same
// Append code the server uses, 1,000 per organization per transaction.
func generate(b *testing.B, path string, chainKey []byte, defaultOrg uuid.UUID, base time.Time) {
	generateRange(b, path, chainKey, defaultOrg, base, 0, 100000)
}

// generateRange appends the events from..to of each organization's
// 100,000 (so that a load can grow in steps, its time never going back).
func generateRange(b *testing.B, path string, chainKey []byte, defaultOrg uuid.UUID, base time.Time, from, to int) {
	db, err := storage.Open(path, time.Second, storage.ControlPlaneMigrations)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.NoSync = true // bulk load only; the server reopens it with sync on
	orgs := []uuid.UUID{defaultOrg}
	for len(orgs) < 10 {
		orgs = append(orgs, uuid.NewSHA1(defaultOrg, []byte{byte(len(orgs))}))
	}
	ops := []string{"create_deployment", "update_deployment", "delete_deployment", "create_api_key", "update_workspace"}
	const perOrg = 100000
	step := 30 * 24 * time.Hour / perOrg
	var now time.Time
	l := &audit.Log{Key: chainKey, Version: "bench", Now: func() time.Time { return now }}
	for i := from; i < to; i += 1000 {
		err := db.Update(func(tx *bolt.Tx) error {
			for j := i; j < min(i+1000, to); j++ {
				now = base.Add(time.Duration(j) * step)
				for k, org := range orgs {
					e := audit.Entry{Op: ops[(j+k)%len(ops)], OK: j%17 != 0,
						Actor:     audit.Actor{OrgID: org.String(), UserID: uuid.NewString(), WorkspaceID: uuid.NewString()},
						Request:   audit.Request{ID: fmt.Sprint(j), Method: "POST", Path: "/v2/deployments", ClientIP: "10.0.0.1", Status: 201},
						Resources: []audit.Resource{{UID: uuid.NewString(), Type: "deployment"}}}
					if err := l.Append(tx, e); err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Sync(); err != nil {
		b.Fatal(err)
	}
}
