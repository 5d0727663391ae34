package orgapi_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// TestAuditCursorPagingOverHTTPWithConcurrentInserts pages through 1,000
// stored events over HTTP, 100 at a time with the opaque cursor, while
// other clients keep making tracked changes: every stored event is seen
// exactly once, nothing repeats, and items stay in time order.
func TestAuditCursorPagingOverHTTPWithConcurrentInserts(t *testing.T) {
	dir := t.TempDir()
	master := bytes.Repeat([]byte{9}, 32)
	if err := os.WriteFile(filepath.Join(dir, "master.key"), []byte(hex.EncodeToString(master)), 0o600); err != nil {
		t.Fatal(err)
	}
	s := apptest.New(t, map[string]string{"SLIPWAY_DATA_DIR": dir, "DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
	members := s.Do("GET", "/api/v1/orgs/current/members", nil)
	mustStatus(t, members, 200)
	org := uuid.MustParse(members.Map()["organization_id"].(string))
	s.Stop()
	// 1,000 events over the last second, several per millisecond at times,
	// so the tie-break on equal times is exercised too.
	ages := make([]time.Duration, 1000)
	for i := range ages {
		ages[i] = time.Duration(1000-i) * time.Millisecond
	}
	seedOldEvents(t, dir, master, org, ages...)
	s.Restart()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var inserted atomic.Int64
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := servertest.Do(t, "POST", s.URL+"/api/v1/workspaces", map[string]any{"display_name": fmt.Sprintf("w%d-%d", g, i)}, "X-Api-Key", s.Key)
				if r.Status == 200 {
					inserted.Add(1)
				}
			}
		}(g)
	}
	base := "/api/v1/audit-logs?limit=100&start_time=2000-01-01T00:00:00Z&end_time=" +
		url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	seen := map[string]bool{}
	seeded := 0
	var last float64
	cursor := ""
	for pages := 0; ; pages++ {
		q := base
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := s.Do("GET", q, nil)
		mustStatus(t, r, 200)
		page := r.Map()
		for _, it := range page["items"].([]any) {
			e := it.(map[string]any)
			uid := e["metadata"].(map[string]any)["uid"].(string)
			if seen[uid] {
				t.Fatalf("event %s returned twice (page %d)", uid, pages)
			}
			seen[uid] = true
			if tm := e["time"].(float64); tm < last {
				t.Fatalf("event %s at %v after one at %v", uid, tm, last)
			} else {
				last = tm
			}
			if e["api"].(map[string]any)["operation"] == "create_deployment" {
				seeded++
			}
		}
		c, _ := page["cursor"].(string)
		// Stop once past the seeded events and a few pages of new ones:
		// the writers could outpace the pager for ever.
		if c == "" || seeded == 1000 && len(seen) > 1300 {
			break
		}
		cursor = c
	}
	close(stop)
	wg.Wait()
	if seeded != 1000 {
		t.Fatalf("paged %d of the 1,000 stored events", seeded)
	}
	if inserted.Load() == 0 {
		t.Fatal("no concurrent insert happened while paging")
	}
	t.Logf("%d events paged, %d inserted concurrently", len(seen), inserted.Load())
}
