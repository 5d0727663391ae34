package controlplane

import (
	"strings"
	"testing"
)

func TestCustomHost(t *testing.T) {
	cases := map[string]string{
		"https://Agent.Example.com":        "agent.example.com",
		"agent.example.com":                "agent.example.com",
		"agent.example.com:8443/path?q=1":  "agent.example.com",
		"http://agent.example.com.":        "agent.example.com",
		"https://AGENT-A.example.com.:443": "agent-a.example.com",
		"AGENT-A.Example.COM..":            "agent-a.example.com",
		"http://[::1]:8000":                "::1",
		"":                                 "",
		"   ":                              "",
		"http://":                          "",
		"%zz":                              "",
	}
	for in, want := range cases {
		if got := CustomHost(in); got != want {
			t.Errorf("CustomHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzCustomHost: custom_url comes from API clients; whatever it holds,
// the host it yields is lowercase, has no port, path or scheme.
func FuzzCustomHost(f *testing.F) {
	for _, s := range []string{"https://a.b", "a.b:1/x", "http://[::1]:80", "::", "http://u:p@h/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h := CustomHost(s)
		if h != strings.ToLower(h) || strings.ContainsAny(h, "/?#@") || strings.HasSuffix(h, ".") {
			t.Fatalf("CustomHost(%q) = %q", s, h)
		}
	})
}
