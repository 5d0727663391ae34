package orgapi_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"slipway/server/apptest"
)

// TestRevokedKeysTakeTheirServiceUsers revokes service keys every way a
// client can — a workspace key, an organization key, and a key whose
// workspace is deleted — and then counts the service identities stored:
// each must have gone with its key, in the same transaction, so that the
// organization's users do not grow with every key ever revoked.
func TestRevokedKeysTakeTheirServiceUsers(t *testing.T) {
	s := apptest.New(t, nil)
	for i := 0; i < 5; i++ {
		id := s.Do("POST", "/api/v1/api-key", map[string]any{}).Map()["id"].(string)
		mustStatus(t, s.Do("DELETE", "/api/v1/api-key/"+id, nil), 200)
		id = s.Do("POST", "/api/v1/orgs/current/service-keys", map[string]any{}).Map()["id"].(string)
		mustStatus(t, s.Do("DELETE", "/api/v1/orgs/current/service-keys/"+id, nil), 200)
	}
	ws := s.Do("POST", "/api/v1/workspaces", map[string]any{"display_name": "Doomed"}).Map()["id"].(string)
	r := s.Do("POST", "/api/v1/api-key", map[string]any{}, "X-Tenant-ID", ws)
	mustStatus(t, r, 200)
	mustStatus(t, s.Do("DELETE", "/api/v1/workspaces/"+ws, nil), 200)
	// One key that stays: its identity must stay too.
	kept := s.Do("POST", "/api/v1/api-key", map[string]any{}).Map()["id"].(string)
	s.Stop()

	db, err := bolt.Open(filepath.Join(s.DataDir, "slipway.db"), 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	keyUsers := map[string]bool{}
	service := map[string]bool{}
	var keptUser string
	_ = db.View(func(tx *bolt.Tx) error {
		_ = tx.Bucket([]byte("api_keys")).ForEach(func(_, v []byte) error {
			var k struct {
				ID     string `json:"id"`
				UserID string `json:"user_id"`
			}
			_ = json.Unmarshal(v, &k)
			keyUsers[k.UserID] = true
			if k.ID == kept {
				keptUser = k.UserID
			}
			return nil
		})
		return tx.Bucket([]byte("users")).ForEach(func(_, v []byte) error {
			var u struct {
				ID      string `json:"id"`
				Service bool   `json:"service"`
			}
			_ = json.Unmarshal(v, &u)
			if u.Service {
				service[u.ID] = true
			}
			return nil
		})
	})
	for id := range service {
		if !keyUsers[id] {
			t.Errorf("service user %s outlived its key", id)
		}
	}
	if keptUser == "" || !service[keptUser] {
		t.Errorf("the service user of the key that was kept is gone (%d service users stored)", len(service))
	}
}
