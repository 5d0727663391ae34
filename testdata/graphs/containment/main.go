// Command containment is a command graph that tries to break out of its
// deployment, for the docker runtime's containment tests. Each attempt's
// result is "blocked: <why>" or "ESCAPED: <what it got>"; a control
// attempt that must work ("ok: ..." or "FAILED: ...") shows that the probe
// itself works, so that a blocked attempt means something.
//
// As a graph it reads the run request on stdin; the targets are in its
// input (paths and addresses on Slipway's host, which the test knows):
//
//	{"master_key", "admin_socket", "data_dir", "api_port", "slipway_pid",
//	 "other_agent" (host:port of another deployment's agent),
//	 "other_secret" (a secret value of that deployment)}
//
// and it answers with one values event {"probe": {attempt: result}}.
// `containment --report JSON` does the same with the targets given as an
// argument and prints the results as one JSON line (for init containers
// and sidecars, whose output the test reads from the engine).
package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type targets struct {
	MasterKey   string  `json:"master_key"`
	AdminSocket string  `json:"admin_socket"`
	DataDir     string  `json:"data_dir"`
	APIPort     float64 `json:"api_port"`
	SlipwayPID  float64 `json:"slipway_pid"`
	OtherAgent  string  `json:"other_agent"`
	OtherSecret string  `json:"other_secret"`
	// OwnAgent is checked as a control: the probe must reach it.
	OwnAgent string `json:"own_agent"`
}

const timeout = 2 * time.Second

func main() {
	var t targets
	if len(os.Args) == 3 && os.Args[1] == "--report" {
		if err := json.Unmarshal([]byte(os.Args[2]), &t); err != nil {
			fmt.Fprintln(os.Stderr, "containment: bad targets:", err)
			os.Exit(2)
		}
		b, _ := json.Marshal(probe(t))
		fmt.Println(string(b))
		return
	}
	var req struct {
		Input targets `json:"input"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "containment: bad request:", err)
		os.Exit(2)
	}
	b, _ := json.Marshal(map[string]any{"event": "values", "data": map[string]any{"probe": probe(req.Input)}})
	fmt.Println(string(b))
}

func blocked(err error) string { return "blocked: " + err.Error() }

// must reports an attempt that has to fail: err nil means it worked.
func must(err error, got string) string {
	if err != nil {
		return blocked(err)
	}
	return "ESCAPED: " + got
}

func probe(t targets) map[string]string {
	r := map[string]string{}
	port := strconv.Itoa(int(t.APIPort))

	// Slipway's data dir, at its path on the host.
	b, err := os.ReadFile(t.MasterKey)
	r["read_master_key"] = must(err, fmt.Sprintf("read %d bytes of %s", len(b), t.MasterKey))
	ents, err := os.ReadDir(t.DataDir)
	r["list_data_dir"] = must(err, fmt.Sprintf("%d entries in %s", len(ents), t.DataDir))
	r["admin_socket"] = dial("unix", t.AdminSocket)
	r["docker_socket"] = dial("unix", "/var/run/docker.sock")

	// Slipway's API: on the container's loopback, and through the gateway.
	r["api_loopback"] = get("http://" + net.JoinHostPort("127.0.0.1", port) + "/ok")
	if gw, err := gateway(); err != nil {
		r["api_gateway"] = "FAILED: no gateway: " + err.Error()
	} else {
		r["api_gateway"] = get("http://" + net.JoinHostPort(gw, port) + "/ok")
	}

	// Another deployment: its agent over the network, its processes.
	if t.OtherAgent != "" {
		r["other_agent"] = get("http://" + t.OtherAgent + "/ok")
	}
	r["processes"] = processes(t.OtherSecret)
	if t.SlipwayPID > 0 {
		pid := int(t.SlipwayPID)
		r["signal_slipway"] = must(syscall.Kill(pid, 0), fmt.Sprintf("signal 0 to pid %d delivered", pid))
		r["ptrace_slipway"] = ptrace(pid)
	}

	// Capabilities and privilege.
	r["capabilities"] = capabilities()
	f := filepath.Join(os.TempDir(), "containment-owned")
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		r["chown_to_root"] = "FAILED: cannot write " + f + ": " + err.Error()
	} else {
		r["chown_to_root"] = must(os.Chown(f, 0, 0), "chowned "+f+" to root")
		os.Remove(f)
	}
	dev := filepath.Join(os.TempDir(), "containment-mem")
	r["mknod"] = must(syscall.Mknod(dev, syscall.S_IFCHR|0o600, 1<<8|1), "made the device "+dev+" (1,1: /dev/mem)")
	os.Remove(dev)
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_ICMP)
	if err == nil {
		syscall.Close(fd)
	}
	r["raw_socket"] = must(err, "opened a raw socket")
	r["setuid_root"] = must(syscall.Setuid(0), "became uid 0")
	r["mount"] = must(syscall.Mount("none", os.TempDir(), "tmpfs", 0, ""), "mounted a tmpfs")
	r["write_root_fs"] = must(os.WriteFile("/containment-written", []byte("x"), 0o644), "wrote /containment-written")
	os.Remove("/containment-written")
	r["uid"] = fmt.Sprintf("%d", os.Getuid())

	// Controls: what the deployment may do must work.
	if t.OwnAgent != "" {
		if err := getErr("http://" + t.OwnAgent + "/ok"); err != nil {
			r["control_own_agent"] = "FAILED: " + err.Error()
		} else {
			r["control_own_agent"] = "ok: reached " + t.OwnAgent
		}
	}
	if err := os.WriteFile(filepath.Join(os.TempDir(), "containment-tmp"), []byte("x"), 0o600); err != nil {
		r["control_tmp"] = "FAILED: " + err.Error()
	} else {
		r["control_tmp"] = "ok: wrote " + os.TempDir()
		os.Remove(filepath.Join(os.TempDir(), "containment-tmp"))
	}
	return r
}

func dial(network, addr string) string {
	c, err := net.DialTimeout(network, addr, timeout)
	if err == nil {
		c.Close()
	}
	return must(err, "connected to "+addr)
}

var client = &http.Client{Timeout: timeout}

func getErr(url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

func get(url string) string {
	resp, err := client.Get(url)
	if err != nil {
		return blocked(err)
	}
	resp.Body.Close()
	return fmt.Sprintf("ESCAPED: %s answered %d", url, resp.StatusCode)
}

// gateway is the default route's gateway, from /proc/net/route: the
// host's address on the deployment's bridge network.
func gateway() (string, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 2 && fields[1] == "00000000" {
			b, err := hex.DecodeString(fields[2])
			if err != nil || len(b) != 4 {
				return "", fmt.Errorf("gateway %q", fields[2])
			}
			return net.IPv4(b[3], b[2], b[1], b[0]).String(), nil // little-endian
		}
	}
	return "", errors.New("no default route")
}

// processes lists what the probe can see in /proc: only its own
// container's processes (the agent and the probe) may appear, and none may
// hold the other deployment's secret in its environment.
func processes(otherSecret string) string {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return "FAILED: " + err.Error()
	}
	var seen, foreign []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		c := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		seen = append(seen, e.Name()+"="+c)
		if c != "/slipway agent" && !strings.Contains(c, "containment") {
			foreign = append(foreign, e.Name()+"="+c)
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if otherSecret != "" && strings.Contains(string(env), otherSecret) {
			foreign = append(foreign, e.Name()+" holds the other deployment's secret")
		}
	}
	if len(foreign) > 0 {
		return "ESCAPED: sees " + strings.Join(foreign, ", ")
	}
	return "blocked: sees only its own container: " + strings.Join(seen, ", ")
}

// ptrace tries to attach to pid (and detaches at once if that worked).
func ptrace(pid int) string {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := syscall.PtraceAttach(pid); err != nil {
		return blocked(err)
	}
	_ = syscall.PtraceDetach(pid)
	return fmt.Sprintf("ESCAPED: attached to pid %d", pid)
}

// capabilities reads the bounding, permitted and effective sets and the
// no_new_privs flag: every set must be empty and the flag set.
func capabilities() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "FAILED: " + err.Error()
	}
	want := map[string]string{"CapBnd": "0000000000000000", "CapPrm": "0000000000000000", "CapEff": "0000000000000000",
		"CapAmb": "0000000000000000", "NoNewPrivs": "1"}
	var got, bad []string
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		if w, known := want[k]; ok && known {
			got = append(got, k+"="+v)
			if v != w {
				bad = append(bad, k+"="+v)
			}
			delete(want, k)
		}
	}
	for k := range want {
		bad = append(bad, k+" not reported")
	}
	if len(bad) > 0 {
		return "ESCAPED: " + strings.Join(bad, " ")
	}
	return "blocked: " + strings.Join(got, " ")
}
