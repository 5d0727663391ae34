package processtest_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"slipway/server/servertest"
)

// zeros is an endless body of spaces that counts what the server took.
type zeros struct {
	left int64
	read atomic.Int64
}

func (z *zeros) Read(p []byte) (int, error) {
	if z.left <= 0 {
		return 0, io.EOF
	}
	n := int64(len(p))
	if n > z.left {
		n = z.left
	}
	for i := range p[:n] {
		p[i] = ' '
	}
	z.left -= n
	z.read.Add(n)
	return int(n), nil
}

// TestBodyLimitAppliesToEveryMethod sends a 1 GiB body to API routes with
// each method, with and without Content-Length: every one is a 413 with a
// detail, answered before the body was read (Content-Length) or after the
// first MiB (chunked), and the server stays small.
func TestBodyLimitAppliesToEveryMethod(t *testing.T) {
	s := servertest.Start(t, nil)
	const gib = 1 << 30
	routes := []struct{ method, path string }{
		{"PUT", "/api/v1/orgs/ttl-settings"},
		{"PUT", "/api-host/api/v1/orgs/ttl-settings"},
		{"POST", "/v2/deployments"},
		{"PATCH", "/v2/deployments/00000000-0000-0000-0000-000000000000"},
		{"POST", "/api/v1/workspaces"},
	}
	for _, rt := range routes {
		for _, chunked := range []bool{false, true} {
			name := rt.method + " " + rt.path
			if chunked {
				name += " chunked"
			}
			t.Run(name, func(t *testing.T) {
				body := &zeros{left: gib}
				req, err := http.NewRequest(rt.method, s.URL+rt.path, body)
				if err != nil {
					t.Fatal(err)
				}
				if !chunked {
					req.ContentLength = gib
				}
				req.Header.Set("X-Api-Key", s.Key)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatalf("request: %v (server read %d bytes)", err, body.read.Load())
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				took := time.Since(start)
				if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(raw), `"detail"`) {
					t.Fatalf("status %d %s, want 413 with a detail", resp.StatusCode, raw)
				}
				// The client may have sent a little more than the server read
				// (socket buffers); far from the whole GiB either way.
				if n := body.read.Load(); n > 16<<20 {
					t.Fatalf("%d bytes of the body were sent before the 413", n)
				}
				if took > 5*time.Second {
					t.Fatalf("the 413 took %v", took)
				}
			})
		}
	}
	if rss, err := s.RSS(); err == nil && rss > 200<<20 {
		t.Fatalf("server RSS %d MiB after the oversized bodies", rss>>20)
	}
}
