package dashboard_test

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"slipway/server/apptest"
	"slipway/server/servertest"
)

// signInAt POSTs body to /ui/session on s with the given Host header and
// returns the answer's status, Set-Cookie lines and Retry-After.
func signInAt(t *testing.T, s *servertest.Server, host, body string) (int, []string, string) {
	t.Helper()
	req, err := http.NewRequest("POST", s.URL+"/ui/session", bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Values("Set-Cookie"), resp.Header.Get("Retry-After")
}

// TestSignInCookieNames: on a loopback host (a secure context to the
// browser) the sign-in sets __Host- prefixed Secure cookies and expires
// the unprefixed names of earlier versions; on plain http to another
// host it sets the unprefixed names, without Secure, which the browser
// would drop there.
func TestSignInCookieNames(t *testing.T) {
	s := apptest.New(t, nil)
	body := `{"api_key": "` + s.Key + `"}`
	_, port, _ := strings.Cut(strings.TrimPrefix(s.URL, "http://"), ":")
	for _, tc := range []struct {
		host   string
		prefix string
	}{{"", "__Host-"}, {"localhost:" + port, "__Host-"}, {"slipway.lan:" + port, ""}} {
		code, cookies, _ := signInAt(t, s, tc.host, body)
		if code != 200 {
			t.Fatalf("%s: sign in: %d", tc.host, code)
		}
		set := map[string]string{}
		for _, c := range cookies {
			name, rest, _ := strings.Cut(c, "=")
			set[name] = rest
		}
		for _, base := range []string{"slipway_session", "slipway_csrf"} {
			attrs, ok := set[tc.prefix+base]
			if !ok || strings.HasPrefix(attrs, ";") {
				t.Errorf("%q: no %s%s cookie with a value in %q", tc.host, tc.prefix, base, cookies)
				continue
			}
			if secure := strings.Contains(attrs, "; Secure"); secure != (tc.prefix != "") || !strings.Contains(attrs, "Path=/") ||
				strings.Contains(attrs, "Domain=") || !strings.Contains(attrs, "SameSite=Strict") {
				t.Errorf("%q: %s%s attributes %q", tc.host, tc.prefix, base, attrs)
			}
		}
		if tc.prefix != "" {
			if attrs, ok := set["slipway_session"]; !ok || !strings.Contains(attrs, "Max-Age=0") {
				t.Errorf("%q: the unprefixed session cookie of earlier versions is not expired: %q", tc.host, cookies)
			}
		}
	}
}

// TestAPIKeySignInThrottled: a wrong API key pasted at the dashboard's
// sign-in, repeated, is throttled like a wrong password: 429 with
// Retry-After once the address's attempts are spent, even for a right
// key from that address; a right key before then costs nothing.
func TestAPIKeySignInThrottled(t *testing.T) {
	s := apptest.New(t, map[string]string{"SLIPWAY_LOGIN_ATTEMPTS": "3", "SLIPWAY_LOGIN_WINDOW": "1h"})
	good := `{"api_key": "` + s.Key + `"}`
	for i := 0; i < 5; i++ {
		if code, _, _ := signInAt(t, s, "", good); code != 200 {
			t.Fatalf("right key %d: %d", i, code)
		}
	}
	for i := 0; i < 3; i++ {
		if code, _, _ := signInAt(t, s, "", `{"api_key": "slw_sk_wrong`+strconv.Itoa(i)+`"}`); code != 401 {
			t.Fatalf("wrong key %d: %d, want 401", i, code)
		}
	}
	for _, body := range []string{`{"api_key": "slw_sk_wrong9"}`, good} {
		code, cookies, retry := signInAt(t, s, "", body)
		if n, err := strconv.Atoi(retry); code != 429 || err != nil || n < 1 {
			t.Fatalf("after 3 wrong keys, %s: %d Retry-After %q, want 429 with Retry-After", body, code, retry)
		}
		if len(cookies) > 0 {
			t.Errorf("a throttled sign-in set cookies: %q", cookies)
		}
	}
	// The password login shares the address's bucket.
	if code, _, _ := signInAt(t, s, "", `{"email": "nobody@example.com", "password": "whatever-password"}`); code != 429 {
		t.Errorf("password sign-in after 3 wrong keys: %d, want 429", code)
	}
}
