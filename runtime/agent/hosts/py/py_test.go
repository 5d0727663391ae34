package py

import (
	"os"
	"path/filepath"
	"testing"
)

func TestHandles(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"./agent.py", true},
		{"src/agent/graph.PY", true},
		{"my_pkg.module", true},
		{"agent", true},
		{"./src/agent.ts", false},
		{"./agent.rb", false},
		{"my-pkg.module", false},
		{"pkg..mod", false},
		{"", false},
	} {
		if got := Handles(tc.path); got != tc.want {
			t.Errorf("Handles(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

// TestInterpreter: an explicit interpreter wins, then the project's
// virtualenv (.venv before venv), then python3 on PATH.
func TestInterpreter(t *testing.T) {
	bin := t.TempDir()
	python3 := filepath.Join(bin, "python3")
	if err := os.WriteFile(python3, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	project := t.TempDir()
	venvPython := func(name string) string {
		p := filepath.Join(project, name, "bin", "python")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	check := func(explicit, want string) {
		t.Helper()
		got, err := Interpreter(explicit, project)
		if err != nil || got != want {
			t.Fatalf("Interpreter(%q) = %q, %v; want %q", explicit, got, err, want)
		}
	}
	check("", python3)
	venv := venvPython("venv")
	check("", venv)
	dotVenv := venvPython(".venv")
	check("", dotVenv)
	check(python3, python3)
	if _, err := Interpreter(filepath.Join(bin, "nope"), project); err == nil {
		t.Fatal("a missing explicit interpreter is an error")
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Interpreter("", t.TempDir()); err == nil {
		t.Fatal("no interpreter at all is an error")
	}
}
