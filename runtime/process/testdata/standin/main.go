// Command standin plays `slipway agent` for the process driver's tests: it
// serves GET /ok on SLIPWAY_AGENT_ADDR, holds an exclusive lock on its data
// directory as the agent's database does, and misbehaves as its graph
// configuration asks: {"unhealthy": true} never answers 200, {"crash": true}
// exits after its first answer.
package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != "agent" {
		os.Exit(2)
	}
	var cfg struct {
		Unhealthy bool   `json:"unhealthy"`
		Crash     bool   `json:"crash"`
		Name      string `json:"name"`
	}
	raw, err := os.ReadFile(os.Getenv("SLIPWAY_GRAPH_CONFIG"))
	if err != nil || json.Unmarshal(raw, &cfg) != nil {
		fmt.Fprintln(os.Stderr, "bad graph config")
		os.Exit(1)
	}
	lock, err := os.OpenFile(filepath.Join(os.Getenv("SLIPWAY_AGENT_DATA_DIR"), "agent.db"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		os.Exit(1)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		fmt.Fprintln(os.Stderr, "database is locked by another agent")
		os.Exit(3)
	}
	http.HandleFunc("/ok", func(w http.ResponseWriter, r *http.Request) {
		if cfg.Unhealthy {
			w.WriteHeader(500)
			return
		}
		fmt.Fprintf(w, `{"ok":true,"name":%q,"secret_seen":%t}`, cfg.Name, os.Getenv("MY_SECRET") != "")
		if cfg.Crash {
			go func() { time.Sleep(50 * time.Millisecond); os.Exit(1) }()
		}
	})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() { <-sig; os.Exit(0) }()
	if err := http.ListenAndServe(os.Getenv("SLIPWAY_AGENT_ADDR"), nil); err != nil {
		os.Exit(1)
	}
}
