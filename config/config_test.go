package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestLoadServe(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		wantErr string
		check   func(t *testing.T, c Serve)
	}{
		{name: "defaults", env: map[string]string{}, check: func(t *testing.T, c Serve) {
			if c.Addr != "127.0.0.1:8484" || c.PublicURL != "http://127.0.0.1:8484" || c.MaxUploadMB != 200 {
				t.Errorf("got %+v", c)
			}
		}},
		{name: "public url from wildcard addr", env: map[string]string{"SLIPWAY_ADDR": "0.0.0.0:9000"}, check: func(t *testing.T, c Serve) {
			if c.PublicURL != "http://127.0.0.1:9000" {
				t.Errorf("public url %q", c.PublicURL)
			}
		}},
		{name: "relative data dir made absolute", env: map[string]string{"SLIPWAY_DATA_DIR": "./some/data"}, check: func(t *testing.T, c Serve) {
			wd, _ := os.Getwd()
			if c.DataDir != filepath.Join(wd, "some", "data") {
				t.Errorf("data dir %q, want it absolute under %q", c.DataDir, wd)
			}
		}},
		{name: "bad int", env: map[string]string{"SLIPWAY_MAX_UPLOAD_MB": "lots"}, wantErr: "SLIPWAY_MAX_UPLOAD_MB"},
		{name: "CORS origin with a path", env: map[string]string{"SLIPWAY_CORS_ALLOW_ORIGINS": "https://a.example/app"}, wantErr: "SLIPWAY_CORS_ALLOW_ORIGINS"},
		{name: "bad addr", env: map[string]string{"SLIPWAY_ADDR": "nope"}, wantErr: "SLIPWAY_ADDR"},
		{name: "bad level", env: map[string]string{"SLIPWAY_LOG_LEVEL": "loud"}, wantErr: "SLIPWAY_LOG_LEVEL"},
		{name: "bad format", env: map[string]string{"SLIPWAY_LOG_FORMAT": "xml"}, wantErr: "SLIPWAY_LOG_FORMAT"},
		{name: "short bootstrap", env: map[string]string{"SLIPWAY_BOOTSTRAP_API_KEY": "short"}, wantErr: "SLIPWAY_BOOTSTRAP_API_KEY"},
		{name: "bad runtime", env: map[string]string{"SLIPWAY_RUNTIME": "k8s"}, wantErr: "SLIPWAY_RUNTIME"},
		{name: "bad bool", env: map[string]string{"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS": "maybe"}, wantErr: "DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS"},
		{name: "bad public url", env: map[string]string{"SLIPWAY_PUBLIC_URL": "ftp://x"}, wantErr: "SLIPWAY_PUBLIC_URL"},
		{name: "login throttle defaults", env: map[string]string{}, check: func(t *testing.T, c Serve) {
			if c.LoginAttempts != 10 || c.LoginAccountAttempts != 20 || c.LoginWindow.Minutes() != 10 {
				t.Errorf("login throttle %d/%d per %s", c.LoginAttempts, c.LoginAccountAttempts, c.LoginWindow)
			}
		}},
		{name: "zero login attempts", env: map[string]string{"SLIPWAY_LOGIN_ATTEMPTS": "0"}, wantErr: "SLIPWAY_LOGIN_ATTEMPTS"},
		{name: "too many account attempts", env: map[string]string{"SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS": "100000"}, wantErr: "SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS"},
		{name: "short login window", env: map[string]string{"SLIPWAY_LOGIN_WINDOW": "10ms"}, wantErr: "SLIPWAY_LOGIN_WINDOW"},
		{name: "bad login window", env: map[string]string{"SLIPWAY_LOGIN_WINDOW": "soon"}, wantErr: "SLIPWAY_LOGIN_WINDOW"},
		{name: "agent log defaults", env: map[string]string{}, check: func(t *testing.T, c Serve) {
			if c.AgentLogLimitKB != 2048 || c.LogHeartbeat.Seconds() != 15 {
				t.Errorf("agent log %d KiB, heartbeat %s", c.AgentLogLimitKB, c.LogHeartbeat)
			}
		}},
		{name: "resource limit defaults", env: map[string]string{}, check: func(t *testing.T, c Serve) {
			if c.DefaultMemoryLimitMB != 2048 || c.DefaultCPULimit != 0 || c.PidsLimit != 1024 {
				t.Errorf("limits %+v", c.Limits)
			}
		}},
		{name: "no default limits", env: map[string]string{"SLIPWAY_DEFAULT_MEMORY_LIMIT_MB": "0", "SLIPWAY_PIDS_LIMIT": "0", "SLIPWAY_DEFAULT_CPU_LIMIT": "1.5"},
			check: func(t *testing.T, c Serve) {
				if c.DefaultMemoryLimitMB != 0 || c.PidsLimit != 0 || c.DefaultCPULimit != 1.5 {
					t.Errorf("limits %+v", c.Limits)
				}
			}},
		{name: "tiny memory limit", env: map[string]string{"SLIPWAY_DEFAULT_MEMORY_LIMIT_MB": "8"}, wantErr: "SLIPWAY_DEFAULT_MEMORY_LIMIT_MB"},
		{name: "negative cpu limit", env: map[string]string{"SLIPWAY_DEFAULT_CPU_LIMIT": "-1"}, wantErr: "SLIPWAY_DEFAULT_CPU_LIMIT"},
		{name: "NaN cpu limit", env: map[string]string{"SLIPWAY_DEFAULT_CPU_LIMIT": "NaN"}, wantErr: "SLIPWAY_DEFAULT_CPU_LIMIT"},
		{name: "tiny pids limit", env: map[string]string{"SLIPWAY_PIDS_LIMIT": "3"}, wantErr: "SLIPWAY_PIDS_LIMIT"},
		{name: "tiny agent log", env: map[string]string{"SLIPWAY_AGENT_LOG_LIMIT_KB": "1"}, wantErr: "SLIPWAY_AGENT_LOG_LIMIT_KB"},
		{name: "fast heartbeat", env: map[string]string{"SLIPWAY_LOG_HEARTBEAT": "1ms"}, wantErr: "SLIPWAY_LOG_HEARTBEAT"},
		{name: "log follower caps", env: map[string]string{}, check: func(t *testing.T, c Serve) {
			if c.LogFollowersPerCredential != 16 || c.LogFollowersMax != 256 {
				t.Errorf("followers %d per credential, %d in all", c.LogFollowersPerCredential, c.LogFollowersMax)
			}
		}},
		{name: "no followers per credential", env: map[string]string{"SLIPWAY_LOG_FOLLOWERS_PER_CREDENTIAL": "0"}, wantErr: "SLIPWAY_LOG_FOLLOWERS_PER_CREDENTIAL"},
		{name: "too many followers", env: map[string]string{"SLIPWAY_LOG_FOLLOWERS_MAX": "1000000"}, wantErr: "SLIPWAY_LOG_FOLLOWERS_MAX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := LoadServe(tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want mention of %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, c)
		})
	}
}

func TestLoadAgent(t *testing.T) {
	if _, err := LoadAgent(map[string]string{"SLIPWAY_AGENT_WORKERS": "0"}); err == nil || !strings.Contains(err.Error(), "SLIPWAY_AGENT_WORKERS") {
		t.Fatalf("err = %v", err)
	}
	c, err := LoadAgent(map[string]string{})
	if err != nil || c.Addr != "0.0.0.0:8000" {
		t.Fatalf("%v %+v", err, c)
	}
	if _, err := LoadAgent(map[string]string{"SLIPWAY_AGENT_TOKEN_FD": "1"}); err == nil || !strings.Contains(err.Error(), "SLIPWAY_AGENT_TOKEN_FD") {
		t.Fatalf("token on stdout: err = %v", err)
	}
	if c, err := LoadAgent(map[string]string{"SLIPWAY_AGENT_TOKEN_FD": "3"}); err != nil || c.TokenFD != 3 {
		t.Fatalf("token on fd 3: %v %+v", err, c)
	}
	if c, err := LoadAgent(map[string]string{"SLIPWAY_AGENT_POSTGRES_URL": "postgres://u:p@db/agent"}); err != nil || c.PostgresURL != "postgres://u:p@db/agent" {
		t.Fatalf("PostgreSQL URL: %v %q", err, c.PostgresURL)
	}
	if c.HostNice != 10 {
		t.Fatalf("hosts' default nice %d; want 10", c.HostNice)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"0", true}, {"19", true}, {"-1", false}, {"20", false}, {"low", false}} {
		c, err := LoadAgent(map[string]string{"SLIPWAY_AGENT_HOST_NICE": tc.value})
		if tc.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "SLIPWAY_AGENT_HOST_NICE")) {
			t.Fatalf("SLIPWAY_AGENT_HOST_NICE=%s: err = %v", tc.value, err)
		}
		if tc.ok && strconv.Itoa(c.HostNice) != tc.value {
			t.Fatalf("SLIPWAY_AGENT_HOST_NICE=%s: %d", tc.value, c.HostNice)
		}
	}
}

func TestSandboxUIDRange(t *testing.T) {
	tests := []struct {
		raw     string
		lo, hi  int
		wantErr string
	}{
		{raw: "", lo: 200000, hi: 265535}, // unset: the default
		{raw: "300000-300000", lo: 300000, hi: 300000},
		{raw: " 1000 - 1999 ", lo: 1000, hi: 1999},
		{raw: "100000-165533", lo: 100000, hi: 165533},
		{raw: "200000", wantErr: "is not low-high"},
		{raw: "a-b", wantErr: "two unsigned 32-bit numbers"},
		{raw: "-5-10", wantErr: "is not low-high with two"},
		{raw: "0-100", wantErr: "below 1000"},
		{raw: "999-5000", wantErr: "below 1000"},
		{raw: "5000-4000", wantErr: "ends before it starts"},
		{raw: "60000-70000", wantErr: "65534"},
		{raw: "4294967000-4294967295", wantErr: "4294967295"},
		{raw: "1-99999999999", wantErr: "32-bit"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			env := map[string]string{}
			if tt.raw != "" {
				env["SLIPWAY_SANDBOX_UID_RANGE"] = tt.raw
			}
			c, err := LoadServe(env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), "SLIPWAY_SANDBOX_UID_RANGE") || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want SLIPWAY_SANDBOX_UID_RANGE and %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.SandboxUIDLow != tt.lo || c.SandboxUIDHigh != tt.hi {
				t.Fatalf("range %d-%d, want %d-%d", c.SandboxUIDLow, c.SandboxUIDHigh, tt.lo, tt.hi)
			}
		})
	}
}

// TestLoadAdminAndImages: `slipway admin` and `slipway images` read the
// same variables, with the same defaults, as `slipway serve`.
func TestLoadAdminAndImages(t *testing.T) {
	tests := []struct {
		name             string
		env              map[string]string
		wantDir, wantImg string
	}{
		{"defaults", map[string]string{}, "./slipway-data", "/var/cache/slipway"},
		{"empty is the default", map[string]string{"SLIPWAY_DATA_DIR": "", "SLIPWAY_IMAGE_CACHE": ""}, "./slipway-data", "/var/cache/slipway"},
		{"set", map[string]string{"SLIPWAY_DATA_DIR": "/srv/slipway", "SLIPWAY_IMAGE_CACHE": "/tmp/cache"}, "/srv/slipway", "/tmp/cache"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := LoadAdmin(tc.env)
			if err != nil || a.DataDir != tc.wantDir {
				t.Errorf("admin: %+v, %v; want data dir %q", a, err, tc.wantDir)
			}
			i, err := LoadImages(tc.env)
			if err != nil || i.ImageCache != tc.wantImg {
				t.Errorf("images: %+v, %v; want cache %q", i, err, tc.wantImg)
			}
			s, err := LoadServe(tc.env)
			if err != nil || s.ImageCache != tc.wantImg {
				t.Errorf("serve: %+v, %v; want cache %q", s, err, tc.wantImg)
			}
		})
	}
}

// TestBaseImageSettings: the official images by default, the operator's
// templates, and refusals of what is not one image reference or a
// negative pull timeout, for `slipway serve` and `slipway images` alike.
func TestBaseImageSettings(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		py, node   string
		timeout    time.Duration
		wantErrSub string
	}{
		{"defaults", map[string]string{}, "python:{version}-slim-bookworm", "node:{version}-bookworm-slim", 5 * time.Minute, ""},
		{"set", map[string]string{"SLIPWAY_PYTHON_BASE_IMAGE": "127.0.0.1:5000/library/python:{version}-slim-bookworm", "SLIPWAY_NODE_BASE_IMAGE": "mirror/node:{version}", "SLIPWAY_BASE_PULL_TIMEOUT": "0"},
			"127.0.0.1:5000/library/python:{version}-slim-bookworm", "mirror/node:{version}", 0, ""},
		{"two words", map[string]string{"SLIPWAY_PYTHON_BASE_IMAGE": "python:3 --privileged"}, "", "", 0, "SLIPWAY_PYTHON_BASE_IMAGE"},
		{"negative timeout", map[string]string{"SLIPWAY_BASE_PULL_TIMEOUT": "-1s"}, "", "", 0, "SLIPWAY_BASE_PULL_TIMEOUT"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			i, err := LoadImages(tc.env)
			s, serr := LoadServe(tc.env)
			if tc.wantErrSub != "" {
				if err == nil || serr == nil || !strings.Contains(err.Error(), tc.wantErrSub) || !strings.Contains(serr.Error(), tc.wantErrSub) {
					t.Fatalf("images: %v; serve: %v; want an error naming %s", err, serr, tc.wantErrSub)
				}
				return
			}
			if err != nil || serr != nil {
				t.Fatalf("images: %v; serve: %v", err, serr)
			}
			for _, got := range []Images{i.Images, s.Images} {
				if got.PythonBaseImage != tc.py || got.NodeBaseImage != tc.node || got.BasePullTimeout != tc.timeout {
					t.Errorf("got %+v", got)
				}
			}
		})
	}
}
