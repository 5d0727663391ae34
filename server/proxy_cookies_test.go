package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestSetCookieName: the name a Set-Cookie line is stored under, as
// browsers parse it (RFC 6265bis 5.6).
func TestSetCookieName(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{"slipway_session=x; Path=/", "slipway_session"},
		{"  slipway_session =x", "slipway_session"},
		{"\tslipway_csrf\t=x;Path=/", "slipway_csrf"},
		{"=slipway_session=x; Path=/", "slipway_session"},
		{" = slipway_csrf =x", "slipway_csrf"},
		{"slipway_session; Path=/", "slipway_session"},
		{"theme=dark; Path=/agents/a", "theme"},
		{"a=b=c", "a"},
		{"", ""},
	} {
		if got := setCookieName(tc.line); got != tc.want {
			t.Errorf("setCookieName(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestDropSetCookies: every Set-Cookie line that could plant or replace
// one of the dashboard's cookies goes, whatever its spelling; the
// deployment's own cookies stay, in order, unless every cookie goes.
func TestDropSetCookies(t *testing.T) {
	own := []string{"theme=dark; Path=/agents/a", "sid=1; HttpOnly", "slipwayx=1", "my_slipway_session=1"}
	for _, tc := range []struct {
		name  string
		line  string
		drop  bool
		all   bool
		owned bool // the deployment's own lines survive
	}{
		{"session", "slipway_session=ATTACKER; Path=/", true, false, true},
		{"csrf", "slipway_csrf=ATTACKER; Path=/", true, false, true},
		{"workspace", "slipway_workspace=00000000-0000-0000-0000-000000000000; Path=/", true, false, true},
		{"a future slipway_ cookie", "slipway_theme=x", true, false, true},
		{"host prefix", "__Host-slipway_session=ATTACKER; Path=/; Secure", true, false, true},
		{"secure prefix", "__Secure-slipway_csrf=ATTACKER; Path=/; Secure", true, false, true},
		{"upper case", "SLIPWAY_SESSION=ATTACKER; Path=/", true, false, true},
		{"prefix in another case", "__HOST-Slipway_Session=ATTACKER; Secure; Path=/", true, false, true},
		{"leading spaces", "   slipway_session=ATTACKER; Path=/", true, false, true},
		{"tab", "\tslipway_session\t=ATTACKER", true, false, true},
		{"nameless", "=slipway_session=ATTACKER; Path=/", true, false, true},
		{"nameless with prefix", "=__Host-slipway_csrf=ATTACKER; Path=/; Secure", true, false, true},
		{"no equals", "slipway_session; Path=/", true, false, true},
		{"domain attribute", "slipway_session=ATTACKER; Domain=example.com; Path=/", true, false, true},
		{"deployment's own only", "other=1", false, false, true},
		{"all, on the dashboard's origin with an agents origin", "other=1", true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"text/plain"}}
			for _, l := range own[:2] {
				h.Add("Set-Cookie", l)
			}
			h.Add("Set-Cookie", tc.line)
			for _, l := range own[2:] {
				h.Add("Set-Cookie", l)
			}
			dropped := dropSetCookies(h, tc.all)
			got := h.Values("Set-Cookie")
			if slices.Contains(got, tc.line) == tc.drop {
				t.Errorf("%q kept %v, want dropped %v: %q", tc.line, !tc.drop, tc.drop, got)
			}
			if tc.drop && !slices.Contains(dropped, setCookieName(tc.line)) {
				t.Errorf("dropped names %q lack %q", dropped, setCookieName(tc.line))
			}
			if tc.owned && !slices.Equal(slices.DeleteFunc(slices.Clone(got), func(l string) bool { return l == tc.line }), own) {
				t.Errorf("the deployment's own cookies changed: %q, want %q", got, own)
			}
			if !tc.owned && len(got) != 0 {
				t.Errorf("kept %q, want none", got)
			}
			if h.Get("Content-Type") != "text/plain" {
				t.Error("another header was touched")
			}
		})
	}
}

// TestProxyDropsSlipwayCookies runs the proxy against an agent whose
// answer sets cookies: the dashboard's origin, the agents origin and a
// custom_url host all lose the Slipway ones (a Domain cookie of a
// custom_url host reaches the dashboard's host), keep the others, except
// the dashboard's origin when there is an agents origin, which keeps
// none; the drop is logged once per deployment.
func TestProxyDropsSlipwayCookies(t *testing.T) {
	planted := []string{"slipway_session=ATTACKER; Path=/", "__Host-slipway_csrf=ATTACKER; Path=/; Secure", "=slipway_session=ATTACKER"}
	mine := "theme=dark; Path=/agents/a"
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hints" {
			w.Header().Add("Set-Cookie", planted[0])
			w.Header().Add("Link", "</x.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
		}
		for _, c := range planted {
			w.Header().Add("Set-Cookie", c)
		}
		w.Header().Add("Set-Cookie", mine)
		io.WriteString(w, "ok")
	}))
	defer agent.Close()
	base, _ := url.Parse(agent.URL)
	var logs bytes.Buffer
	p := &proxy{handoverWait: time.Second, log: zerolog.New(&logs).Level(zerolog.DebugLevel)}
	for _, tc := range []struct {
		name         string
		agentsOrigin bool
		t            target
		wantMine     bool
	}{
		{"dashboard origin", false, target{sandbox: true, dashboardOrigin: true}, true},
		{"dashboard origin beside an agents origin", true, target{sandbox: true, dashboardOrigin: true}, false},
		{"agents origin", true, target{sandbox: true}, true},
		{"custom_url host", true, target{}, true},
	} {
		for _, path := range []string{"/plant", "/hints"} {
			t.Run(tc.name+path, func(t *testing.T) {
				p.agentsOrigin = tc.agentsOrigin
				tg := tc.t
				tg.dep, tg.base, tg.path = "dep-"+tc.name, base, path
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if err := p.relay(w, r, tg); err != nil {
						t.Error(err)
					}
				}))
				defer srv.Close()
				var early []string // Set-Cookie of 1xx answers
				trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					early = append(early, h.Values("Set-Cookie")...)
					return nil
				}}
				req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(context.Background(), trace), "GET", srv.URL+path, nil)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if len(early) > 0 {
					t.Errorf("a 1xx answer passed Set-Cookie %q", early)
				}
				got := resp.Header.Values("Set-Cookie")
				for _, c := range got {
					if strings.Contains(c, "ATTACKER") {
						t.Errorf("a planted cookie passed: %q", c)
					}
				}
				if slices.Contains(got, mine) != tc.wantMine {
					t.Errorf("the deployment's own cookie passed %v, want %v: %q", !tc.wantMine, tc.wantMine, got)
				}
				if (resp.Header.Get("Content-Security-Policy") == "sandbox") != tc.t.sandbox {
					t.Errorf("Content-Security-Policy %q, sandbox %v", resp.Header.Get("Content-Security-Policy"), tc.t.sandbox)
				}
			})
		}
	}
	for _, tc := range []string{"dashboard origin", "agents origin"} {
		if n := strings.Count(logs.String(), `"deployment_id":"dep-`+tc+`"`); n != 1 {
			t.Errorf("%s: the drop was logged %d times for two answers, want once:\n%s", tc, n, logs.String())
		}
	}
}
