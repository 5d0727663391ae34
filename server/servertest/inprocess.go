package servertest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/rs/zerolog"

	"slipway/config"
)

// App is a control plane running in the test's own process (server.App):
// an HTTP handler and what stops it.
type App interface {
	Handler() http.Handler
	Close() error
}

// Factory builds an App from env, the SLIPWAY_* variables a `slipway
// serve` process would be given, logging to logs. Package apptest has the
// one that wires server.New; it lives apart because servertest must not
// import the server packages whose tests use it.
type Factory func(env map[string]string, logs io.Writer) (App, error)

// ServeFactory is the Factory of an App that build makes from the
// configuration `slipway serve` would load from env, with a logger like
// its own (JSON lines at SLIPWAY_LOG_LEVEL) writing to logs. build is
// server.New (package apptest; package server's own tests pass it too).
func ServeFactory(build func(cfg config.Serve, log zerolog.Logger) (App, error)) Factory {
	return func(env map[string]string, logs io.Writer) (App, error) {
		cfg, err := config.LoadServe(env)
		if err != nil {
			return nil, fmt.Errorf("configuration: %w", err)
		}
		lvl, err := zerolog.ParseLevel(cfg.LogLevel)
		if err != nil {
			lvl = zerolog.InfoLevel
		}
		return build(cfg, zerolog.New(logs).Level(lvl).With().Timestamp().Logger())
	}
}

// StartWith is Start backed by an App that factory builds in this process
// instead of a `slipway serve` process: the same Server (URL, Key, DataDir,
// Do, Logs, Stop, Restart), none of the build and exec. Restart closes the
// App and builds a new one on the same data directory and address.
func StartWith(t testing.TB, env map[string]string, factory Factory) *Server {
	t.Helper()
	s := StartUnmanagedWith(t, env, factory)
	t.Cleanup(s.Stop)
	return s
}

// StartUnmanagedWith is StartWith for servers the caller stops (benchmarks).
func StartUnmanagedWith(t testing.TB, env map[string]string, factory Factory) *Server {
	t.Helper()
	s := &Server{Env: unmanagedEnv(t, env), t: t, factory: factory}
	if s.Env["SLIPWAY_RUNTIME"] == "" {
		s.Env["SLIPWAY_RUNTIME"] = "fake"
	}
	// The address is bound before the App is built: the configuration
	// names it (own hosts, the docker runtime's API address), and a
	// Restart must keep it.
	addr := s.Env["SLIPWAY_ADDR"]
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s.Env["SLIPWAY_ADDR"] = ln.Addr().String()
	s.DataDir = s.Env["SLIPWAY_DATA_DIR"]
	s.URL = "http://" + s.Env["SLIPWAY_ADDR"]
	s.startInProcess(ln)
	return s
}

// startInProcess builds the App and serves it on ln (a fresh listener on
// the server's address when nil).
func (s *Server) startInProcess(ln net.Listener) {
	t := s.t
	t.Helper()
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", s.Env["SLIPWAY_ADDR"]); err != nil {
			t.Fatal(err)
		}
	}
	s.logs = &SyncBuffer{}
	app, err := s.factory(s.Env, s.logs)
	if err != nil {
		ln.Close()
		t.Fatalf("slipway did not start: %v\n%s", err, s.logs.String())
	}
	s.app = app
	s.hs = httptest.NewUnstartedServer(app.Handler())
	s.hs.Listener.Close()
	s.hs.Listener = ln
	s.hs.Start()
	if addr := s.Env["SLIPWAY_AGENTS_ADDR"]; addr != "" {
		// The agents' own origin, served as `slipway serve` serves it.
		ag, ok := app.(interface{ AgentsHandler() http.Handler })
		if !ok {
			t.Fatal("servertest: SLIPWAY_AGENTS_ADDR is set but the App has no AgentsHandler")
		}
		aln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s.agentsHS = httptest.NewUnstartedServer(ag.AgentsHandler())
		s.agentsHS.Listener.Close()
		s.agentsHS.Listener = aln
		s.agentsHS.Start()
	}
	checkAPI(s.URL)
	s.afterStart()
}

// stopInProcess closes the App (which ends its requests and background
// work) and then the HTTP server.
func (s *Server) stopInProcess() {
	if s.app == nil {
		return
	}
	if err := s.app.Close(); err != nil {
		s.t.Errorf("close slipway: %v", err)
	}
	s.hs.Close()
	if s.agentsHS != nil {
		s.agentsHS.Close()
	}
	s.app, s.hs, s.agentsHS = nil, nil, nil
}
