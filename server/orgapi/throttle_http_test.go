package orgapi_test

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// TestLoginThrottling replays the attack (wrong passwords as fast as the
// server answers) against small limits: per client address (taken from
// X-Forwarded-For of a trusted proxy), per account, unknown emails like
// known ones, a 429 with Retry-After, a short lockout after which the
// correct password works, and each wrong password on a real account
// audited as a refused login, and its first throttled attempt of the
// window too. The window is long enough that no bucket refills during the
// test; TestLoginLockoutEnds uses a short one.
func TestLoginThrottling(t *testing.T) {
	s := apptest.New(t, map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "true",
		"SLIPWAY_TRUSTED_PROXIES": "127.0.0.1", "SLIPWAY_LOGIN_ATTEMPTS": "3",
		"SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS": "4", "SLIPWAY_LOGIN_WINDOW": "60s"})
	roles := roleIDs(t, s)
	const adaPW = "ada-correct-horse-battery"
	adaID := basicUser(t, s, roles, "ada@example.com", "Organization User", adaPW)
	try := loginFrom(t, s)
	throttled := func(r *servertest.Response) int { t.Helper(); return mustThrottle(t, r, 20) }

	// Per address: three failures, then 429 even for the right password.
	for range 3 {
		mustStatus(t, try("203.0.113.1", "ada@example.com", "wrong-password-1"), 401)
	}
	throttled(try("203.0.113.1", "ada@example.com", "wrong-password-1"))
	known := try("203.0.113.1", "ada@example.com", adaPW)
	throttled(known)

	// An unknown email is throttled exactly like a known one.
	for range 3 {
		mustStatus(t, try("203.0.113.2", "nobody@example.com", "wrong-password-1"), 401)
	}
	unknown := try("203.0.113.2", "nobody@example.com", "wrong-password-1")
	throttled(unknown)
	// The same answer but for the seconds left, which move with the clock
	// between the two requests.
	digits := regexp.MustCompile(`[0-9]+`)
	if k, u := digits.ReplaceAllString(string(known.Body), "N"), digits.ReplaceAllString(string(unknown.Body), "N"); k != u {
		t.Fatalf("throttled answers differ: %s vs %s", known.Body, unknown.Body)
	}

	// Per account: the three failures above count; one more from another
	// address reaches the account's limit, which then holds everywhere.
	mustStatus(t, try("203.0.113.3", "ada@example.com", "wrong-password-1"), 401)
	throttled(try("203.0.113.4", "ada@example.com", "wrong-password-1"))
	// Other accounts and addresses are unaffected.
	mustStatus(t, try("203.0.113.4", "bob@example.com", "wrong-password-1"), 401)

	// Each wrong password on ada (4) and the first of her throttled
	// attempts (3) is a refused login in her organization's audit log
	// (written after the answer: poll).
	start, end := window()
	q := "/api/v1/audit-logs?limit=100&operations=login&start_time=" + url.QueryEscape(start) + "&end_time=" + url.QueryEscape(end)
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := s.Do("GET", q, nil)
		mustStatus(t, r, 200)
		items := r.Map()["items"].([]any)
		if len(items) == 5 {
			codes := map[float64]int{}
			for _, it := range items {
				ev := it.(map[string]any)
				if ev["status"] != "Failure" || ev["actor"].(map[string]any)["user"].(map[string]any)["uid"] != adaID ||
					ev["src_endpoint"].(map[string]any)["ip"] == "127.0.0.1" {
					t.Fatalf("refused login event %v", ev)
				}
				codes[ev["http_response"].(map[string]any)["code"].(float64)]++
			}
			if codes[401] != 4 || codes[429] != 1 {
				t.Fatalf("refused logins by status %v, want 4 of 401 and 1 of 429", codes)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d refused-login events, want 5: %s", len(items), r.Body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if logs := s.Logs(); !strings.Contains(logs, "login throttled") || strings.Contains(logs, adaPW) || strings.Contains(logs, "wrong-password-1") {
		t.Fatal("the log misses throttled logins or shows a password")
	}
}

// TestLoginLockoutEnds: a throttled account's owner logs in with the right
// password once Retry-After has passed.
func TestLoginLockoutEnds(t *testing.T) {
	// The window outlasts the logins that fill it: each hashes a password,
	// which in-process under the race detector on a loaded machine takes
	// most of a second, and a 2 s window had let the first failure expire
	// before the throttled login was tried.
	s := apptest.New(t, map[string]string{"SLIPWAY_LOGIN_ATTEMPTS": "2",
		"SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS": "2", "SLIPWAY_LOGIN_WINDOW": "8s"})
	const adaPW = "ada-correct-horse-battery"
	basicUser(t, s, roleIDs(t, s), "ada@example.com", "Organization User", adaPW)
	try := loginFrom(t, s)
	var wait int
	for i := 0; wait == 0; i++ {
		if r := try("", "ada@example.com", "wrong-password-1"); r.Status == 429 {
			wait = mustThrottle(t, r, 8) // within the window
		} else if mustStatus(t, r, 401); i > 10 {
			t.Fatal("never throttled")
		}
	}
	throttledAt := time.Now()
	mustThrottle(t, try("", "ada@example.com", adaPW), 8)
	time.Sleep(time.Until(throttledAt.Add(time.Duration(wait)*time.Second + 50*time.Millisecond)))
	mustStatus(t, try("", "ada@example.com", adaPW), 200)
}

// loginFrom returns a login function whose requests come from the given
// client address (as X-Forwarded-For; "" sends none).
func loginFrom(t *testing.T, s *servertest.Server) func(from, email, password string) *servertest.Response {
	return func(from, email, password string) *servertest.Response {
		t.Helper()
		return s.Do("POST", "/api/v1/login", map[string]any{"email": email, "password": password},
			"X-Api-Key", "", "X-Forwarded-For", from)
	}
}

// mustThrottle checks a 429 answer and returns its Retry-After (1..max s).
func mustThrottle(t *testing.T, r *servertest.Response, max int) int {
	t.Helper()
	mustStatus(t, r, 429)
	if !strings.Contains(detail(t, r), "Too many failed logins") {
		t.Fatalf("429 detail %s", r.Body)
	}
	secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || secs < 1 || secs > max {
		t.Fatalf("Retry-After %q, want 1..%d", r.Header.Get("Retry-After"), max)
	}
	return secs
}
