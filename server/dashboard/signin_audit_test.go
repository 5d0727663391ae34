package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"slipway/server/apptest"
	"slipway/server/audit/ocsftest"
	"slipway/server/auth"
	"slipway/server/servertest"
)

// signedIn returns the Cookie header and CSRF token that a sign-in's
// answer set.
func signedIn(t *testing.T, r *servertest.Response) (cookies, csrf string) {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("sign in: %d %s", r.Status, r.Body)
	}
	var pairs []string
	for _, c := range (&http.Response{Header: r.Header}).Cookies() {
		if c.Value == "" {
			continue
		}
		pairs = append(pairs, c.Name+"="+c.Value)
		// The test server is on loopback, where the cookies are
		// __Host- prefixed (auth.CookieName).
		if strings.TrimPrefix(c.Name, auth.HostPrefix) == auth.CSRFCookie {
			csrf = c.Value
		}
	}
	if csrf == "" {
		t.Fatalf("no CSRF cookie among %q", r.Header.Values("Set-Cookie"))
	}
	return strings.Join(pairs, "; "), csrf
}

// TestDashboardSignInAndOutAudited signs in to the dashboard with a
// password, a wrong password, an API key and a key that does not exist,
// and signs out of each session: the organization's audit log holds a
// `login` per sign-in (Failure for the wrong password) and a `logout` per
// sign-out, each naming the route the browser called, the account, and the
// key's id as credential for the API key (null for the password sessions);
// the unknown key is in Slipway's log only, without the key.
func TestDashboardSignInAndOutAudited(t *testing.T) {
	s := apptest.New(t, map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true"})
	roles := map[string]string{}
	for _, r := range s.Do("GET", "/api/v1/orgs/current/roles", nil).JSON().([]any) {
		roles[r.(map[string]any)["display_name"].(string)] = r.(map[string]any)["id"].(string)
	}
	const adaPW = "ada-correct-horse-battery"
	r := s.Do("POST", "/api/v1/orgs/current/members/basic/batch", []any{map[string]any{
		"email": "ada@example.com", "password": adaPW, "role_id": roles["Organization User"]}})
	if r.Status != 200 {
		t.Fatalf("add ada: %d %s", r.Status, r.Body)
	}
	adaID := r.JSON().([]any)[0].(map[string]any)["id"].(string)
	adminID := s.Do("GET", "/ui/session", nil).Map()["user_id"].(string)
	keys := s.Do("GET", "/api/v1/orgs/current/service-keys", nil).JSON().([]any)
	if len(keys) != 1 {
		t.Fatalf("service keys: %v", keys)
	}
	keyID := keys[0].(map[string]any)["id"].(string)

	browser := []string{"X-Api-Key", "", "Origin", s.URL, "Sec-Fetch-Site", "same-origin", "User-Agent", "audit-test-browser"}
	signIn := func(body map[string]any) *servertest.Response {
		return s.Do("POST", "/ui/session", body, browser...)
	}
	signOut := func(cookies, csrf string) {
		t.Helper()
		r := s.Do("POST", "/ui/signout", nil, append(browser, "Cookie", cookies, auth.CSRFHeader, csrf)...)
		if r.Status != 200 {
			t.Fatalf("sign out: %d %s", r.Status, r.Body)
		}
	}
	if r := signIn(map[string]any{"email": "ada@example.com", "password": "wrong-password-1"}); r.Status != 401 {
		t.Fatalf("wrong password: %d %s", r.Status, r.Body)
	}
	const bogus = "slw_sk_0000000000000000000000000000000000000000"
	if r := signIn(map[string]any{"api_key": bogus}); r.Status != 401 {
		t.Fatalf("unknown key: %d %s", r.Status, r.Body)
	}
	signOut(signedIn(t, signIn(map[string]any{"email": "ada@example.com", "password": adaPW})))
	signOut(signedIn(t, signIn(map[string]any{"api_key": s.Key})))

	type want struct {
		op, status, user string
		cred             any
		path             string
		code             float64
	}
	wants := []want{
		{"login", "Failure", adaID, nil, "/ui/session", 401},
		{"login", "Success", adaID, nil, "/ui/session", 200},
		{"logout", "Success", adaID, nil, "/ui/signout", 200},
		{"login", "Success", adminID, keyID, "/ui/session", 200},
		{"logout", "Success", adminID, keyID, "/ui/signout", 200},
	}
	now := time.Now().UTC()
	q := "/api/v1/audit-logs?limit=100&operations=login&operations=logout&start_time=" +
		url.QueryEscape(now.Add(-time.Hour).Format(time.RFC3339)) + "&end_time=" + url.QueryEscape(now.Add(time.Hour).Format(time.RFC3339))
	var items []map[string]any
	// The refused password is recorded after its answer: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		r := s.Do("GET", q, nil)
		if r.Status != 200 {
			t.Fatalf("audit query: %d %s", r.Status, r.Body)
		}
		items = items[:0]
		for _, it := range r.Map()["items"].([]any) {
			items = append(items, it.(map[string]any))
		}
		if len(items) >= len(wants) || time.Now().After(deadline) {
			break
		}
	}
	raw, _ := json.MarshalIndent(items, "", " ")
	if len(items) != len(wants) {
		t.Fatalf("%d login/logout events, want %d:\n%s", len(items), len(wants), raw)
	}
	schema, err := ocsftest.Load(ocsftest.SchemaDir())
	if err != nil {
		t.Fatalf("load the OCSF 1.7.0 schema: %v", err)
	}
	used := make([]bool, len(items))
	for _, w := range wants {
		found := false
		for i, e := range items {
			user := e["actor"].(map[string]any)["user"].(map[string]any)
			req := e["http_request"].(map[string]any)
			if !used[i] && e["api"].(map[string]any)["operation"] == w.op && e["status"] == w.status &&
				user["uid"] == w.user && user["credential_uid"] == w.cred && req["url"].(map[string]any)["path"] == w.path &&
				req["user_agent"] == "audit-test-browser" && e["http_response"].(map[string]any)["code"] == w.code {
				used[i], found = true, true
			}
		}
		if !found {
			t.Fatalf("no event %+v among:\n%s", w, raw)
		}
	}
	for _, e := range items {
		one, _ := json.Marshal(e)
		if v := schema.ValidateJSON(one); len(v) > 0 {
			t.Fatalf("event is not valid OCSF 1.7.0: %v\n%s", v, one)
		}
		if e["class_uid"] != float64(6003) || e["activity_id"] != float64(99) {
			t.Fatalf("class %v activity %v, want API Activity (6003), Other (99)", e["class_uid"], e["activity_id"])
		}
	}
	for _, secret := range []string{adaPW, "wrong-password-1", s.Key, bogus} {
		if strings.Contains(string(raw), secret) {
			t.Fatalf("an event holds %q", secret)
		}
	}
	logs := s.Logs()
	if !strings.Contains(logs, "dashboard sign-in with an API key refused") || strings.Contains(logs, bogus) {
		t.Fatal("Slipway's log lacks the refused API key sign-in, or holds the key")
	}
}
