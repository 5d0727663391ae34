package build

import (
	"fmt"
	"path"
	"strings"
	"unicode"
)

// DefaultGraphConfig is the graph configuration file of a source that
// names none.
const DefaultGraphConfig = "langgraph.json"

// maxGraphConfigPath bounds the path's length (PATH_MAX).
const maxGraphConfigPath = 4096

// GraphConfigPath checks a revision's graph_config_path and returns it
// cleaned, slash-separated and relative to the root of the source. It must
// name a file inside the source: absolute paths and paths that climb out
// with ".." are refused, whatever the driver, because the file is read
// (and its directory used for builds) on the host. The control plane calls
// it when the path is set and each driver again before it reads the file,
// so a record written before this check existed cannot escape either.
// Backslashes count as separators, as a client on Windows means them.
func GraphConfigPath(rel string) (string, error) {
	if rel == "" {
		return DefaultGraphConfig, nil
	}
	if len(rel) > maxGraphConfigPath {
		return "", fmt.Errorf("graph configuration path is longer than %d bytes", maxGraphConfigPath)
	}
	if strings.IndexFunc(rel, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("graph configuration path %q contains a control character", rel)
	}
	slashed := strings.ReplaceAll(rel, `\`, "/")
	if path.IsAbs(slashed) || isWindowsDrive(slashed) {
		return "", fmt.Errorf("graph configuration path %q must be relative to the root of the source, not absolute", rel)
	}
	clean := path.Clean(slashed)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("graph configuration path %q leaves the source tree", rel)
	}
	if clean == "." {
		return "", fmt.Errorf("graph configuration path %q names the source directory, not a file", rel)
	}
	return clean, nil
}

// isWindowsDrive reports a path such as "C:/x" or "c:x".
func isWindowsDrive(p string) bool {
	return len(p) >= 2 && p[1] == ':' && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}
