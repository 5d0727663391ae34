package storage_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// leafPackages are the libraries both processes (`slipway serve` and
// `slipway agent`) import: they must import no other Slipway package, so
// neither process's code leaks into the other through them, and they can
// move (or be vendored by a second binary) on their own. A leaf may
// import another member of the set: httpx/validate builds httpx's 422s,
// and httpx maps the domain error vocabulary (storage/errs, itself
// stdlib-only) to statuses.
var leafPackages = []string{
	"server/httpx",
	"server/httpx/validate",
	"server/apidoc",
	"storage/errs",
}

const module = "slipway"

// leafViolations returns "dir/file.go imports path" for every non-test Go
// file of the leaf packages under root that imports a Slipway package
// outside the set.
func leafViolations(root string, leaves []string) ([]string, error) {
	allowed := map[string]bool{}
	for _, l := range leaves {
		allowed[module+"/"+l] = true
	}
	var out []string
	for _, l := range leaves {
		entries, err := os.ReadDir(filepath.Join(root, l))
		if err != nil {
			return nil, err
		}
		files := 0
		for _, e := range entries {
			name := e.Name()
			if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				continue
			}
			files++
			f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, l, name), nil, parser.ImportsOnly)
			if err != nil {
				return nil, err
			}
			for _, im := range f.Imports {
				p, err := strconv.Unquote(im.Path.Value)
				if err != nil {
					return nil, err
				}
				if (p == module || strings.HasPrefix(p, module+"/")) && !allowed[p] {
					out = append(out, l+"/"+name+" imports "+p)
				}
			}
		}
		if files == 0 {
			// A renamed or moved leaf must not pass by having no files.
			out = append(out, l+": no Go files")
		}
	}
	sort.Strings(out)
	return out, nil
}

func TestLeafLibrariesImportNoOtherSlipwayPackage(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bad, err := leafViolations(root, leafPackages)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		t.Errorf("leaf library: %s (a leaf may import only the leaf set: %v)", b, leafPackages)
	}
}

// The check itself: a leaf importing a non-leaf Slipway package, or a leaf
// with no files, is reported; stdlib, third-party and leaf imports are not.
func TestLeafViolationsFindsABadImport(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a/a.go", "package a\nimport (\n\t\"fmt\"\n\t\"github.com/x/y\"\n\t\"slipway/b\"\n)\n")
	write("a/bad.go", "package a\nimport \"slipway/storage\"\n")
	write("a/a_test.go", "package a\nimport \"slipway/server\"\n") // tests may import anything
	write("b/b.go", "package b\nimport \"slipwayish/x\"\n")
	write("c/README", "no Go here\n")
	got, err := leafViolations(root, []string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/bad.go imports slipway/storage", "c: no Go files"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("violations = %q, want %q", got, want)
	}
}
