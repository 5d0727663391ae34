package process

import (
	"os"
	"path/filepath"
	"strings"

	"slipway/runtime"
	"slipway/runtime/sandbox"
)

// What a revision's processes see of the deployment's directory. Its
// revisions live side by side (revisions/<rev>/), and while one serves the
// next is unpacked, read and built beside it: if the serving revision's
// code could reach the next one's tree, it could change that revision's
// code and, before Slipway read its files from descriptors, redirect what
// Slipway read. So a job sees only its own revision:
//
//	agent-data/               the agent's database (the agent only)
//	home/, tmp/               HOME and TMPDIR
//	revisions/<rev>/app/      its source
//	revisions/<rev>/venv/     its virtual environment, if it has one
//	revisions/<base>/venv/    read-only: the earlier revision's environment
//	                          whose packages a code-only revision shares
//
// In a mount namespace nothing else of the deployment's directory exists
// (the data directory is a tmpfs with these bound back); under Landlock
// nothing else may be read, listed or written (names can still be stat'ed
// where file permissions allow: Landlock does not cover stat). See
// SECURITY.md for what each sandbox mode holds.

// revisionJob is a sandbox job of revision s.RevisionID of its deployment,
// run as uid from dir, seeing what that revision may see; agent adds the
// agent's database, which build steps have no use for.
func (d *Driver) revisionJob(s runtime.Spec, uid int, agent bool, dir string, argv, env []string) sandbox.Job {
	job := d.job(s.DeploymentID, uid, dir, argv, env)
	job.Binds = d.visible(s.DeploymentID, s.RevisionID, agent)
	return job
}

// visible is what a job of revision rev of dep binds (see above).
func (d *Driver) visible(dep, rev string, agent bool) []sandbox.Bind {
	depDir := d.depDir(dep)
	revDir := d.revDir(dep, rev)
	var binds []sandbox.Bind
	if agent {
		binds = append(binds, sandbox.Bind{Path: filepath.Join(depDir, "agent-data")})
	}
	binds = append(binds,
		sandbox.Bind{Path: filepath.Join(depDir, "home")},
		sandbox.Bind{Path: filepath.Join(depDir, "tmp")},
		sandbox.Bind{Path: filepath.Join(revDir, "app")})
	if st, err := os.Lstat(filepath.Join(revDir, venvDir)); err == nil && st.IsDir() {
		binds = append(binds, sandbox.Bind{Path: filepath.Join(revDir, venvDir)})
	}
	if base := d.venvBase(dep, rev); base != "" {
		binds = append(binds, sandbox.Bind{Path: base, ReadOnly: true})
	}
	return binds
}

// venvBase is the environment whose packages revision rev's shares (its
// venv.base, written by Slipway), or "" for none. Only another revision's
// venv of the same deployment is accepted, whatever the file says.
func (d *Driver) venvBase(dep, rev string) string {
	raw, err := os.ReadFile(filepath.Join(d.revDir(dep, rev), venvBase))
	if err != nil {
		return ""
	}
	base := string(raw)
	revs := filepath.Join(d.depDir(dep), "revisions")
	rel, err := filepath.Rel(revs, base)
	if err != nil || filepath.Clean(base) != base {
		return ""
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	if len(parts) != 2 || parts[1] != venvDir || parts[0] == "." || parts[0] == ".." || parts[0] == rev {
		return ""
	}
	if st, err := os.Lstat(base); err != nil || !st.IsDir() {
		return ""
	}
	return base
}
