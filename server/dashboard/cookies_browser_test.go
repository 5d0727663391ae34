package dashboard_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"slipway/server/servertest"
)

// plantingApp is a deployment's custom route app (served by the
// JavaScript host, no package needed) that answers every request with
// Set-Cookie headers naming the dashboard's cookies, under every spelling
// a browser would store them by, and one cookie of its own.
const plantingApp = `const planted = [
  "slipway_session=ATTACKER; Path=/",
  "slipway_csrf=ATTACKER; Path=/",
  "slipway_workspace=00000000-0000-0000-0000-000000000000; Path=/",
  "__Host-slipway_session=ATTACKER; Path=/; Secure",
  "__Host-slipway_csrf=ATTACKER; Path=/; Secure",
  "__Host-slipway_workspace=00000000-0000-0000-0000-000000000000; Path=/; Secure",
  "  slipway_session=ATTACKER; Path=/",
  "=slipway_session=ATTACKER; Path=/",
];
export const app = {
  async fetch(req) {
    const headers = new Headers({ "content-type": "text/html; charset=utf-8" });
    for (const c of planted) headers.append("set-cookie", c);
    headers.append("set-cookie", "theme=dark; Path=/");
    return new Response('<!doctype html><title>planted</title><p id="planted">planted</p>', { headers });
  },
};
`

// plantingArchive is the deployment's source: the echo graph and the app.
func plantingArchive(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"langgraph.json": `{"graphs": {"agent": {"builtin": "echo"}}, "http": {"app": "./app.mjs:app"}}`,
		"app.mjs":        plantingApp,
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), ModTime: time.Now()}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	tw.Close()
	gz.Close()
	return buf.Bytes()
}

// deployPlanter creates the planting deployment on s and waits until it serves.
func deployPlanter(t *testing.T, s *servertest.Server, name string) {
	t.Helper()
	deployArchive(t, s, name, plantingArchive(t), 2*time.Minute)
}

// TestCookiePlantingInBrowser: a deployment whose custom route answers
// Set-Cookie for slipway_session and slipway_csrf (and their __Host-
// spellings) cannot replace the signed-in user's cookies in Chromium,
// whether the route is opened as a page or fetched by the dashboard's own
// script; the session keeps working. On the dashboard's origin alone, and
// with an agents origin (SLIPWAY_AGENTS_URL, here localhost on the same
// listener: another host to the browser), where the page opens instead.
func TestCookiePlantingInBrowser(t *testing.T) {
	chromium, node, dir := browserTools(t)
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is needed by the JavaScript host too")
	}
	for _, tc := range []struct {
		name   string
		agents bool
	}{{"dashboard origin", false}, {"agents origin", true}} {
		t.Run(tc.name, func(t *testing.T) {
			addr := servertest.FreeAddr(t)
			_, port, _ := net.SplitHostPort(addr)
			env := map[string]string{"SLIPWAY_RUNTIME": "process", "SLIPWAY_ADDR": addr}
			agents := ""
			if tc.agents {
				agents = "http://localhost:" + port
				env["SLIPWAY_AGENTS_URL"] = agents
			}
			s := servertest.Start(t, env)
			deployPlanter(t, s, "planter")
			cmd := exec.Command(node, "cookies.mjs")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "BASE="+s.URL, "CHROMIUM="+chromium, "KEY="+s.Key, "DEP=planter", "AGENTS="+agents)
			out, err := cmd.CombinedOutput()
			t.Logf("browser run:\n%s", out)
			if err != nil {
				t.Fatalf("the browser steps failed: %v\nthe end of the server's log:\n%s", err, tail(s.Logs(), 60))
			}
			if !strings.Contains(string(out), "ok: the dashboard's cookies are unchanged after the dashboard's page fetched") {
				t.Fatal(fmt.Sprintf("the script did not check the cookies:\n%s", out))
			}
		})
	}
}
