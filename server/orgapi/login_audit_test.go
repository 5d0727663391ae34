package orgapi_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"slipway/server/apptest"
	"slipway/server/audit/ocsftest"
	"slipway/server/servertest"
)

// wantEvent is an audit event a test expects: its operation, status,
// actor, credential (nil for a null credential_uid), request path and
// response code.
type wantEvent struct {
	op, status, user string
	cred             any
	path             string
	code             int
}

func (w wantEvent) String() string {
	return fmt.Sprintf("%s %s by %s (credential %v) on %s → %d", w.op, w.status, w.user, w.cred, w.path, w.code)
}

func (w wantEvent) matches(e map[string]any) bool {
	user := e["actor"].(map[string]any)["user"].(map[string]any)
	path := e["http_request"].(map[string]any)["url"].(map[string]any)["path"]
	return e["api"].(map[string]any)["operation"] == w.op && e["status"] == w.status && user["uid"] == w.user &&
		user["credential_uid"] == w.cred && path == w.path && e["http_response"].(map[string]any)["code"] == float64(w.code)
}

// loginAudit waits until the organization's audit log (read with the
// server's key) holds exactly the events of ops in want, in any order
// (refused logins are written after their answer), and checks each is a
// valid OCSF 1.7.0 API Activity event of activity Other. It returns them.
func loginAudit(t *testing.T, s *servertest.Server, ops []string, want []wantEvent) []map[string]any {
	t.Helper()
	schema, err := ocsftest.Load(ocsftest.SchemaDir())
	if err != nil {
		t.Fatalf("load the OCSF 1.7.0 schema: %v", err)
	}
	start, end := window()
	q := "/api/v1/audit-logs?limit=100&start_time=" + url.QueryEscape(start) + "&end_time=" + url.QueryEscape(end)
	for _, op := range ops {
		q += "&operations=" + op
	}
	var items []map[string]any
	deadline := time.Now().Add(10 * time.Second)
	for {
		r := s.Do("GET", q, nil)
		mustStatus(t, r, 200)
		items = items[:0]
		for _, it := range r.Map()["items"].([]any) {
			items = append(items, it.(map[string]any))
		}
		if len(items) >= len(want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	used := make([]bool, len(items))
	for _, w := range want {
		found := false
		for i, e := range items {
			if !used[i] && w.matches(e) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			raw, _ := json.MarshalIndent(items, "", " ")
			t.Fatalf("no event %v among the %d of %v:\n%s", w, len(items), ops, raw)
		}
	}
	if len(items) != len(want) {
		raw, _ := json.MarshalIndent(items, "", " ")
		t.Fatalf("%d events of %v, want %d:\n%s", len(items), ops, len(want), raw)
	}
	for _, e := range items {
		raw, _ := json.Marshal(e)
		if v := schema.ValidateJSON(raw); len(v) > 0 {
			t.Fatalf("event is not valid OCSF 1.7.0: %v\n%s", v, raw)
		}
		if e["class_uid"] != float64(6003) || e["activity_id"] != float64(99) || e["type_uid"] != float64(600399) {
			t.Fatalf("class %v activity %v type %v, want API Activity (6003), Other (99)", e["class_uid"], e["activity_id"], e["type_uid"])
		}
	}
	return items
}

// TestLoginsAudited logs in through the organization API with the right
// password, a wrong one, and an email no account has, then logs out: the
// organization's audit log holds a Success and a Failure `login` and a
// Success `logout`, each naming the account with a null credential; the
// unknown email is in no audit log (Slipway's log has it), and no event
// holds a password or the session token.
func TestLoginsAudited(t *testing.T) {
	s := auditServer(t)
	const adaPW = "ada-correct-horse-battery"
	adaID := basicUser(t, s, roleIDs(t, s), "ada@example.com", "Organization User", adaPW)

	mustStatus(t, s.Do("POST", "/api/v1/login", map[string]any{"email": "nobody@example.com", "password": "guess-1"}, "X-Api-Key", ""), 401)
	mustStatus(t, s.Do("POST", "/api/v1/login", map[string]any{"email": "ada@example.com", "password": "wrong-password-1"}, "X-Api-Key", ""), 401)
	mustStatus(t, s.Do("POST", "/api/v1/login", nil, "X-Api-Key", "", "Authorization", "Basic "+basicAuth("ada@example.com", "wrong-password-2")), 401)
	token := login(t, s, "ada@example.com", adaPW)
	mustStatus(t, s.Do("POST", "/api/v1/logout", nil, "X-Api-Key", "", "Authorization", "Bearer "+token), 200)
	// An API key has no session to log out of: refused, nothing recorded.
	mustStatus(t, s.Do("POST", "/api/v1/logout", nil), 400)

	items := loginAudit(t, s, []string{"login", "logout"}, []wantEvent{
		{"login", "Failure", adaID, nil, "/api/v1/login", 401},
		{"login", "Failure", adaID, nil, "/api/v1/login", 401},
		{"login", "Success", adaID, nil, "/api/v1/login", 200},
		{"logout", "Success", adaID, nil, "/api/v1/logout", 200},
	})
	raw, _ := json.Marshal(items)
	for _, secret := range []string{adaPW, "wrong-password-1", "wrong-password-2", "guess-1", token, "nobody@example.com"} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("an event holds %q", secret)
		}
	}
	logs := s.Logs()
	if !strings.Contains(logs, `"email":"nobody@example.com"`) || !strings.Contains(logs, "login failed") {
		t.Fatal("Slipway's log lacks the failed login of the unknown email")
	}
	for _, secret := range []string{adaPW, "wrong-password-1", "guess-1", token} {
		if strings.Contains(logs, secret) {
			t.Fatalf("Slipway's log holds %q", secret)
		}
	}
}

// TestThrottledLoginsCannotFloodTheChain knocks on a locked account as fast
// as the server answers: past the throttle, only the first throttled
// attempt of the window reaches the organization's audit log (the others
// are in Slipway's log), so the chain grows by at most the account's
// attempts plus one per window however long the attack lasts.
func TestThrottledLoginsCannotFloodTheChain(t *testing.T) {
	s := apptest.New(t, map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true",
		"SLIPWAY_LOGIN_ATTEMPTS": "1000", "SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS": "3", "SLIPWAY_LOGIN_WINDOW": "60s"})
	adaID := basicUser(t, s, roleIDs(t, s), "ada@example.com", "Organization User", "ada-correct-horse-battery")
	try := func() *servertest.Response {
		return s.Do("POST", "/api/v1/login", map[string]any{"email": "ada@example.com", "password": "wrong-password-1"}, "X-Api-Key", "")
	}
	for range 3 {
		mustStatus(t, try(), 401)
	}
	const knocks = 60
	for range knocks {
		mustThrottle(t, try(), 60)
	}
	loginAudit(t, s, []string{"login"}, []wantEvent{
		{"login", "Failure", adaID, nil, "/api/v1/login", 401},
		{"login", "Failure", adaID, nil, "/api/v1/login", 401},
		{"login", "Failure", adaID, nil, "/api/v1/login", 401},
		{"login", "Failure", adaID, nil, "/api/v1/login", 429},
	})
	if n := strings.Count(s.Logs(), "login throttled"); n != knocks {
		t.Fatalf("Slipway's log has %d throttled logins, want %d", n, knocks)
	}
}
