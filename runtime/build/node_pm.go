package build

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// pmDefaults are the yarn and pnpm that a host without them runs through
// npm when package.json's packageManager names none: the major versions
// their lock files' usual flags (--frozen-lockfile) belong to.
var pmDefaults = map[string]string{"yarn": "yarn@1", "pnpm": "pnpm@9"}

// pmVersionRe is a package manager's version in packageManager.
var pmVersionRe = regexp.MustCompile(`^[0-9]+(\.[0-9]+){0,2}(-[0-9A-Za-z.-]+)?$`)

// PackageManagerSpec is the npm package (name@version) of tool, yarn or
// pnpm, for a project whose package.json is pkg: the version its
// packageManager field names ("yarn@1.22.22", a corepack hash suffix
// dropped), else pmDefaults'. ok is false for any other tool.
func PackageManagerSpec(tool string, pkg []byte) (spec string, ok bool, err error) {
	spec, ok = pmDefaults[tool]
	if !ok {
		return "", false, nil
	}
	var p struct {
		PackageManager string `json:"packageManager"`
	}
	if err := json.Unmarshal(pkg, &p); err != nil {
		return "", true, fmt.Errorf("package.json is not valid JSON: %w", err)
	}
	if name, version, _ := strings.Cut(p.PackageManager, "@"); name == tool && version != "" {
		version, _, _ = strings.Cut(version, "+")
		if !pmVersionRe.MatchString(version) {
			// Not quoted: the build log never repeats file contents.
			return "", true, fmt.Errorf("package.json: packageManager names %s in something that is not a version of %s (like %s@1.22.22)", tool, tool, tool)
		}
		spec = tool + "@" + version
	}
	return spec, true, nil
}

// viaNPM is the install cmd of tool (yarn or pnpm), which this host lacks,
// run by npm from the registry (npx) in the version the project's
// package.json asks for: the official JavaScript templates have a
// yarn.lock, and a host with Node.js has npm but seldom yarn. The
// reference's images have yarn; this keeps their lock file honoured.
func viaNPM(t *Tree, dir, tool, cmd string) (JSInstall, error) {
	pkg, err := t.ReadFile(pathJoin(dir, "package.json"), 1<<20)
	if err != nil {
		return JSInstall{}, fmt.Errorf("read package.json: %w", err)
	}
	spec, ok, err := PackageManagerSpec(tool, pkg)
	if err != nil || !ok {
		return JSInstall{}, err
	}
	args := strings.TrimPrefix(cmd, tool+" ")
	return JSInstall{Command: "npx --yes " + spec + " " + args,
		Note: fmt.Sprintf("%s is not installed on this host: npm runs %s from the registry", tool, spec)}, nil
}
