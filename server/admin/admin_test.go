package admin_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/admin"
	"slipway/server/apptest"
	"slipway/server/servertest"
	"slipway/storage"
)

// runAdmin runs `slipway admin args...` against the server using dataDir:
// the command's own entry point, in this process (main only loads
// SLIPWAY_DATA_DIR before calling it).
func runAdmin(t *testing.T, dataDir string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = admin.Main(args, dataDir, &out, &errb)
	return out.String(), errb.String(), code
}

// mustAdmin runs an admin command that must succeed and returns its stdout.
func mustAdmin(t *testing.T, dataDir string, args ...string) string {
	t.Helper()
	out, errOut, code := runAdmin(t, dataDir, args...)
	if code != 0 {
		t.Fatalf("slipway admin %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

func auditLogs(s *servertest.Server, key, org string) *servertest.Response {
	return s.Do("GET", "/api/v1/audit-logs?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z&limit=100", nil,
		"X-Api-Key", key, "X-Organization-Id", org)
}

func createDeployment(t *testing.T, s *servertest.Server, key, name string) {
	t.Helper()
	r := s.Do("POST", "/v2/deployments", map[string]any{"name": name, "source": "internal_docker",
		"source_config": map[string]any{}, "source_revision_config": map[string]any{}, "secrets": []any{}}, "X-Api-Key", key)
	if r.Status != http.StatusCreated && r.Status != http.StatusOK && r.Status != http.StatusAccepted {
		t.Fatalf("create deployment %s: %d %s", name, r.Status, r.Body)
	}
}

type orgView struct {
	ID                 string         `json:"id"`
	DisplayName        string         `json:"display_name"`
	Plan               string         `json:"plan"`
	IsPersonal         bool           `json:"is_personal"`
	Config             map[string]any `json:"config"`
	DefaultWorkspaceID string         `json:"default_workspace_id"`
	AuditLogsEnabled   bool           `json:"audit_logs_enabled"`
}

func listOrgs(t *testing.T, dataDir string) map[string]orgView {
	t.Helper()
	var orgs []orgView
	if err := json.Unmarshal([]byte(mustAdmin(t, dataDir, "org", "list", "--json")), &orgs); err != nil {
		t.Fatal(err)
	}
	out := map[string]orgView{}
	for _, o := range orgs {
		out[o.ID] = o
	}
	return out
}

func TestAdminOrganizations(t *testing.T) {
	s := apptest.New(t, nil)
	sock := filepath.Join(s.DataDir, "admin", "admin.sock")
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin socket: %v %v", fi.Mode(), err)
	}
	for _, f := range []struct {
		path string
		perm os.FileMode
	}{{filepath.Join(s.DataDir, "admin"), 0o700}, {filepath.Join(s.DataDir, "admin", "token"), 0o600}} {
		if fi, err := os.Stat(f.path); err != nil || fi.Mode().Perm() != f.perm {
			t.Fatalf("%s: %v %v, want %v", f.path, fi, err, f.perm)
		}
	}

	id := strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create", "--name", "Acme"))
	if _, err := uuid.Parse(id); err != nil {
		t.Fatalf("org create printed %q", id)
	}
	o := listOrgs(t, s.DataDir)[id]
	if o.DisplayName != "Acme" || o.Plan != "free" || o.IsPersonal || o.DefaultWorkspaceID == "" {
		t.Fatalf("created org %+v", o)
	}

	out, errOut, code := runAdmin(t, s.DataDir, "org", "create-admin-key", id)
	key := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(key, "slw_sk_") || strings.Contains(errOut, key) {
		t.Fatalf("create-admin-key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if strings.Contains(s.Logs(), key) {
		t.Fatal("the admin key appears in the server log")
	}
	// The key works in its organization's Default workspace.
	if r := s.Do("GET", "/v2/deployments", nil, "X-Api-Key", key); r.Status != 200 {
		t.Fatalf("GET /v2/deployments with the new key: %d %s", r.Status, r.Body)
	}

	expect := func(status int, detail string) {
		t.Helper()
		r := auditLogs(s, key, id)
		if r.Status != status || !strings.Contains(string(r.Body), detail) {
			t.Fatalf("audit-logs: %d %s, want %d mentioning %q", r.Status, r.Body, status, detail)
		}
	}
	expect(403, "Enterprise")
	mustAdmin(t, s.DataDir, "org", "set-plan", id, "enterprise")
	expect(403, "not enabled")
	mustAdmin(t, s.DataDir, "org", "set-flag", id, "can_use_audit_logs", "true")
	expect(200, `"items"`)
	if o := listOrgs(t, s.DataDir)[id]; o.Config["can_use_audit_logs"] != true || !o.AuditLogsEnabled || o.Plan != "enterprise" {
		t.Fatalf("after set-flag: %+v", o)
	}
	mustAdmin(t, s.DataDir, "org", "set-flag", id, "can_use_audit_logs", "false")
	expect(403, "not enabled")
	mustAdmin(t, s.DataDir, "org", "set-flag", id, "can_use_audit_logs", "true")
	mustAdmin(t, s.DataDir, "org", "unset-flag", id, "can_use_audit_logs")
	expect(403, "not enabled")
	if o := listOrgs(t, s.DataDir)[id]; len(o.Config) != 0 {
		t.Fatalf("after unset-flag: %+v", o)
	}
	mustAdmin(t, s.DataDir, "org", "set-flag", id, "can_use_audit_logs", "true")
	mustAdmin(t, s.DataDir, "org", "set-plan", id, "plus")
	expect(403, "Enterprise")

	// Personal organizations take no flags.
	personal := strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create", "--name", "Me", "--personal", "--plan", "enterprise"))
	_, errOut, code = runAdmin(t, s.DataDir, "org", "set-flag", personal, "can_use_audit_logs", "true")
	if code == 0 || !strings.Contains(errOut, "personal") {
		t.Fatalf("set-flag on a personal org: exit %d, %q", code, errOut)
	}
	if o := listOrgs(t, s.DataDir)[personal]; !o.IsPersonal || len(o.Config) != 0 {
		t.Fatalf("personal org changed: %+v", o)
	}
	_, errOut, code = runAdmin(t, s.DataDir, "org", "unset-flag", personal, "can_use_audit_logs")
	if code == 0 || !strings.Contains(errOut, "personal") {
		t.Fatalf("unset-flag on a personal org: exit %d, %q", code, errOut)
	}

	// Refusals, each with a clear message and a non-zero exit.
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"org", "set-plan", id, "platinum"}, 1, "Unknown plan"},
		{[]string{"org", "set-plan", uuid.NewString(), "free"}, 1, "not found"},
		{[]string{"org", "set-plan", "nope", "free"}, 1, "not an organization id"},
		{[]string{"org", "set-flag", id, "can_fly", "true"}, 1, "Unknown flag"},
		{[]string{"org", "set-flag", id, "can_use_audit_logs", "maybe"}, 2, "true or false"},
		{[]string{"org", "create"}, 2, "--name is required"},
		{[]string{"org", "create", "--name", "X", "--plan", "gold"}, 1, "Unknown plan"},
		{[]string{"org", "create-admin-key", uuid.NewString()}, 1, "not found"},
		{[]string{"org", "set-plan", id}, 2, "want 2 argument"},
		{[]string{"org", "frobnicate"}, 2, "unknown command"},
	} {
		_, errOut, code := runAdmin(t, s.DataDir, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, errOut, tc.code, tc.msg)
		}
	}

	out = mustAdmin(t, s.DataDir, "org", "list")
	for _, want := range []string{"Default", "Acme", "Me", "ID"} {
		if !strings.Contains(out, want) {
			t.Errorf("org list lacks %q:\n%s", want, out)
		}
	}
	if out := mustAdmin(t, s.DataDir, "audit", "verify"); !strings.Contains(out, "intact") {
		t.Errorf("verify on an untouched database: %s", out)
	}
	if out := mustAdmin(t, s.DataDir, "audit", "forward-status"); !strings.Contains(out, "not configured") {
		t.Errorf("forward-status: %s", out)
	}

	// Changes are durable: they survive a restart.
	s.Restart()
	if o := listOrgs(t, s.DataDir)[id]; o.Plan != "plus" || o.Config["can_use_audit_logs"] != true {
		t.Fatalf("after restart: %+v", o)
	}

	// Stopped: the socket is gone and the CLI says the server is not running.
	s.Stop()
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("admin socket left behind: %v", err)
	}
	_, errOut, code = runAdmin(t, s.DataDir, "org", "list")
	if code != 1 || !strings.Contains(errOut, "not running") {
		t.Errorf("with the server stopped: exit %d, %q", code, errOut)
	}
}

// copyDir copies the files of a stopped server's data directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		raw, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), raw, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// editDB opens the database file directly, as an attacker with the file would.
func editDB(t *testing.T, dir string, fn func(events *bolt.Bucket) error) {
	t.Helper()
	editTx(t, dir, func(tx *bolt.Tx) error { return fn(tx.Bucket([]byte("audit_events"))) })
}

// editTx is editDB with the whole database at hand.
func editTx(t *testing.T, dir string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dir, "slipway.db"), 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
}

type verifyReport struct {
	Organizations int `json:"organizations"`
	Events        int `json:"events"`
	Breaks        []struct {
		Org    string `json:"organization_id"`
		Seq    uint64 `json:"seq"`
		Reason string `json:"reason"`
	} `json:"breaks"`
}

func verifyJSON(t *testing.T, dir string) (verifyReport, int) {
	t.Helper()
	out, errOut, code := runAdmin(t, dir, "audit", "verify", "--json")
	var rep verifyReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --json: exit %d, %q, %q", code, out, errOut)
	}
	return rep, code
}

// TestAdminAuditVerifyTamper (acceptance 3): events are edited, deleted and
// swapped directly in copies of the database file; `slipway admin audit
// verify` exits 1 naming the first broken record each time, passes on the
// untouched copy, and passes again once retention pruning has removed the
// broken part.
func TestAdminAuditVerifyTamper(t *testing.T) {
	s := apptest.New(t, nil)
	for i := 1; i <= 6; i++ {
		createDeployment(t, s, s.Key, fmt.Sprintf("d%d", i))
	}
	var org string
	for id, o := range listOrgs(t, s.DataDir) {
		if o.DisplayName == "Default" {
			org = id
		}
	}
	rep, code := verifyJSON(t, s.DataDir)
	if code != 0 || rep.Events != 6 || len(rep.Breaks) != 0 {
		t.Fatalf("before tampering: exit %d, %+v", code, rep)
	}
	s.Stop()
	orgID := uuid.MustParse(org)
	key := func(seq uint64) []byte { return storage.Key(orgID, storage.U64(seq)) }

	cases := []struct {
		name    string
		mutate  func(b *bolt.Bucket) error
		wantSeq uint64
		reason  string
		pruned  int
	}{
		{"untouched", func(*bolt.Bucket) error { return nil }, 0, "", 6},
		{"edited", func(b *bolt.Bucket) error {
			v := storage.Copy(b.Get(key(4)))
			if !bytes.Contains(v, []byte("create_deployment")) {
				return fmt.Errorf("record 4 does not name its operation: %q", v)
			}
			return b.Put(key(4), bytes.Replace(v, []byte("create_deployment"), []byte("delete_deployment"), 1))
		}, 4, "modified", 6},
		{"deleted", func(b *bolt.Bucket) error { return b.Delete(key(3)) }, 3, "missing", 5},
		{"swapped", func(b *bolt.Bucket) error {
			v2, v5 := storage.Copy(b.Get(key(2))), storage.Copy(b.Get(key(5)))
			if v2 == nil || v5 == nil {
				return fmt.Errorf("records 2 and 5 not found")
			}
			if err := b.Put(key(2), v5); err != nil {
				return err
			}
			return b.Put(key(5), v2)
		}, 2, "", 6},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, s.DataDir)
			editDB(t, dir, tc.mutate)
			c := apptest.New(t, map[string]string{"SLIPWAY_DATA_DIR": dir})
			out, errOut, code := runAdmin(t, dir, "audit", "verify")
			if tc.wantSeq == 0 {
				if code != 0 || !strings.Contains(out, "intact") {
					t.Fatalf("untouched copy: exit %d\n%s%s", code, out, errOut)
				}
			} else {
				want := fmt.Sprintf("organization %s: first broken record seq %d", org, tc.wantSeq)
				if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, tc.reason) {
					t.Fatalf("verify: exit %d\n%s%s\nwant exit 1 and %q (%s)", code, out, errOut, want, tc.reason)
				}
				rep, code := verifyJSON(t, dir)
				if code != 1 || len(rep.Breaks) != 1 || rep.Breaks[0].Org != org || rep.Breaks[0].Seq != tc.wantSeq {
					t.Fatalf("verify --json: exit %d, %+v", code, rep)
				}
			}
			// Retention: prune everything before now, then keep writing.
			time.Sleep(5 * time.Millisecond)
			cutoff := time.Now().UTC()
			time.Sleep(5 * time.Millisecond)
			createDeployment(t, c, c.Key, "d7")
			createDeployment(t, c, c.Key, "d8")
			out = mustAdmin(t, dir, "audit", "prune", "--before", cutoff.Format(time.RFC3339Nano))
			if !strings.Contains(out, fmt.Sprintf("pruned %d event(s)", tc.pruned)) {
				t.Fatalf("prune: %s", out)
			}
			// Two deployments and the prune's own delete_audit_logs event.
			rep, code := verifyJSON(t, dir)
			if code != 0 || len(rep.Breaks) != 0 || rep.Events != 3 {
				t.Fatalf("after pruning: exit %d, %+v", code, rep)
			}
			// The chain goes on from the anchor, across a restart.
			c.Restart()
			createDeployment(t, c, c.Key, "d9")
			if rep, code := verifyJSON(t, dir); code != 0 || rep.Events != 4 {
				t.Fatalf("after pruning and a restart: exit %d, %+v", code, rep)
			}
		})
	}
	// A cutoff in the future is refused.
	s2 := apptest.New(t, map[string]string{"SLIPWAY_DATA_DIR": copyDir(t, s.DataDir)})
	_, errOut, code := runAdmin(t, s2.DataDir, "audit", "prune", "--before", time.Now().Add(time.Hour).Format(time.RFC3339))
	if code != 1 || !strings.Contains(errOut, "future") {
		t.Fatalf("future cutoff: exit %d, %q", code, errOut)
	}
}

// collector is a webhook receiver that fails its first `fail` requests.
type collector struct {
	mu       sync.Mutex
	fail     int
	requests int
	failed   int
	uids     map[string]int
}

func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests++
	if c.requests <= c.fail {
		c.failed++
		http.Error(w, "receiver down", http.StatusInternalServerError)
		return
	}
	var items []struct {
		Metadata struct {
			UID string `json:"uid"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(body, &items); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, it := range items {
		c.uids[it.Metadata.UID]++
	}
}

func (c *collector) snapshot() (failed int, uids map[string]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	uids = map[string]int{}
	for k, v := range c.uids {
		uids[k] = v
	}
	return c.failed, uids
}

// allUIDs pages through an organization's audit log.
func allUIDs(t *testing.T, s *servertest.Server, key, org string) []string {
	t.Helper()
	var out []string
	cursor := ""
	for {
		path := "/api/v1/audit-logs?start_time=2000-01-01T00:00:00Z&end_time=2100-01-01T00:00:00Z&limit=100"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		r := s.Do("GET", path, nil, "X-Api-Key", key, "X-Organization-Id", org)
		if r.Status != 200 {
			t.Fatalf("audit-logs: %d %s", r.Status, r.Body)
		}
		var page struct {
			Items []struct {
				Metadata struct {
					UID string `json:"uid"`
				} `json:"metadata"`
			} `json:"items"`
			Cursor *string `json:"cursor"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			out = append(out, it.Metadata.UID)
		}
		if page.Cursor == nil {
			return out
		}
		cursor = *page.Cursor
	}
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestAuditForwardingSurvivesFailuresAndRestart (acceptance 4): a receiver
// fails for a while and Slipway restarts in the middle; every event of
// every organization still arrives (by metadata.uid).
func TestAuditForwardingSurvivesFailuresAndRestart(t *testing.T) {
	rc := &collector{fail: 3, uids: map[string]int{}}
	recv := httptest.NewServer(rc)
	defer recv.Close()
	s := apptest.New(t, map[string]string{
		"SLIPWAY_AUDIT_FORWARD_URL":              recv.URL + "/audit?token=secret",
		"SLIPWAY_AUDIT_FORWARD_INTERVAL":         "1s",
		"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true",
	})
	// A second organization, through the admin socket.
	acme := strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create", "--name", "Acme", "--plan", "enterprise"))
	acmeKey := strings.TrimSpace(mustAdmin(t, s.DataDir, "org", "create-admin-key", acme))
	var def string
	for id, o := range listOrgs(t, s.DataDir) {
		if o.DisplayName == "Default" {
			def = id
		}
	}

	for i := 0; i < 5; i++ {
		createDeployment(t, s, s.Key, fmt.Sprintf("a%d", i))
		createDeployment(t, s, acmeKey, fmt.Sprintf("a%d", i))
	}
	// A refused operation is an event too.
	if r := s.Do("POST", "/v2/deployments", map[string]any{"name": "a0", "source": "internal_docker",
		"source_config": map[string]any{}, "source_revision_config": map[string]any{}, "secrets": []any{}}); r.Status < 400 {
		t.Fatalf("duplicate deployment accepted: %d", r.Status)
	}

	// Restart while the receiver is still failing.
	waitFor(t, "two failed deliveries", 30*time.Second, func() bool { f, _ := rc.snapshot(); return f >= 2 })
	out := mustAdmin(t, s.DataDir, "audit", "forward-status")
	if !strings.Contains(out, "500") || strings.Contains(out, "secret") {
		t.Errorf("forward-status during failures:\n%s", out)
	}
	s.Restart()
	for i := 0; i < 5; i++ {
		createDeployment(t, s, s.Key, fmt.Sprintf("b%d", i))
		createDeployment(t, s, acmeKey, fmt.Sprintf("b%d", i))
	}

	want := append(allUIDs(t, s, s.Key, def), allUIDs(t, s, acmeKey, acme)...)
	if len(want) < 21 {
		t.Fatalf("only %d events to forward", len(want))
	}
	waitFor(t, "every event at the receiver", 60*time.Second, func() bool {
		_, got := rc.snapshot()
		for _, uid := range want {
			if got[uid] == 0 {
				return false
			}
		}
		return true
	})
	failed, got := rc.snapshot()
	if failed != 3 {
		t.Errorf("%d failed deliveries, want 3", failed)
	}
	wantSet := map[string]bool{}
	for _, uid := range want {
		wantSet[uid] = true
	}
	for uid := range got {
		if !wantSet[uid] {
			t.Errorf("receiver got unknown event %s", uid)
		}
	}

	var st struct {
		Enabled       bool   `json:"enabled"`
		Target        string `json:"target"`
		Organizations []struct {
			Org       string `json:"organization_id"`
			Attempts  int    `json:"attempts"`
			Delivered int    `json:"delivered"`
			LastError string `json:"last_error"`
		} `json:"organizations"`
	}
	// The receiver counts an event when its request arrives; the forwarder
	// records the batch as delivered once that request has been answered,
	// in its own commit: the status catches up a moment after the receiver.
	delivered := func() int {
		n := 0
		for _, o := range st.Organizations {
			n += o.Delivered
		}
		return n
	}
	waitFor(t, "forward-status to settle", 10*time.Second, func() bool {
		if err := json.Unmarshal([]byte(mustAdmin(t, s.DataDir, "audit", "forward-status", "--json")), &st); err != nil {
			t.Fatal(err)
		}
		return len(st.Organizations) == 2 && st.Organizations[0].Attempts == 0 && st.Organizations[1].Attempts == 0 &&
			delivered() >= len(want)
	})
	if !st.Enabled || strings.Contains(st.Target, "secret") {
		t.Errorf("status target %q", st.Target)
	}
	for _, o := range st.Organizations {
		if o.LastError != "" {
			t.Errorf("org %s: last error %q after recovery", o.Org, o.LastError)
		}
	}
	if total := delivered(); total < len(want) {
		t.Errorf("status counts %d delivered, want at least %d", total, len(want))
	}
}

// TestAuditForwardingToFile forwards to a file:// destination as JSON Lines.
func TestAuditForwardingToFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	s := apptest.New(t, map[string]string{
		"SLIPWAY_AUDIT_FORWARD_URL":              "file://" + path,
		"SLIPWAY_AUDIT_FORWARD_INTERVAL":         "1s",
		"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true",
	})
	for i := 0; i < 4; i++ {
		createDeployment(t, s, s.Key, fmt.Sprintf("f%d", i))
	}
	org := ""
	for id := range listOrgs(t, s.DataDir) {
		org = id
	}
	want := allUIDs(t, s, s.Key, org)
	read := func() []string {
		fh, err := os.Open(path)
		if err != nil {
			return nil
		}
		defer fh.Close()
		var uids []string
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var ev struct {
				ClassUID int `json:"class_uid"`
				Metadata struct {
					UID string `json:"uid"`
				} `json:"metadata"`
			}
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.ClassUID != 6003 {
				t.Fatalf("line %q: %v", sc.Text(), err)
			}
			uids = append(uids, ev.Metadata.UID)
		}
		return uids
	}
	waitFor(t, "every event in the file", 30*time.Second, func() bool { return len(read()) >= len(want) })
	if got := read(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("file has\n%v\nwant\n%v", got, want)
	}
}

// TestAdminSocketNeedsToken: reaching the socket is not enough. Code that
// shares the server's uid (a non-root server) but cannot read the data
// directory (Landlock) must not administer the host.
func TestAdminSocketNeedsToken(t *testing.T) {
	s := apptest.New(t, nil)
	sock := filepath.Join(s.DataDir, "admin", "admin.sock")
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
	tok, err := os.ReadFile(filepath.Join(s.DataDir, "admin", "token"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, auth string
		want       int
	}{
		{"no token", "", 401},
		{"wrong token", "Bearer " + strings.Repeat("0", 64), 401},
		{"token without Bearer", strings.TrimSpace(string(tok)), 401},
		{"token", "Bearer " + strings.TrimSpace(string(tok)), 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", "http://admin/v1/orgs", strings.NewReader(`{"name":"Probe"}`))
			req.Header.Set("Content-Type", "application/json")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.want, body)
			}
			if tc.want == 401 && !strings.Contains(string(body), `"detail"`) {
				t.Fatalf("body %s", body)
			}
		})
	}
	// Refused requests created nothing.
	n := 0
	for _, o := range listOrgs(t, s.DataDir) {
		if o.DisplayName == "Probe" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d organizations named Probe, want 1", n)
	}
}
