package storage_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Only a domain's store touches its buckets: in the packages below, every
// call that names a bucket, walks one or reads and writes records by bucket
// name stands in a file named store.go or store_<resource>.go, and package
// storage exports no bucket names (each store declares its own, unexported).
// Handlers, workers and middleware go through the stores' functions.
// The agent engine (runtime/agent) is held to it too: its bbolt store is
// its store*.go files, behind the Store interface the engine uses.
var storeFile = regexp.MustCompile(`^store(_[a-z0-9_]+)?\.go$`)

// bucketCalls are the selector names that reach into bbolt's buckets, and
// storage's record helpers, which take a bucket name.
var bucketCalls = map[string]bool{
	"Bucket": true, "CreateBucket": true, "CreateBucketIfNotExists": true, "DeleteBucket": true,
	"Cursor": true, "ForEachBucket": true,
}
var storageHelpers = map[string]bool{"Get": true, "Put": true, "Delete": true, "PrefixIDs": true, "CreateBuckets": true}

func TestOnlyStoresTouchBuckets(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || storeFile.MatchString(d.Name()) {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(rel)) + "/"
		if exempt(dir) {
			return nil
		}
		checked++
		for _, v := range bucketUses(t, path) {
			t.Errorf("%s: %s outside a store file (move it into the package's store*.go)", rel, v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("checked only %d files: the walk is not seeing the tree", checked)
	}
}

func exempt(dir string) bool {
	switch {
	case strings.HasPrefix(dir, "storage/"), strings.HasPrefix(dir, "testdata/"):
		return true
	}
	return false
}

func bucketUses(t *testing.T, path string) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	storagePkg := ""
	for _, imp := range f.Imports {
		if strings.Trim(imp.Path.Value, `"`) == "slipway/storage" {
			storagePkg = "storage"
			if imp.Name != nil {
				storagePkg = imp.Name.Name
			}
		}
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if x, ok := sel.X.(*ast.Ident); ok && storagePkg != "" && x.Name == storagePkg {
			if storageHelpers[sel.Sel.Name] {
				out = append(out, fset.Position(call.Pos()).String()+": storage."+sel.Sel.Name)
			}
			return true
		}
		if bucketCalls[sel.Sel.Name] {
			out = append(out, fset.Position(call.Pos()).String()+": ."+sel.Sel.Name+"()")
		}
		return true
	})
	return out
}

func TestStorageExportsNoBucketNames(t *testing.T) {
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for name, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					for _, id := range s.(*ast.ValueSpec).Names {
						if id.IsExported() && (strings.HasPrefix(id.Name, "Bucket") || strings.HasPrefix(id.Name, "Idx")) {
							t.Errorf("%s: storage exports bucket name %s; the store that owns it declares it, unexported", name, id.Name)
						}
					}
				}
			}
		}
	}
}
