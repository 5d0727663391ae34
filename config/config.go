// Package config parses Slipway's environment into one struct per process
// kind. Configuration comes only from the environment (systemd's
// EnvironmentFile, a container's env), so there is one place to look.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caarlos0/env/v11"

	"slipway/server/cors"
	"slipway/storage"
)

// Data names the data directory: `slipway serve` keeps its database there,
// and `slipway admin` finds the running server's socket there.
type Data struct {
	DataDir string `env:"SLIPWAY_DATA_DIR" envDefault:"./slipway-data"`
}

// Logging is how a server process logs.
type Logging struct {
	LogLevel  string `env:"SLIPWAY_LOG_LEVEL" envDefault:"info"`
	LogFormat string `env:"SLIPWAY_LOG_FORMAT" envDefault:"json"`
}

// Images is where the docker runtime keeps the Debian root filesystems its
// Python agent images are made from, between builds and installs; `slipway
// serve` and `slipway images` share it.
type Images struct {
	ImageCache string `env:"SLIPWAY_IMAGE_CACHE" envDefault:"/var/cache/slipway"`
	// PythonBaseImage and NodeBaseImage are the images the agent images
	// are built on when the engine has them or can pull them ({version}
	// is the project's python_version or node_version); debootstrap is the
	// fallback. BasePullTimeout bounds each pull (0: never pull, use a
	// base only when already present).
	PythonBaseImage string        `env:"SLIPWAY_PYTHON_BASE_IMAGE" envDefault:"python:{version}-slim-bookworm"`
	NodeBaseImage   string        `env:"SLIPWAY_NODE_BASE_IMAGE" envDefault:"node:{version}-bookworm-slim"`
	BasePullTimeout time.Duration `env:"SLIPWAY_BASE_PULL_TIMEOUT" envDefault:"5m"`
}

// ImagesCommand configures `slipway images`: the image settings, and the
// data directory, where it finds the install whose images it builds and
// prunes (their names and labels carry its id).
type ImagesCommand struct {
	Data
	Images
}

// check refuses base image templates that are not one image reference.
func (i Images) check() error {
	for _, t := range []struct{ name, v string }{{"SLIPWAY_PYTHON_BASE_IMAGE", i.PythonBaseImage}, {"SLIPWAY_NODE_BASE_IMAGE", i.NodeBaseImage}} {
		if t.v == "" || strings.ContainsAny(t.v, " \t\r\n") {
			return &Error{fmt.Sprintf("%s: %q is not an image reference (such as python:{version}-slim-bookworm)", t.name, t.v)}
		}
	}
	if i.BasePullTimeout < 0 {
		return &Error{"SLIPWAY_BASE_PULL_TIMEOUT: must not be negative"}
	}
	return nil
}

// Serve configures `slipway serve`: the control plane, the organization API,
// the runtime drivers and the proxy.
type Serve struct {
	Data
	Logging
	Images
	Limits
	Postgres
	Swarm
	Redis
	Addr            string `env:"SLIPWAY_ADDR" envDefault:"127.0.0.1:8484"`
	PublicURL       string `env:"SLIPWAY_PUBLIC_URL"`
	MasterKey       string `env:"SLIPWAY_MASTER_KEY"`
	MasterKeyFile   string `env:"SLIPWAY_MASTER_KEY_FILE"`
	BootstrapAPIKey string `env:"SLIPWAY_BOOTSTRAP_API_KEY"`
	MaxUploadMB     int    `env:"SLIPWAY_MAX_UPLOAD_MB" envDefault:"200"`
	Runtime         string `env:"SLIPWAY_RUNTIME" envDefault:"auto"`
	// TrustedProxies are the CIDRs whose X-Forwarded-For is believed when
	// recording a client's address in the audit log.
	TrustedProxies []string `env:"SLIPWAY_TRUSTED_PROXIES" envSeparator:","`
	// DefaultOrgAuditLogs enables audit logs for every non-personal
	// organization, the self-hosted switch the spec names.
	DefaultOrgAuditLogs bool `env:"DEFAULT_ORG_FEATURE_CAN_USE_AUDIT_LOGS" envDefault:"false"`
	// AuditForwardURL is where the audit forwarder delivers each window:
	// an http(s) webhook (a JSON array POST) or file:///path (JSON Lines).
	// Empty: no forwarding.
	AuditForwardURL string `env:"SLIPWAY_AUDIT_FORWARD_URL"`
	// AuditForwardInterval is the forwarding window (and how often it runs).
	AuditForwardInterval time.Duration `env:"SLIPWAY_AUDIT_FORWARD_INTERVAL" envDefault:"1h"`
	// LoginAttempts is how many failed logins one client address may make
	// per LoginWindow, and LoginAccountAttempts how many one account (an
	// email, known or not) may receive: more, so that a single address
	// cannot keep a real user's account throttled.
	LoginAttempts        int           `env:"SLIPWAY_LOGIN_ATTEMPTS" envDefault:"10"`
	LoginAccountAttempts int           `env:"SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS" envDefault:"20"`
	LoginWindow          time.Duration `env:"SLIPWAY_LOGIN_WINDOW" envDefault:"10m"`
	// HealthInterval is how often each serving agent is checked (GET /ok,
	// its container or process); engine events and process exits are
	// noticed at once besides.
	HealthInterval time.Duration `env:"SLIPWAY_HEALTH_INTERVAL" envDefault:"5s"`
	// ChartInterval is how often the dashboard's charts read each serving
	// agent's metrics (the resolution of their last hour).
	ChartInterval time.Duration `env:"SLIPWAY_CHART_INTERVAL" envDefault:"10s"`
	// SandboxUIDRange is "low-high": the uids (and gids of the same
	// numbers) the process runtime gives deployments, one each, when
	// Slipway runs as root. They must belong to no user of the host.
	SandboxUIDRange string `env:"SLIPWAY_SANDBOX_UID_RANGE" envDefault:"200000-265535"`
	// SandboxUIDLow and SandboxUIDHigh are SandboxUIDRange parsed.
	SandboxUIDLow, SandboxUIDHigh int
	// AgentLogLimitKB bounds the agent output kept per deployment; the
	// oldest lines go first.
	AgentLogLimitKB int `env:"SLIPWAY_AGENT_LOG_LIMIT_KB" envDefault:"2048"`
	// LogHeartbeat is how often a followed log stream that has nothing
	// to say sends a comment, so proxies keep it open.
	LogHeartbeat time.Duration `env:"SLIPWAY_LOG_HEARTBEAT" envDefault:"15s"`
	// AgentsURL is the separate origin deployments' agents are served on
	// (/agents/{name}/... there), AgentsAddr the extra listener for it;
	// see checkAgentsOrigin. Empty: agents are served on PublicURL.
	AgentsURL  string `env:"SLIPWAY_AGENTS_URL"`
	AgentsAddr string `env:"SLIPWAY_AGENTS_ADDR"`
	// Metrics is the Prometheus listener (metrics.go).
	Metrics Metrics
	// CORSAllowOrigins are the origins (or "*") whose pages may call every
	// deployment's agent API with an API key: a browser frontend, LangSmith
	// Studio (https://smith.langchain.com). Empty: no cross-origin access.
	CORSAllowOrigins []string `env:"SLIPWAY_CORS_ALLOW_ORIGINS" envSeparator:","`
	// LogFollowersPerCredential and LogFollowersMax cap the log streams
	// (server-sent events) followed at once by one credential and in all;
	// one more is answered 429. Each open stream holds a connection and
	// its buffers, so these bound the memory followers can take.
	LogFollowersPerCredential int `env:"SLIPWAY_LOG_FOLLOWERS_PER_CREDENTIAL" envDefault:"16"`
	LogFollowersMax           int `env:"SLIPWAY_LOG_FOLLOWERS_MAX" envDefault:"256"`
}

// Agent configures `slipway agent`: one deployment's agent server.
type Agent struct {
	Logging
	Addr        string `env:"SLIPWAY_AGENT_ADDR" envDefault:"0.0.0.0:8000"`
	DataDir     string `env:"SLIPWAY_AGENT_DATA_DIR" envDefault:"./slipway-agent-data"`
	GraphConfig string `env:"SLIPWAY_GRAPH_CONFIG"`
	Workers     int    `env:"SLIPWAY_AGENT_WORKERS" envDefault:"16"`
	MaxBodyMB   int    `env:"SLIPWAY_AGENT_MAX_BODY_MB" envDefault:"10"`
	RunTimeout  int    `env:"SLIPWAY_AGENT_RUN_TIMEOUT_SECONDS" envDefault:"600"`
	// Python is the interpreter that runs Python graphs. Empty: a .venv or
	// venv beside langgraph.json, else python3 on PATH. A runtime that
	// builds each revision's virtualenv points it there.
	Python string `env:"SLIPWAY_AGENT_PYTHON"`
	// HostProcesses is how many processes each language host runs
	// graphs in (a Python or Node process uses one core); 0 is one per
	// core the agent may use, as its memory limit allows
	// (hosts.AutoProcesses). One, as the reference servers run: on a
	// machine whose cores the agent shares, more processes trade run
	// creation's latency for throughput (BENCHMARKS.md).
	HostProcesses int `env:"SLIPWAY_AGENT_HOST_PROCESSES" envDefault:"1"`
	// HostNice lowers the language hosts' CPU priority below the agent's
	// by this many nice steps (0 to 19; 0 keeps them equal): on cores
	// that both want, the agent's API requests, and the checkpoint
	// writes the host itself waits for, go before graph code
	// (hosts.startNiced, BENCHMARKS.md).
	HostNice int `env:"SLIPWAY_AGENT_HOST_NICE" envDefault:"10"`
	// Token, when set, is a secret every request must carry in
	// X-Slipway-Agent-Token: for an agent run by hand. Its value stays
	// readable in the agent's /proc/<pid>/environ, so the process runtime
	// passes its token on a pipe instead (TokenFD).
	Token string `env:"SLIPWAY_AGENT_TOKEN"`
	// TokenFD, when set, is an inherited pipe holding the token, which
	// the agent reads to EOF and closes before it runs any graph. The
	// process runtime sets it: its agents share the host's loopback, where
	// other deployments' code could otherwise reach them without going
	// through Slipway's authentication.
	TokenFD int `env:"SLIPWAY_AGENT_TOKEN_FD"`
	// PostgresURL, when set, keeps the agent's state in that PostgreSQL
	// database instead of the bbolt file in DataDir. It holds a password:
	// the agent drops it from its environment before any graph runs.
	PostgresURL string `env:"SLIPWAY_AGENT_POSTGRES_URL"`
	AgentReplicas
}

// Error names the variable that is wrong; main exits 2 on it.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

// LoadServe parses and validates the serve configuration. environ may be nil
// (the process environment) or a map for tests.
func LoadServe(environ map[string]string) (c Serve, err error) {
	if err := parse(&c, environ); err != nil {
		return c, err
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return c, &Error{fmt.Sprintf("SLIPWAY_ADDR: %q is not host:port: %v", c.Addr, err)}
	}
	if c.DataDir == "" {
		return c, &Error{"SLIPWAY_DATA_DIR: must not be empty"}
	}
	// Resolved once, here: child processes run in other working
	// directories, so a relative data dir would name another place there.
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return c, &Error{fmt.Sprintf("SLIPWAY_DATA_DIR: %q: %v", c.DataDir, err)}
	}
	c.DataDir = abs
	if err := c.Logging.check(); err != nil {
		return c, err
	}
	if err := c.Images.check(); err != nil {
		return c, err
	}
	if err := c.Postgres.check(); err != nil {
		return c, err
	}
	if err := c.Redis.check(); err != nil {
		return c, err
	}
	if c.MaxUploadMB < 1 || c.MaxUploadMB > 10240 {
		return c, &Error{fmt.Sprintf("SLIPWAY_MAX_UPLOAD_MB: %d is outside 1..10240", c.MaxUploadMB)}
	}
	if c.BootstrapAPIKey != "" && len(c.BootstrapAPIKey) < 32 {
		return c, &Error{"SLIPWAY_BOOTSTRAP_API_KEY: must be at least 32 characters"}
	}
	if c.MasterKey != "" && c.MasterKeyFile != "" {
		return c, &Error{"SLIPWAY_MASTER_KEY and SLIPWAY_MASTER_KEY_FILE: set only one"}
	}
	if c.MasterKey != "" {
		if _, err := storage.ParseKey(c.MasterKey); err != nil {
			return c, &Error{"SLIPWAY_MASTER_KEY: " + err.Error()}
		}
	}
	// Checked here, so that a bad list is a configuration error (exit 2)
	// like every other setting's.
	if _, err := cors.FromOrigins(c.CORSAllowOrigins); err != nil {
		return c, &Error{"SLIPWAY_CORS_ALLOW_ORIGINS: " + err.Error()}
	}
	switch c.Runtime {
	case "auto", "docker", "swarm", "process", "fake":
	default:
		return c, &Error{fmt.Sprintf("SLIPWAY_RUNTIME: %q is not one of auto, docker, swarm, process (or fake, for tests)", c.Runtime)}
	}
	if err := c.Swarm.check(c.Runtime); err != nil {
		return c, err
	}
	for _, p := range c.TrustedProxies {
		if _, err := netip.ParsePrefix(strings.TrimSpace(p)); err != nil {
			if _, err := netip.ParseAddr(strings.TrimSpace(p)); err != nil {
				return c, &Error{fmt.Sprintf("SLIPWAY_TRUSTED_PROXIES: %q is not a CIDR or an IP address", p)}
			}
		}
	}
	if err := checkForwardURL(c.AuditForwardURL); err != nil {
		return c, err
	}
	if c.AuditForwardInterval < time.Second || c.AuditForwardInterval > 24*time.Hour {
		return c, &Error{fmt.Sprintf("SLIPWAY_AUDIT_FORWARD_INTERVAL: %s is outside 1s..24h", c.AuditForwardInterval)}
	}
	if c.AgentLogLimitKB < 16 || c.AgentLogLimitKB > 1<<20 {
		return c, &Error{fmt.Sprintf("SLIPWAY_AGENT_LOG_LIMIT_KB: %d is outside 16..1048576", c.AgentLogLimitKB)}
	}
	if c.LogHeartbeat < 100*time.Millisecond || c.LogHeartbeat > 10*time.Minute {
		return c, &Error{fmt.Sprintf("SLIPWAY_LOG_HEARTBEAT: %s is outside 100ms..10m", c.LogHeartbeat)}
	}
	if c.LogFollowersPerCredential < 1 || c.LogFollowersPerCredential > 10000 {
		return c, &Error{fmt.Sprintf("SLIPWAY_LOG_FOLLOWERS_PER_CREDENTIAL: %d is outside 1..10000", c.LogFollowersPerCredential)}
	}
	if c.LogFollowersMax < 1 || c.LogFollowersMax > 100000 {
		return c, &Error{fmt.Sprintf("SLIPWAY_LOG_FOLLOWERS_MAX: %d is outside 1..100000", c.LogFollowersMax)}
	}
	if c.LoginAttempts < 1 || c.LoginAttempts > 10000 {
		return c, &Error{fmt.Sprintf("SLIPWAY_LOGIN_ATTEMPTS: %d is outside 1..10000", c.LoginAttempts)}
	}
	if c.LoginAccountAttempts < 1 || c.LoginAccountAttempts > 10000 {
		return c, &Error{fmt.Sprintf("SLIPWAY_LOGIN_ACCOUNT_ATTEMPTS: %d is outside 1..10000", c.LoginAccountAttempts)}
	}
	if c.HealthInterval < time.Second || c.HealthInterval > 10*time.Minute {
		return c, &Error{fmt.Sprintf("SLIPWAY_HEALTH_INTERVAL: %s is outside 1s..10m", c.HealthInterval)}
	}
	if c.ChartInterval < time.Second || c.ChartInterval > time.Minute {
		return c, &Error{fmt.Sprintf("SLIPWAY_CHART_INTERVAL: %s is outside 1s..1m", c.ChartInterval)}
	}
	if c.LoginWindow < time.Second || c.LoginWindow > 24*time.Hour {
		return c, &Error{fmt.Sprintf("SLIPWAY_LOGIN_WINDOW: %s is outside 1s..24h", c.LoginWindow)}
	}
	if c.SandboxUIDLow, c.SandboxUIDHigh, err = parseUIDRange(c.SandboxUIDRange); err != nil {
		return c, err
	}
	if err := c.Limits.check(); err != nil {
		return c, err
	}
	if c.PublicURL == "" {
		host, port, _ := net.SplitHostPort(c.Addr)
		if host == "" || host == "0.0.0.0" || host == "::" {
			host = "127.0.0.1"
		}
		c.PublicURL = "http://" + net.JoinHostPort(host, port)
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if !strings.HasPrefix(c.PublicURL, "http://") && !strings.HasPrefix(c.PublicURL, "https://") {
		return c, &Error{fmt.Sprintf("SLIPWAY_PUBLIC_URL: %q must start with http:// or https://", c.PublicURL)}
	}
	if err := c.Metrics.check(); err != nil {
		return c, err
	}
	if err := c.checkAgentsOrigin(); err != nil {
		return c, err
	}
	return c, nil
}

// checkForwardURL accepts an http(s) URL with a host, or file:///absolute/path.
func checkForwardURL(raw string) error {
	if raw == "" {
		return nil
	}
	bad := func(why string) error {
		return &Error{fmt.Sprintf("SLIPWAY_AUDIT_FORWARD_URL: %q %s", raw, why)}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return bad("is not a URL")
	}
	switch u.Scheme {
	case "http", "https":
		if u.Host == "" {
			return bad("has no host")
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return bad("must be file:///absolute/path (no host)")
		}
		if u.Path == "" || u.Path[0] != '/' || strings.HasSuffix(u.Path, "/") {
			return bad("must name a file by absolute path: file:///var/log/slipway-audit.jsonl")
		}
	default:
		return bad("must be an http://, https:// or file:/// URL")
	}
	return nil
}

// parseUIDRange reads "low-high". The range stays clear of system users
// (below 1000), of nobody (65534) and of the invalid uid (2^32-1), and
// holds at least one uid.
func parseUIDRange(raw string) (lo, hi int, err error) {
	bad := func(why string) error {
		return &Error{fmt.Sprintf("SLIPWAY_SANDBOX_UID_RANGE: %q %s", raw, why)}
	}
	a, b, ok := strings.Cut(strings.TrimSpace(raw), "-")
	if !ok {
		return 0, 0, bad("is not low-high, e.g. 200000-265535")
	}
	l, err1 := strconv.ParseUint(strings.TrimSpace(a), 10, 32)
	h, err2 := strconv.ParseUint(strings.TrimSpace(b), 10, 32)
	switch {
	case err1 != nil || err2 != nil:
		return 0, 0, bad("is not low-high with two unsigned 32-bit numbers")
	case l < 1000:
		return 0, 0, bad("starts below 1000, among the system's users")
	case h < l:
		return 0, 0, bad("ends before it starts")
	case h >= 1<<32-1:
		return 0, 0, bad("includes 4294967295, which is no uid")
	case l <= 65534 && 65534 <= h:
		return 0, 0, bad("includes 65534 (nobody)")
	}
	return int(l), int(h), nil
}

// Admin configures `slipway admin`, which talks to the server running on
// the same data directory.
type Admin struct {
	Data
}

// LoadAdmin parses the admin configuration. environ may be nil (the process
// environment) or a map for tests.
func LoadAdmin(environ map[string]string) (c Admin, err error) {
	return c, parse(&c, environ)
}

// LoadImages parses the configuration of `slipway images`.
func LoadImages(environ map[string]string) (c ImagesCommand, err error) {
	if err := parse(&c, environ); err != nil {
		return c, err
	}
	return c, c.Images.check()
}

// LoadAgent parses and validates the agent configuration.
func LoadAgent(environ map[string]string) (Agent, error) {
	var c Agent
	if err := parse(&c, environ); err != nil {
		return c, err
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return c, &Error{fmt.Sprintf("SLIPWAY_AGENT_ADDR: %q is not host:port: %v", c.Addr, err)}
	}
	if c.Workers < 1 || c.Workers > 1024 {
		return c, &Error{fmt.Sprintf("SLIPWAY_AGENT_WORKERS: %d is outside 1..1024", c.Workers)}
	}
	if c.MaxBodyMB < 1 {
		return c, &Error{"SLIPWAY_AGENT_MAX_BODY_MB: must be at least 1"}
	}
	if c.RunTimeout < 1 {
		return c, &Error{"SLIPWAY_AGENT_RUN_TIMEOUT_SECONDS: must be at least 1"}
	}
	if c.HostNice < 0 || c.HostNice > 19 {
		return c, &Error{fmt.Sprintf("SLIPWAY_AGENT_HOST_NICE: %d is outside 0..19", c.HostNice)}
	}
	if c.TokenFD != 0 && c.TokenFD < 3 {
		return c, &Error{fmt.Sprintf("SLIPWAY_AGENT_TOKEN_FD: %d is stdin, stdout or stderr; the token's pipe is 3 or above", c.TokenFD)}
	}
	if err := c.AgentReplicas.check(c.PostgresURL); err != nil {
		return c, err
	}
	return c, c.Logging.check()
}

func parse(v any, environ map[string]string) error {
	opts := env.Options{}
	if environ != nil {
		opts.Environment = environ
	}
	if err := env.ParseWithOptions(v, opts); err != nil {
		var agg env.AggregateError
		if errors.As(err, &agg) && len(agg.Errors) > 0 {
			err = agg.Errors[0]
		}
		// env reports the Go field; users know the variable.
		var pe env.ParseError
		if errors.As(err, &pe) {
			if f, ok := reflect.TypeOf(v).Elem().FieldByName(pe.Name); ok {
				return &Error{fmt.Sprintf("%s: %v", f.Tag.Get("env"), pe.Err)}
			}
		}
		return &Error{err.Error()}
	}
	return nil
}

func (l Logging) check() error {
	switch level := l.LogLevel; level {
	case "trace", "debug", "info", "warn", "error":
	default:
		return &Error{fmt.Sprintf("SLIPWAY_LOG_LEVEL: %q is not one of trace, debug, info, warn, error", level)}
	}
	switch format := l.LogFormat; format {
	case "json", "console":
	default:
		return &Error{fmt.Sprintf("SLIPWAY_LOG_FORMAT: %q is not one of json, console", format)}
	}
	return nil
}

// Prefixes returns the trusted proxies as prefixes (a bare IP is a /32 or /128).
func (c Serve) Prefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range c.TrustedProxies {
		p = strings.TrimSpace(p)
		if pre, err := netip.ParsePrefix(p); err == nil {
			out = append(out, pre.Masked())
		} else if a, err := netip.ParseAddr(p); err == nil {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	return out
}
