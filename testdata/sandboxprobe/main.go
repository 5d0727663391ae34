// Command sandboxprobe is hostile deployment code for the sandbox tests: it
// tries what contained code must not manage and prints, per attempt,
// "label: ALLOWED ..." or "label: DENIED <why>". It never prints what it
// read, only how much.
//
//	sandboxprobe label=read:PATH label=list:DIR label=environ:PID label=unix:SOCKET label=signal:PID label=http:URL ...
//	sandboxprobe graph PROBES...   the same as a command graph: the lines in {"probes": ...}
//
// signal sends signal 0, which checks the permission and delivers nothing.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	args := os.Args[1:]
	graph := len(args) > 0 && args[0] == "graph"
	if graph {
		args = args[1:]
		_, _ = io.Copy(io.Discard, os.Stdin)
	}
	var lines []string
	for _, a := range args {
		label, rest, _ := strings.Cut(a, "=")
		op, arg, _ := strings.Cut(rest, ":")
		lines = append(lines, label+": "+probe(op, arg))
	}
	out := strings.Join(lines, "\n")
	if !graph {
		fmt.Println(out)
		return
	}
	_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"event": "values", "data": map[string]any{"probes": out}})
}

func probe(op, arg string) string {
	denied := func(err error) string { return "DENIED " + err.Error() }
	switch op {
	case "read":
		b, err := os.ReadFile(arg)
		if err != nil {
			return denied(err)
		}
		return fmt.Sprintf("ALLOWED read %d bytes", len(b))
	case "list":
		es, err := os.ReadDir(arg)
		if err != nil {
			return denied(err)
		}
		return fmt.Sprintf("ALLOWED listed %d entries", len(es))
	case "environ":
		b, err := os.ReadFile("/proc/" + arg + "/environ")
		if err != nil {
			return denied(err)
		}
		if len(b) == 0 {
			return "DENIED empty environment"
		}
		return fmt.Sprintf("ALLOWED read %d bytes of environment", len(b))
	case "unix":
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", arg)
			}}}
		resp, err := c.Post("http://admin/v1/orgs", "application/json", strings.NewReader(`{"name":"pwned"}`))
		if err != nil {
			return denied(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Sprintf("DENIED the socket answered %d", resp.StatusCode)
		}
		return fmt.Sprintf("ALLOWED the socket answered %d", resp.StatusCode)
	case "http":
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(arg)
		if err != nil {
			return denied(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Sprintf("DENIED %s answered %d", arg, resp.StatusCode)
		}
		return fmt.Sprintf("ALLOWED %s answered %d", arg, resp.StatusCode)
	case "signal":
		pid, err := strconv.Atoi(arg)
		if err != nil {
			return "bad pid"
		}
		if err := syscall.Kill(pid, 0); err != nil {
			return denied(err)
		}
		return "ALLOWED signal 0 delivered"
	}
	return "unknown probe " + op
}
