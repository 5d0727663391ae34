package config

import (
	"strings"
	"testing"
)

func TestAgentsOrigin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    string // AgentsURL after loading
		wantErr string
	}{
		{"unset", map[string]string{}, "", ""},
		{"host name", map[string]string{"SLIPWAY_PUBLIC_URL": "https://slipway.example.com", "SLIPWAY_AGENTS_URL": "https://agents.example.com/"}, "https://agents.example.com", ""},
		{"another port", map[string]string{"SLIPWAY_AGENTS_URL": "http://127.0.0.1:8485"}, "http://127.0.0.1:8485", ""},
		{"listener names the URL", map[string]string{"SLIPWAY_AGENTS_ADDR": "0.0.0.0:8485"}, "http://127.0.0.1:8485", ""},
		{"listener and URL", map[string]string{"SLIPWAY_AGENTS_ADDR": "127.0.0.1:8485", "SLIPWAY_AGENTS_URL": "https://agents.example.com"}, "https://agents.example.com", ""},
		{"the public origin", map[string]string{"SLIPWAY_PUBLIC_URL": "https://slipway.example.com", "SLIPWAY_AGENTS_URL": "https://SLIPWAY.example.com.:443"}, "", "SLIPWAY_AGENTS_URL"},
		{"the default public origin", map[string]string{"SLIPWAY_AGENTS_URL": "http://127.0.0.1:8484"}, "", "SLIPWAY_AGENTS_URL"},
		{"a path", map[string]string{"SLIPWAY_AGENTS_URL": "https://agents.example.com/agents"}, "", "origin only"},
		{"credentials", map[string]string{"SLIPWAY_AGENTS_URL": "https://u:p@agents.example.com"}, "", "origin only"},
		{"no scheme", map[string]string{"SLIPWAY_AGENTS_URL": "agents.example.com"}, "", "http:// or https://"},
		{"no host", map[string]string{"SLIPWAY_AGENTS_URL": "https://"}, "", "no host"},
		{"bad listener", map[string]string{"SLIPWAY_AGENTS_ADDR": "8485"}, "", "SLIPWAY_AGENTS_ADDR"},
		{"the main listener", map[string]string{"SLIPWAY_AGENTS_ADDR": "127.0.0.1:8484"}, "", "SLIPWAY_AGENTS_ADDR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadServe(tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.AgentsURL != tc.want {
				t.Errorf("AgentsURL %q, want %q", c.AgentsURL, tc.want)
			}
		})
	}
}
