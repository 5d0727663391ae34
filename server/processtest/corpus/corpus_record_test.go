package corpus_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"slipway/server/servertest"
)

// recordCorpusReference (go test -run TestCorpus -record-reference
// ./server/processtest/corpus/) writes server/processtest/corpus/testdata/corpus/<project>.json for each Python
// project of the corpus from the reference server: `langgraph dev` of the
// reference's version (the packages of SLIPWAY_REF_VENV, /opt/ref-venv by
// default, as constraints) in a virtual environment with the project
// installed (uv, cached under the temporary directory), started on a
// scratch copy of the project (the dev server writes beside its
// configuration).
//
// The JavaScript projects have no golden: the JavaScript reference
// (@langchain/langgraph-api, `langgraphjs dev`) needs @langchain/langgraph
// 0.2.39 or newer, and their lock files pin 0.2.5 to 0.2.11; it refuses to
// start ("does not provide an export named 'InMemoryStore'").
func recordCorpusReference(t *testing.T) {
	refVenv := os.Getenv("SLIPWAY_REF_VENV")
	if refVenv == "" {
		refVenv = "/opt/ref-venv"
	}
	uv, err := osexec.LookPath("uv")
	if err != nil {
		uv = "/opt/slipway-ci/venv/bin/uv"
	}
	freeze, err := osexec.Command(filepath.Join(refVenv, "bin", "python"), "-m", "pip", "freeze", "--exclude-editable").Output()
	if err != nil {
		t.Fatalf("the reference's packages (%s): %v", refVenv, err)
	}
	cache := filepath.Join(os.TempDir(), "slipway-corpus-ref")
	constraints := filepath.Join(cache, "constraints.txt")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(constraints, freeze, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range corpusProjects {
		if p.lang != "python" {
			continue
		}
		scratch := filepath.Join(t.TempDir(), p.name)
		copyTree(t, corpusDir(p.name), scratch)
		venv := filepath.Join(cache, p.name)
		for _, argv := range [][]string{
			{uv, "venv", "-q", "--allow-existing", "-p", "python3.11", venv},
			{uv, "pip", "install", "-q", "-p", filepath.Join(venv, "bin", "python"), "-c", constraints, "langgraph-cli[inmem]", scratch},
		} {
			if out, err := osexec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v\n%s", argv, err, out)
			}
		}
		addr := servertest.FreeAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		ctx, cancel := context.WithCancel(context.Background())
		cmd := osexec.CommandContext(ctx, filepath.Join(venv, "bin", "langgraph"), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", port)
		cmd.Dir = scratch
		cmd.Env = append(os.Environ(), "LANGSMITH_TRACING=false", "LANGCHAIN_TRACING_V2=false",
			"OPENAI_API_KEY=corpus-fake-key", "TAVILY_API_KEY=corpus-fake-key")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		logFile := filepath.Join(t.TempDir(), "ref.log")
		lf, _ := os.Create(logFile)
		cmd.Stdout, cmd.Stderr = lf, lf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		url := "http://" + addr
		deadline := time.Now().Add(2 * time.Minute)
		for !refUp(url) {
			if time.Now().After(deadline) {
				log, _ := os.ReadFile(logFile)
				t.Fatalf("the reference server did not start for %s:\n%s", p.name, log)
			}
			time.Sleep(500 * time.Millisecond)
		}
		// A plain client: the reference's answers are what is recorded,
		// not checked against Slipway's API description.
		got := corpusAnswersBy(t, func(method, path string, body any) (int, []byte) {
			var rd io.Reader
			if body != nil {
				raw, _ := json.Marshal(body)
				rd = bytes.NewReader(raw)
			}
			req, _ := http.NewRequest(method, url+path, rd)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("the reference server: %v", err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, raw
		})
		cancel()
		_ = cmd.Wait()
		lf.Close()
		raw, _ := json.MarshalIndent(got, "", "  ")
		if err := os.WriteFile(corpusGolden(p.name), append(raw, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("recorded %s from the reference", corpusGolden(p.name))
	}
}

// refUp says whether the reference server at url answers GET /ok.
func refUp(url string) bool {
	resp, err := http.Get(url + "/ok")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == 200
}

// copyTree copies the regular files under src to dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	for rel, body := range projectFiles(t, src) {
		p := filepath.Join(dst, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
