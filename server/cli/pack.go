package cli

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"

	"slipway/runtime/build"
)

// PackStats says what went into an archive.
type PackStats struct {
	Files int   // regular files and links packed
	Bytes int64 // their uncompressed size
	// Excluded lists the top-most paths left out, slash-separated.
	Excluded []string
}

// neverPacked reports whether a path is left out whatever the ignore files
// say: credentials (.env files), dependency trees the build recreates, and
// version control. A virtualenv is also recognised by its pyvenv.cfg (see
// Pack), whatever its name.
func neverPacked(name string, dir bool) bool {
	if dir {
		switch name {
		case ".git", "node_modules", ".venv", "venv":
			return true
		}
		return false
	}
	switch {
	case name == ".env":
		return true
	case strings.HasPrefix(name, ".env."):
		// .env.local, .env.production hold secrets; templates do not.
		switch strings.TrimPrefix(name, ".env.") {
		case "example", "sample", "template", "dist":
			return false
		}
		return true
	}
	return false
}

// packer walks a directory with the ignore rules in force.
type packer struct {
	root   string
	docker *patternmatcher.PatternMatcher // .dockerignore at the root, or nil
	tw     *tar.Writer
	stats  PackStats
}

// Pack writes dir as a gzip'd tar to w, honouring the .gitignore files (at
// every level, as git does) and the root .dockerignore (as docker does),
// and never packing what neverPacked names or a directory holding
// pyvenv.cfg. Paths in the archive are relative to dir.
func Pack(dir string, w io.Writer) (PackStats, error) {
	p := &packer{root: dir}
	if f, err := os.Open(filepath.Join(dir, ".dockerignore")); err == nil {
		lines, err := ignorefile.ReadAll(f)
		f.Close()
		if err != nil {
			return p.stats, fmt.Errorf("read .dockerignore: %w", err)
		}
		if p.docker, err = patternmatcher.New(lines); err != nil {
			return p.stats, fmt.Errorf(".dockerignore: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return p.stats, fmt.Errorf("read .dockerignore: %w", err)
	}
	zw := gzip.NewWriter(w)
	p.tw = tar.NewWriter(zw)
	if err := p.walk("", nil); err != nil {
		return p.stats, err
	}
	if err := p.tw.Close(); err != nil {
		return p.stats, err
	}
	return p.stats, zw.Close()
}

// readGitignore parses rel/.gitignore into patterns scoped to rel, as git
// does: comments and blank lines are skipped, the rest is the library's.
func readGitignore(root, rel string) ([]gitignore.Pattern, error) {
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(rel), ".gitignore"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path.Join(rel, ".gitignore"), err)
	}
	defer f.Close()
	var domain []string
	if rel != "" {
		domain = strings.Split(rel, "/")
	}
	var out []gitignore.Pattern
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "" {
			continue
		}
		out = append(out, gitignore.ParsePattern(line, domain))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path.Join(rel, ".gitignore"), err)
	}
	return out, nil
}

// walk packs the directory rel (slash-separated, "" for the root) with the
// .gitignore patterns of its parents; a directory's own .gitignore applies
// below it only, and later (deeper) patterns win, as in git.
func (p *packer) walk(rel string, patterns []gitignore.Pattern) error {
	own, err := readGitignore(p.root, rel)
	if err != nil {
		return err
	}
	patterns = append(patterns[:len(patterns):len(patterns)], own...)
	matcher := gitignore.NewMatcher(patterns)
	entries, err := os.ReadDir(filepath.Join(p.root, filepath.FromSlash(rel)))
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Join(p.root, filepath.FromSlash(rel)), err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	for _, e := range entries {
		name := path.Join(rel, e.Name())
		full := filepath.Join(p.root, filepath.FromSlash(name))
		isDir := e.IsDir()
		if neverPacked(e.Name(), isDir) || matcher.Match(strings.Split(name, "/"), isDir) {
			p.stats.Excluded = append(p.stats.Excluded, name)
			continue
		}
		if isDir {
			if _, err := os.Lstat(filepath.Join(full, "pyvenv.cfg")); err == nil {
				p.stats.Excluded = append(p.stats.Excluded, name)
				continue
			}
		}
		if p.docker != nil {
			ignored, err := p.docker.MatchesOrParentMatches(name)
			if err != nil {
				return fmt.Errorf(".dockerignore: %w", err)
			}
			// A directory with exceptions below it (!pattern) is still
			// walked; its entries are checked one by one.
			if ignored && (!isDir || !p.docker.Exclusions()) {
				p.stats.Excluded = append(p.stats.Excluded, name)
				continue
			}
			if ignored {
				if err := p.walk(name, patterns); err != nil {
					return err
				}
				continue
			}
		}
		if err := p.add(name, full); err != nil {
			return err
		}
		if isDir {
			if err := p.walk(name, patterns); err != nil {
				return err
			}
		}
	}
	return nil
}

// add writes one entry. Links are packed as links (the server refuses
// those that point out of the source); sockets, devices and pipes are
// left out.
func (p *packer) add(name, full string) error {
	if err := checkPackName(name, "its name", name); err != nil {
		return err
	}
	fi, err := os.Lstat(full)
	if err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	var link string
	switch m := fi.Mode(); {
	case m.IsRegular(), m.IsDir():
	case m&fs.ModeSymlink != 0:
		if link, err = os.Readlink(full); err != nil {
			return fmt.Errorf("pack %s: %w", name, err)
		}
		if err := checkPackName(name, "the target of the link", link); err != nil {
			return err
		}
	default:
		p.stats.Excluded = append(p.stats.Excluded, name)
		return nil
	}
	hdr, err := tar.FileInfoHeader(fi, link)
	if err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	// Local user and group names mean nothing on the server.
	hdr.Name, hdr.Uname, hdr.Gname, hdr.Uid, hdr.Gid = name, "", "", 0, 0
	if fi.IsDir() {
		hdr.Name += "/"
	}
	if err := p.tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		if !fi.IsDir() {
			p.stats.Files++
		}
		return nil
	}
	f, err := os.Open(full)
	if err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	defer f.Close()
	n, err := io.CopyN(p.tw, f, fi.Size())
	if err != nil {
		return fmt.Errorf("pack %s: %w", name, err)
	}
	p.stats.Files++
	p.stats.Bytes += n
	return nil
}

// checkPackName refuses to pack a file whose name (or link target) the
// server refuses in an archive (build.CheckName: control characters,
// invalid UTF-8, bidirectional overrides), naming the file escaped, so
// that neither this message nor the server's log shows its raw bytes.
func checkPackName(file, what, s string) error {
	var ne *build.NameError
	if err := build.CheckName(what, s); errors.As(err, &ne) {
		return fmt.Errorf("%s: %s has %s, which the server refuses in an archive; rename it, or leave it out with .gitignore or .dockerignore",
			build.QuoteName(file), what, ne.Why)
	}
	return nil
}

// displayName is a path as the output shows it: as it is, or quoted with
// its control and invalid bytes escaped when it has any (a file left out
// of the archive may still have such a name).
func displayName(name string) string {
	if build.CheckName("", name) != nil {
		return build.QuoteName(name)
	}
	return name
}
