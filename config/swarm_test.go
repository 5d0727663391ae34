package config

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSwarmSettings(t *testing.T) {
	pwFile := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pwFile, []byte("pw-from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		env     map[string]string
		wantErr string // a part of the error; "" for none
		wantPW  string
		// wantRate is SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA; 0: the default.
		wantRate float64
	}{
		{name: "swarm with a registry", env: map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": "127.0.0.1:5000"}},
		{name: "swarm without a registry", env: map[string]string{"SLIPWAY_RUNTIME": "swarm"}, wantErr: "SLIPWAY_REGISTRY"},
		{name: "a scheme", env: map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": "http://r:5000"}, wantErr: "not a registry address"},
		{name: "docker ignores the registry", env: map[string]string{"SLIPWAY_RUNTIME": "docker"}},
		{name: "password from a file", env: map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": "r:5000",
			"SLIPWAY_REGISTRY_USERNAME": "u", "SLIPWAY_REGISTRY_PASSWORD_FILE": pwFile}, wantPW: "pw-from-file"},
		{name: "both password settings", env: map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": "r:5000",
			"SLIPWAY_REGISTRY_USERNAME": "u", "SLIPWAY_REGISTRY_PASSWORD": "pw-s3cret", "SLIPWAY_REGISTRY_PASSWORD_FILE": pwFile}, wantErr: "set only one"},
		{name: "a username without a password", env: map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": "r:5000",
			"SLIPWAY_REGISTRY_USERNAME": "u"}, wantErr: "set both or neither"},
		{name: "an API replica's request rate", env: map[string]string{"SLIPWAY_RUNTIME": "swarm", "SLIPWAY_REGISTRY": "r:5000",
			"SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA": "12.5"}, wantRate: 12.5},
		{name: "a zero request rate", env: map[string]string{"SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA": "0"}, wantErr: "a number above 0"},
		{name: "a negative request rate", env: map[string]string{"SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA": "-3"}, wantErr: "a number above 0"},
		{name: "not a number", env: map[string]string{"SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA": "NaN"}, wantErr: "SLIPWAY_SWARM_API_REQUESTS_PER_REPLICA"},
		{name: "an unknown runtime", env: map[string]string{"SLIPWAY_RUNTIME": "k8s"}, wantErr: "auto, docker, swarm, process"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := LoadServe(tc.env)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "pw-s3cret") {
					t.Fatalf("error %v, want one saying %q (without the password)", err, tc.wantErr)
				}
				return
			}
			if err != nil || c.RegistryPassword != tc.wantPW {
				t.Fatalf("%v, password %q", err, c.RegistryPassword)
			}
			if want := cmp.Or(tc.wantRate, 100); c.APIRequestsPerReplica != want {
				t.Fatalf("API requests per replica %g, want %g", c.APIRequestsPerReplica, want)
			}
		})
	}
}
