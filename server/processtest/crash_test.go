package processtest_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"slipway/server/servertest"
)

// TestAcknowledgedWritesSurviveKill9 kills the server with SIGKILL while
// clients are creating and patching deployments; after a restart every
// acknowledged write must be there and the database must open cleanly.
func TestAcknowledgedWritesSurviveKill9(t *testing.T) {
	s := servertest.Start(t, nil)
	var (
		mu      sync.Mutex
		created = map[string]string{} // id → name
		patched = map[string]string{} // id → image acknowledged last
		wg      sync.WaitGroup
		stop    = make(chan struct{})
	)
	client := &http.Client{Timeout: 5 * time.Second}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("crash-%d-%d", w, i)
				body := fmt.Sprintf(`{"name":%q,"source":"internal_docker","source_config":{},"source_revision_config":{"image_uri":"img:0"},"secrets":[{"name":"TOKEN","value":"v%d"}]}`, name, i)
				req, _ := http.NewRequest("POST", s.URL+"/v2/deployments", strings.NewReader(body))
				req.Header.Set("X-Api-Key", s.Key)
				resp, err := client.Do(req)
				if err != nil {
					return // the server died
				}
				m := decode(resp)
				if resp.StatusCode != 201 {
					continue
				}
				id := m["id"].(string)
				mu.Lock()
				created[id] = name
				mu.Unlock()
				img := fmt.Sprintf("img:%d", i+1)
				req, _ = http.NewRequest("PATCH", s.URL+"/v2/deployments/"+id, strings.NewReader(`{"source_revision_config":{"image_uri":"`+img+`"}}`))
				req.Header.Set("X-Api-Key", s.Key)
				resp, err = client.Do(req)
				if err != nil {
					return
				}
				decode(resp)
				if resp.StatusCode == 200 {
					mu.Lock()
					patched[id] = img
					mu.Unlock()
				}
			}
		}(w)
	}
	time.Sleep(1500 * time.Millisecond)
	s.Kill()
	close(stop)
	wg.Wait()
	if len(created) < 20 {
		t.Fatalf("only %d writes before the kill; the test proves nothing", len(created))
	}

	s.Restart()
	for id, name := range created {
		r := s.Do("GET", "/v2/deployments/"+id, nil)
		if r.Status != 200 {
			t.Fatalf("acknowledged deployment %s (%s) lost: %d %s", id, name, r.Status, r.Body)
		}
		m := r.Map()
		if m["name"] != name {
			t.Fatalf("deployment %s name %v, want %s", id, m["name"], name)
		}
		if img, ok := patched[id]; ok && m["source_revision_config"].(map[string]any)["image_uri"] != img {
			t.Fatalf("acknowledged PATCH of %s lost", id)
		}
		revs := s.Do("GET", "/v2/deployments/"+id+"/revisions", nil).Map()["resources"].([]any)
		if len(revs) == 0 || revs[0].(map[string]any)["id"] != m["latest_revision_id"] {
			t.Fatalf("deployment %s: latest revision not indexed", id)
		}
	}
	// Names stay unique: the index survived with the records.
	for _, name := range created {
		r := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "internal_docker", "source_config": map[string]any{},
			"source_revision_config": map[string]any{"image_uri": "x"}, "secrets": []any{}})
		if r.Status != 409 {
			t.Fatalf("name %s reusable after crash: %d", name, r.Status)
		}
		break
	}
	t.Logf("%d deployments and %d patches acknowledged before SIGKILL, all present after restart", len(created), len(patched))
}

func decode(resp *http.Response) map[string]any {
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return m
}
