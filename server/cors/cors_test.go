package cors

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func intp(i int) *int { return &i }

func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"credentials with any origin", Config{AllowOrigins: []string{"*"}, AllowCredentials: true}, "allow_credentials"},
		{"bad regex", Config{AllowOriginRegex: "("}, "allow_origin_regex"},
		{"origin with a path", Config{AllowOrigins: []string{"https://a.example/"}}, "allow_origins"},
		{"origin without a scheme", Config{AllowOrigins: []string{"a.example"}}, "allow_origins"},
		{"negative max_age", Config{AllowOrigins: []string{"https://a.example"}, MaxAge: intp(-1)}, "max_age"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New(%+v) = %v, want an error about %s", tc.c, err, tc.want)
			}
		})
	}
	if _, err := New(Config{AllowOrigins: []string{"*"}, AllowCredentials: true}); !errors.Is(err, ErrCredentialsWithAnyOrigin) {
		t.Fatalf("credentials with *: %v", err)
	}
	if p, err := New(Config{}); p != nil || err != nil {
		t.Fatalf("no origin: %v, %v; want no policy", p, err)
	}
}

func TestPreflight(t *testing.T) {
	studio := Config{AllowOrigins: []string{"https://smith.langchain.com"}}
	for _, tc := range []struct {
		name    string
		c       Config
		origin  string
		method  string
		headers string
		// want: the status, and the Allow-Origin (""= none).
		status    int
		allow     string
		allowHdrs string
		creds     bool
		maxAge    string
	}{
		{"allowed origin", studio, "https://smith.langchain.com", "POST", "content-type,x-api-key", 204, "https://smith.langchain.com", "content-type,x-api-key", false, "600"},
		{"origin case", studio, "HTTPS://SMITH.LANGCHAIN.COM", "POST", "", 204, "HTTPS://SMITH.LANGCHAIN.COM", "", false, "600"},
		{"denied origin", studio, "https://evil.example", "POST", "x-api-key", 403, "", "", false, ""},
		{"null origin", studio, "null", "GET", "", 403, "", "", false, ""},
		{"any origin", Config{AllowOrigins: []string{"*"}}, "https://x.example", "DELETE", "", 204, "https://x.example", "", false, "600"},
		{"regex allows", Config{AllowOriginRegex: `https://[a-z]+\.example\.com`}, "https://ui.example.com", "GET", "", 204, "https://ui.example.com", "", false, "600"},
		{"regex is anchored", Config{AllowOriginRegex: `https://[a-z]+\.example\.com`}, "https://ui.example.com.evil.net", "GET", "", 403, "", "", false, ""},
		{"method not allowed", Config{AllowOrigins: []string{"https://a.example"}, AllowMethods: []string{"GET"}}, "https://a.example", "DELETE", "", 403, "", "", false, ""},
		{"method allowed", Config{AllowOrigins: []string{"https://a.example"}, AllowMethods: []string{"get", "post"}}, "https://a.example", "POST", "", 204, "https://a.example", "", false, "600"},
		{"listed headers keep the SDK's", Config{AllowOrigins: []string{"https://a.example"}, AllowHeaders: []string{"x-custom"}}, "https://a.example", "POST", "X-Api-Key, Last-Event-ID, x-custom, content-type, authorization", 204, "https://a.example",
			"x-custom, Accept, Accept-Language, Authorization, Content-Language, Content-Type, Last-Event-ID, X-Api-Key, X-Auth-Scheme, X-Request-Id, X-Tenant-Id", false, "600"},
		{"header not listed", Config{AllowOrigins: []string{"https://a.example"}, AllowHeaders: []string{"x-custom"}}, "https://a.example", "POST", "x-other", 403, "", "", false, ""},
		{"credentials", Config{AllowOrigins: []string{"https://a.example"}, AllowCredentials: true, MaxAge: intp(60)}, "https://a.example", "GET", "", 204, "https://a.example", "", true, "60"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(tc.c)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest("OPTIONS", "/threads", nil)
			r.Header.Set("Origin", tc.origin)
			r.Header.Set("Access-Control-Request-Method", tc.method)
			if tc.headers != "" {
				r.Header.Set("Access-Control-Request-Headers", tc.headers)
			}
			if !IsPreflight(r) {
				t.Fatal("not seen as a preflight")
			}
			w := httptest.NewRecorder()
			p.Preflight(w, r)
			h := w.Result().Header
			if w.Code != tc.status || h.Get("Access-Control-Allow-Origin") != tc.allow {
				t.Fatalf("status %d, Allow-Origin %q; want %d, %q", w.Code, h.Get("Access-Control-Allow-Origin"), tc.status, tc.allow)
			}
			if !strings.Contains(h.Get("Vary"), "Origin") {
				t.Fatalf("Vary %q lacks Origin", h.Get("Vary"))
			}
			if tc.status != 204 {
				for k := range h {
					if strings.HasPrefix(k, "Access-Control-") {
						t.Fatalf("denied preflight has %s", k)
					}
				}
				return
			}
			if got := h.Get("Access-Control-Allow-Headers"); got != tc.allowHdrs && !(tc.allowHdrs == "" && strings.Contains(got, "X-Api-Key")) {
				t.Fatalf("Allow-Headers %q, want %q", got, tc.allowHdrs)
			}
			if !strings.Contains(h.Get("Access-Control-Allow-Methods"), tc.method) {
				t.Fatalf("Allow-Methods %q lacks %s", h.Get("Access-Control-Allow-Methods"), tc.method)
			}
			if (h.Get("Access-Control-Allow-Credentials") == "true") != tc.creds {
				t.Fatalf("Allow-Credentials %q, want %v", h.Get("Access-Control-Allow-Credentials"), tc.creds)
			}
			if h.Get("Access-Control-Max-Age") != tc.maxAge {
				t.Fatalf("Max-Age %q, want %q", h.Get("Access-Control-Max-Age"), tc.maxAge)
			}
		})
	}
}

// TestPreflightPrivateNetwork: a public page's call to a private address
// is granted for an allowed origin only.
func TestPreflightPrivateNetwork(t *testing.T) {
	p, err := New(Config{AllowOrigins: []string{"https://smith.langchain.com"}})
	if err != nil {
		t.Fatal(err)
	}
	for origin, want := range map[string]string{"https://smith.langchain.com": "true", "https://evil.example": ""} {
		r := httptest.NewRequest("OPTIONS", "/threads", nil)
		r.Header.Set("Origin", origin)
		r.Header.Set("Access-Control-Request-Method", "GET")
		r.Header.Set("Access-Control-Request-Private-Network", "true")
		w := httptest.NewRecorder()
		p.Preflight(w, r)
		if got := w.Header().Get("Access-Control-Allow-Private-Network"); got != want {
			t.Errorf("%s: Allow-Private-Network %q, want %q", origin, got, want)
		}
	}
}

func TestIsPreflight(t *testing.T) {
	for _, tc := range []struct {
		method, origin, acrm string
		want                 bool
	}{
		{"OPTIONS", "https://a.example", "POST", true},
		{"OPTIONS", "", "POST", false},
		{"OPTIONS", "https://a.example", "", false},
		{"POST", "https://a.example", "POST", false},
	} {
		r := httptest.NewRequest(tc.method, "/", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.acrm != "" {
			r.Header.Set("Access-Control-Request-Method", tc.acrm)
		}
		if got := IsPreflight(r); got != tc.want {
			t.Errorf("%s origin=%q acrm=%q: %v, want %v", tc.method, tc.origin, tc.acrm, got, tc.want)
		}
	}
}

func TestDecorate(t *testing.T) {
	p, err := New(Config{AllowOrigins: []string{"https://a.example"}, ExposeHeaders: []string{"X-Custom"}})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := New(Config{AllowOrigins: []string{"https://a.example"}, AllowCredentials: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		p           *Policy
		origin      string
		allow, expo string
		creds       bool
	}{
		{"allowed", p, "https://a.example", "https://a.example", "X-Custom, Content-Location, Location, X-Pagination-Total, X-Pagination-Next", false},
		{"denied", p, "https://b.example", "", "", false},
		{"no origin", p, "", "", "", false},
		{"default expose and credentials", creds, "https://a.example", "https://a.example", "Content-Location, Location, X-Pagination-Total, X-Pagination-Next", true},
		{"no policy", nil, "https://a.example", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/threads", nil)
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			h := http.Header{}
			tc.p.Decorate(h, r)
			if h.Get("Vary") != "Origin" {
				t.Fatalf("Vary %q, want Origin", h.Get("Vary"))
			}
			if h.Get("Access-Control-Allow-Origin") != tc.allow || h.Get("Access-Control-Expose-Headers") != tc.expo ||
				(h.Get("Access-Control-Allow-Credentials") == "true") != tc.creds {
				t.Fatalf("headers %v; want origin %q expose %q credentials %v", h, tc.allow, tc.expo, tc.creds)
			}
		})
	}
}

func TestStripGrant(t *testing.T) {
	h := http.Header{"Access-Control-Allow-Origin": {"*"}, "Access-Control-Allow-Credentials": {"true"}, "Content-Type": {"application/json"}}
	StripGrant(h)
	if len(h) != 1 || h.Get("Content-Type") == "" {
		t.Fatalf("after StripGrant: %v", h)
	}
}

// TestMiddleware: a preflight never reaches the wrapped handler; an actual
// request does, with the grant; a nil policy leaves the handler alone.
func TestMiddleware(t *testing.T) {
	p, err := New(Config{AllowOrigins: []string{"https://a.example"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		p         *Policy
		method    string
		preflight bool
		reached   bool
		allow     string
	}{
		{"preflight", p, "OPTIONS", true, false, "https://a.example"},
		{"actual", p, "POST", false, true, "https://a.example"},
		{"plain OPTIONS", p, "OPTIONS", false, true, "https://a.example"},
		{"no policy", nil, "OPTIONS", true, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reached := false
			h := Middleware(tc.p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
			r := httptest.NewRequest(tc.method, "/threads", nil)
			r.Header.Set("Origin", "https://a.example")
			if tc.preflight {
				r.Header.Set("Access-Control-Request-Method", "POST")
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if reached != tc.reached || w.Header().Get("Access-Control-Allow-Origin") != tc.allow {
				t.Fatalf("reached %v, Allow-Origin %q; want %v, %q", reached, w.Header().Get("Access-Control-Allow-Origin"), tc.reached, tc.allow)
			}
		})
	}
}

// TestOriginsAreOrigins: an allowed origin is a scheme and a host (and
// port), nothing more; anything else is refused at configuration.
func TestOriginsAreOrigins(t *testing.T) {
	for _, o := range []string{"https://a.example/app", "https://a.example/", "a.example", "https://user@a.example", "https://a.example?x=1", "https://"} {
		if _, err := FromOrigins([]string{o}); err == nil {
			t.Errorf("%q accepted as an origin", o)
		}
	}
	for _, o := range []string{"https://a.example", "http://127.0.0.1:3000", "*"} {
		if _, err := FromOrigins([]string{o}); err != nil {
			t.Errorf("%q refused: %v", o, err)
		}
	}
}
