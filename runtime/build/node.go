package build

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// JSInstall is how a JavaScript project's dependencies are installed
// when the revision names no install_command.
type JSInstall struct {
	Command string // run with sh -c in the project's directory
	Lock    string // the lock file that chose it ("" for none)
	Note    string // how the command came to be, for the build log ("" when plain)
}

// lockfiles map a lock file to its package manager and the install that
// keeps to it, in the order the reference CLI looks for them.
var lockfiles = []struct{ file, tool, cmd string }{
	{"yarn.lock", "yarn", "yarn install --frozen-lockfile"},
	{"pnpm-lock.yaml", "pnpm", "pnpm install --frozen-lockfile"},
	{"package-lock.json", "npm", "npm ci"},
	{"npm-shrinkwrap.json", "npm", "npm ci"},
}

// JSLock is the lock file of the JavaScript project in the tree's
// directory dir and the package manager it names (npm, yarn or pnpm); ok is
// false without a package.json, file "" for a package.json without a lock
// file. It only looks at the names (never following a link); whoever reads
// the files reads them from the tree.
func JSLock(t *Tree, dir string) (file, tool, install string, ok bool) {
	if !t.Exists(pathJoin(dir, "package.json")) {
		return "", "", "", false
	}
	for _, l := range lockfiles {
		if t.Exists(pathJoin(dir, l.file)) {
			return l.file, l.tool, l.cmd, true
		}
	}
	return "", "npm", "npm install", true
}

// DetectJSInstall picks the install of the JavaScript project in the
// tree's directory dir (the graph configuration's): none without a
// package.json; else the package manager its lock file names, from PATH
// (lookPath), or run through npm when only npm is there (viaNPM); `npm
// install` for a project without a lock file.
func DetectJSInstall(t *Tree, dir string, lookPath func(string) (string, error)) (JSInstall, bool, error) {
	file, tool, cmd, ok := JSLock(t, dir)
	if !ok {
		return JSInstall{}, false, nil
	}
	if _, err := lookPath(tool); err != nil {
		if _, npmErr := lookPath("npm"); npmErr == nil && tool != "npm" {
			in, err := viaNPM(t, dir, tool, cmd)
			if err != nil {
				return JSInstall{}, true, err
			}
			in.Lock = file
			return in, true, nil
		}
		if file == "" {
			return JSInstall{}, true, fmt.Errorf("the project has a package.json and npm is not installed on this host: install Node.js with npm, or set install_command")
		}
		return JSInstall{}, true, fmt.Errorf("the project has %s, which needs %s, and %s is not installed on this host: install it, or set install_command", file, tool, tool)
	}
	return JSInstall{Command: cmd, Lock: file}, true, nil
}

// NodeVersion is the node_version of the graph configuration raw ("" when
// absent, or when the file is not JSON).
func NodeVersion(raw []byte) (string, error) {
	var cfg struct {
		NodeVersion json.RawMessage `json:"node_version"`
	}
	if json.Unmarshal(raw, &cfg) != nil {
		// Not the build's to report: the agent refuses the file at deploy,
		// with its own message in the deploy log.
		return "", nil
	}
	v := strings.TrimSpace(string(cfg.NodeVersion))
	if v == "" || v == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(cfg.NodeVersion, &s) != nil {
		s = v // a bare number: "node_version": 20
	}
	return strings.TrimPrefix(strings.TrimSpace(s), "v"), nil
}

// CheckNodeVersion checks that node (the `node --version` output, e.g.
// "v20.20.2") is at least want ("20", "20.3" or "20.3.1").
func CheckNodeVersion(want, node string) error {
	w, err := parseVersion(want)
	if err != nil {
		return fmt.Errorf("node_version %q is not a version like \"20\" or \"20.11\"", want)
	}
	have, err := parseVersion(strings.TrimPrefix(strings.TrimSpace(node), "v"))
	if err != nil {
		return fmt.Errorf("cannot read this host's node version from %q", node)
	}
	for len(have) < 3 {
		have = append(have, 0)
	}
	for i := range w {
		if have[i] != w[i] {
			if have[i] < w[i] {
				return fmt.Errorf("node_version %s asks for Node.js %s or newer, and this host runs node %s", want, want, strings.TrimSpace(node))
			}
			return nil
		}
	}
	return nil
}

// parseVersion reads up to three dot-separated numbers.
func parseVersion(v string) ([]int, error) {
	parts := strings.Split(v, ".")
	if len(parts) > 3 || v == "" {
		return nil, fmt.Errorf("bad version %q", v)
	}
	out := make([]int, 0, 3)
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("bad version %q", v)
		}
		out = append(out, n)
	}
	return out, nil
}

// HostNodeVersion runs `node --version` from PATH.
func HostNodeVersion() (string, error) {
	node, err := exec.LookPath("node")
	if err != nil {
		return "", fmt.Errorf("node is not installed on this host")
	}
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("node --version: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}
