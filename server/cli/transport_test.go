package cli

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// network is a local server standing in for every host: requests to any
// name or address reach it (its dialer ignores the address), and it
// records the host and key of each one that arrived. A request the guard
// refuses never shows up here.
type network struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // "host key"
	// redirect, when set, is where the first request is sent on (307).
	redirect string
}

func newNetwork(t *testing.T) *network {
	n := &network{}
	n.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.seen = append(n.seen, r.Host+" "+r.Header.Get("X-Api-Key"))
		first := len(n.seen) == 1
		n.mu.Unlock()
		if first && n.redirect != "" {
			http.Redirect(w, r, n.redirect, http.StatusTemporaryRedirect)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"resources": [], "deployments": []}`))
	}))
	t.Cleanup(n.srv.Close)
	return n
}

// client returns an HTTP client whose every connection goes to the server,
// whatever the URL names, speaking plain HTTP (an https:// URL is sent as
// plain HTTP too: the test is about where a key may go, not TLS).
func (n *network) client() *http.Client {
	addr := n.srv.Listener.Addr().String()
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}
	return &http.Client{Transport: &plainTransport{&http.Transport{DialContext: dial, DialTLSContext: dial}}}
}

// plainTransport sends https:// requests as http:// ones to the fake network.
type plainTransport struct{ base *http.Transport }

func (p *plainTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.URL.Scheme = "http"
	return p.base.RoundTrip(r)
}

func (n *network) requests() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.seen...)
}

// TestKeyNeverInClearText sends the client's requests (JSON calls, a log
// stream, an upload) to loopback and remote hosts over http and https:
// over plain http to a host that is not this machine nothing leaves
// without Insecure, the request never reaches the network and the error
// says why and how to go on; a redirect from https to plain http is
// refused the same way.
func TestKeyNeverInClearText(t *testing.T) {
	cases := []struct {
		url      string
		insecure bool
		sent     bool
	}{
		{"http://127.0.0.1:8484", false, true},
		{"http://127.3.4.5:8484", false, true},
		{"http://localhost:8484", false, true},
		{"http://LocalHost.:8484", false, true},
		{"http://[::1]:8484", false, true},
		{"http://[::ffff:127.0.0.1]:8484", false, true},
		{"https://slipway.example", false, true},
		{"HTTPS://slipway.example", false, true},
		{"http://slipway.example", false, false},
		{"HTTP://slipway.example", false, false},
		{"http://10.0.0.5:8484", false, false},
		{"http://192.168.1.20", false, false},
		{"http://0.0.0.0:8484", false, false},
		{"http://[fe80::1%25eth0]:8484", false, false},
		{"http://[2001:db8::1]:8484", false, false},
		{"http://localhost.slipway.example", false, false},
		{"http://127.0.0.1.nip.io", false, false},
		{"http://slipway.example", true, true},
		{"http://10.0.0.5:8484", true, true},
	}
	for _, tc := range cases {
		name := tc.url
		if tc.insecure {
			name += " insecure"
		}
		t.Run(name, func(t *testing.T) {
			calls := []struct {
				name string
				call func(c *Client) error
			}{
				{"json", func(c *Client) error { return c.Do(context.Background(), "GET", "/v2/deployments", nil, nil) }},
				{"stream", func(c *Client) error {
					_, _, err := (&Streamer{Client: c}).stream(context.Background(), "/v2/deployments/d/revisions/r/logs?follow=true", "", FollowOptions{})
					return err
				}},
				{"upload", func(c *Client) error {
					return c.Upload(context.Background(), tc.url+"/v2/uploads/u?token=signed", strings.NewReader("x"), 1)
				}},
			}
			for _, call := range calls {
				n := newNetwork(t)
				c := &Client{BaseURL: tc.url, APIKey: "slw_sk_secret", HTTP: n.client(), Insecure: tc.insecure}
				err := call.call(c)
				got := n.requests()
				var ie *insecureError
				refused := errors.As(err, &ie)
				if tc.sent {
					if refused || len(got) != 1 {
						t.Fatalf("%s: refused %v (%v), %d requests reached the network", call.name, refused, err, len(got))
					}
					continue
				}
				if !refused || len(got) != 0 {
					t.Fatalf("%s: err %v; the network saw %q", call.name, err, got)
				}
				for _, want := range []string{"over plain http", "--insecure", "SLIPWAY_INSECURE=1", "https://"} {
					if !strings.Contains(err.Error(), want) {
						t.Fatalf("%s: the refusal %q does not say %q", call.name, err, want)
					}
				}
				if strings.Contains(err.Error(), "slw_sk_secret") || strings.Contains(err.Error(), "token=") {
					t.Fatalf("%s: the refusal quotes the credential: %q", call.name, err)
				}
			}
		})
	}
	t.Run("redirect to plain http", func(t *testing.T) {
		n := newNetwork(t)
		n.redirect = "http://slipway.example/v2/deployments"
		c := &Client{BaseURL: "https://slipway.example", APIKey: "slw_sk_secret", HTTP: n.client()}
		err := c.Do(context.Background(), "GET", "/v2/deployments", nil, nil)
		var ie *insecureError
		if !errors.As(err, &ie) {
			t.Fatalf("err %v, want the refusal", err)
		}
		if got := n.requests(); len(got) != 1 {
			t.Fatalf("the network saw %q: the key followed the redirect", got)
		}
	})
}

// TestCLIRefusesClearText runs `slipway login` and `slipway ls` as a user
// would against a remote host over plain http: exit 2 with the reason, no
// request sent and nothing saved; with --insecure or SLIPWAY_INSECURE=1 the
// key goes (with a warning), and a bad SLIPWAY_INSECURE is a usage error.
func TestCLIRefusesClearText(t *testing.T) {
	cases := []struct {
		name   string
		cmd    string
		args   []string
		env    map[string]string
		code   int
		sent   bool
		stderr string
	}{
		{"login refused", "login", []string{"--url", "http://slipway.example:8484", "--api-key", "slw_sk_secret"}, nil,
			ExitUsage, false, "refusing to send the API key to http://slipway.example:8484 over plain http"},
		{"ls refused", "ls", nil, map[string]string{"SLIPWAY_URL": "http://203.0.113.7:8484", "SLIPWAY_API_KEY": "slw_sk_secret"},
			ExitUsage, false, "pass --insecure"},
		{"login insecure", "login", []string{"--url", "http://slipway.example:8484", "--api-key", "slw_sk_secret", "--insecure"}, nil,
			ExitOK, true, "warning: --insecure"},
		{"ls with SLIPWAY_INSECURE", "ls", nil,
			map[string]string{"SLIPWAY_URL": "http://203.0.113.7:8484", "SLIPWAY_API_KEY": "slw_sk_secret", "SLIPWAY_INSECURE": "1"},
			ExitOK, true, "in clear text"},
		{"SLIPWAY_INSECURE=0 still refuses", "ls", nil,
			map[string]string{"SLIPWAY_URL": "http://203.0.113.7:8484", "SLIPWAY_API_KEY": "slw_sk_secret", "SLIPWAY_INSECURE": "0"},
			ExitUsage, false, "refusing"},
		{"bad SLIPWAY_INSECURE", "ls", nil,
			map[string]string{"SLIPWAY_URL": "http://203.0.113.7:8484", "SLIPWAY_API_KEY": "slw_sk_secret", "SLIPWAY_INSECURE": "maybe"},
			ExitUsage, false, "SLIPWAY_INSECURE"},
		{"loopback needs nothing", "ls", nil, map[string]string{"SLIPWAY_URL": "http://127.0.0.1:8484", "SLIPWAY_API_KEY": "slw_sk_secret"},
			ExitOK, true, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := newNetwork(t)
			var stdout, stderr bytes.Buffer
			cfg := t.TempDir()
			env := Env{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr, ConfigDir: cfg, HTTP: n.client(),
				Getenv: func(k string) string { return tc.env[k] }}
			code := Main(context.Background(), tc.cmd, tc.args, env)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.code, stderr.String())
			}
			if got := n.requests(); (len(got) > 0) != tc.sent {
				t.Fatalf("the network saw %q", got)
			}
			if !strings.Contains(stderr.String(), tc.stderr) {
				t.Fatalf("stderr %q does not say %q", stderr.String(), tc.stderr)
			}
			if strings.Contains(stderr.String(), "slw_sk_secret") {
				t.Fatalf("stderr quotes the key: %q", stderr.String())
			}
			_, err := os.Stat(filepath.Join(cfg, "slipway", "config.json"))
			if saved := err == nil; saved != (tc.cmd == "login" && tc.code == ExitOK) {
				t.Fatalf("login settings saved: %v", saved)
			}
		})
	}
}
