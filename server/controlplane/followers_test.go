package controlplane

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
	"slipway/server/httpx"
	"slipway/server/track"
	"slipway/storage"
)

// credResolver authenticates a request by its X-Test-Credential header: a
// service key of that id, or, when it reads "session:<user>", a login
// session of that user (sessions have no credential id of their own).
type credResolver struct{ ws uuid.UUID }

func (c credResolver) Authenticate(r *http.Request) (*auth.Principal, error) {
	v := r.Header.Get("X-Test-Credential")
	if v == "" {
		return nil, httpx.Unauthorized("no credential")
	}
	p := &auth.Principal{WorkspaceID: c.ws, WorkspaceRole: auth.WSViewer, Kind: auth.KindServiceKey}
	if user, ok := strings.CutPrefix(v, "session:"); ok {
		p.Kind, p.UserID = auth.KindSession, uuid.MustParse(user)
		return p, nil
	}
	id := uuid.MustParse(v)
	p.CredentialID = &id
	return p, nil
}

// followFixture is a control plane serving the logs of one deployment and
// of its revision (still building, so that its follow does not end), in
// process, behind the service's own routes.
type followFixture struct {
	s        *Service
	srv      *httptest.Server
	dep, rev string // follow URL paths
}

func newFollowFixture(t *testing.T, s *Service) *followFixture {
	t.Helper()
	ws, dep, rid := storage.NewID(), storage.NewID(), storage.NewID()
	if err := s.DB.Update(func(tx *bolt.Tx) error {
		if err := insertDeployment(tx, ws, &deploymentRecord{Deployment: Deployment{ID: dep.String(), Name: "followed"}}); err != nil {
			return err
		}
		return putRevision(tx, &revisionRecord{Revision: Revision{ID: rid.String(), DeploymentID: dep.String(), Status: RevisionBuilding}})
	}); err != nil {
		t.Fatal(err)
	}
	// The follow routes are not tracked operations: a recorder without a
	// log only lets Routes register the tracked ones.
	s.Audit = &track.Recorder{}
	rt := httpx.Record(httpx.NewRouter())
	s.Routes(rt, credResolver{ws: ws}, "")
	srv := httptest.NewServer(rt)
	t.Cleanup(srv.Close)
	srv.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = -1 // every follow on its own connection, closed with it
	base := "/v2/deployments/" + dep.String()
	return &followFixture{s: s, srv: srv, dep: base + "/logs?follow=true", rev: base + "/revisions/" + rid.String() + "/logs?follow=true"}
}

// open starts a follow of path with cred and returns the response once its
// headers came (the follower holds its slot and its subscription by then),
// and the function that ends it.
func (f *followFixture) open(t *testing.T, path, cred string) (*http.Response, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", f.srv.URL+path, nil)
	req.Header.Set("X-Test-Credential", cred)
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		cancel()
		t.Fatalf("follow: %v", err)
	}
	return resp, func() { cancel(); resp.Body.Close() }
}

// waitUntil polls cond until it holds, failing with what after timeout:
// the server notices a closed follower asynchronously.
func waitUntil(t *testing.T, timeout time.Duration, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", timeout, what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLogFollowerCaps opens log followers until the caps refuse them: one
// credential gets its per-credential share (2) over both follow endpoints
// and then 429 with Retry-After and the documented {"detail"} shape, the
// server's total (3) refuses a credential that has none open, a login
// session's streams count against its user, a plain read of the log is
// never refused, and a follower that closes gives its slot back.
func TestLogFollowerCaps(t *testing.T) {
	s := testService(t, 1<<20)
	s.FollowersPerCredential, s.FollowersMax = 2, 3
	f := newFollowFixture(t, s)
	a, b, c := uuid.NewString(), uuid.NewString(), uuid.NewString()
	user := "session:" + uuid.NewString()
	open := map[string]func(){}
	steps := []struct {
		name   string
		cred   string
		path   string // empty: close the follower close (a name's first word)
		close  string
		want   int
		detail string // in the 429's detail
	}{
		{name: "a1", cred: a, path: f.dep, want: 200},
		{name: "a2", cred: a, path: f.rev, want: 200},
		{name: "a3 over its share", cred: a, path: f.dep, want: 429, detail: "This credential already follows 2 log streams"},
		{name: "a3 over its share, revision log", cred: a, path: f.rev, want: 429, detail: "This credential"},
		{name: "a reads without following", cred: a, path: strings.TrimSuffix(f.dep, "?follow=true"), want: 200},
		{name: "b1", cred: b, path: f.rev, want: 200},
		{name: "c1 over the total", cred: c, path: f.dep, want: 429, detail: "The server already follows 3 log streams"},
		{name: "a1 closes", close: "a1"},
		{name: "a4 takes the freed slot", cred: a, path: f.dep, want: 200},
		{name: "c1 still over the total", cred: c, path: f.rev, want: 429, detail: "The server"},
		{name: "b1 closes", close: "b1"},
		{name: "c2 takes the freed slot", cred: c, path: f.rev, want: 200},
		{name: "a2 closes", close: "a2"},
		{name: "a4 closes", close: "a4"},
		{name: "s1", cred: user, path: f.dep, want: 200},
		{name: "s2, another session of the user", cred: user, path: f.rev, want: 200},
		{name: "s3 over the user's share", cred: user, path: f.dep, want: 429, detail: "This credential"},
	}
	for _, st := range steps {
		if st.path == "" {
			total, _ := s.followers().inUse("")
			open[st.close]()
			delete(open, st.close)
			waitUntil(t, 10*time.Second, func() string { return st.name + ": the server still counts the closed follower" },
				func() bool { n, _ := s.followers().inUse(""); return n == total-1 })
			continue
		}
		resp, end := f.open(t, st.path, st.cred)
		t.Cleanup(end)
		if resp.StatusCode != st.want {
			t.Fatalf("%s: status %d, want %d", st.name, resp.StatusCode, st.want)
		}
		if st.want == 200 {
			if !strings.Contains(st.path, "follow") {
				end()
				continue
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
				t.Fatalf("%s: content type %q", st.name, ct)
			}
			open[strings.Fields(st.name)[0]] = end // "a4 takes the freed slot" is a4
			continue
		}
		var body map[string]any
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &body); err != nil || len(body) != 1 {
			t.Fatalf("%s: body %s is not {\"detail\": ...}", st.name, raw)
		}
		if d, _ := body["detail"].(string); !strings.Contains(d, st.detail) {
			t.Fatalf("%s: detail %q, want it to say %q", st.name, d, st.detail)
		}
		if ra := resp.Header.Get("Retry-After"); ra != "5" {
			t.Fatalf("%s: Retry-After %q", st.name, ra)
		}
	}
	if n, _ := s.followers().inUse(""); n != len(open) {
		t.Fatalf("the server counts %d followers, %d are open", n, len(open))
	}
}

// memInUse is the heap and the goroutine stacks in use after a full
// collection.
func memInUse() (heap, stacks uint64) {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC() // the second empties what sync.Pools kept from the first
	runtime.ReadMemStats(&m)
	return m.HeapInuse, m.StackInuse
}

// TestLogFollowersReleased opens many followers, some of them on a topic
// that is written to meanwhile, and closes them: while they are open each
// holds a bounded heap (the client's end and both ends' connection
// buffers included, about 36 KiB; a preallocated 512-line channel was
// another 64 KiB per follower on its own), and once they are gone every
// goroutine has returned, no subscription and no slot is left, and the
// heap and stacks are back near where they started.
func TestLogFollowersReleased(t *testing.T) {
	const k = 400
	s := testService(t, 1<<20)
	s.FollowersPerCredential, s.FollowersMax = k, k
	s.Heartbeat = time.Minute // no heartbeat writes during the test
	f := newFollowFixture(t, s)
	// Warm up what is allocated once (the router, the schema, the pools),
	// so that the baseline holds it.
	_, end := f.open(t, f.dep, uuid.NewString())
	end()
	waitUntil(t, 10*time.Second, func() string { return "the warm-up follower was not released" },
		func() bool { n, _ := s.followers().inUse(""); return n == 0 })
	baseHeap, baseStacks := memInUse()
	baseG := runtime.NumGoroutine()

	var ends []func()
	for i := 0; i < k; i++ {
		path := f.dep
		if i%2 == 1 {
			path = f.rev
		}
		resp, end := f.open(t, path, uuid.NewString())
		if resp.StatusCode != 200 {
			t.Fatalf("follower %d: status %d", i, resp.StatusCode)
		}
		ends = append(ends, end)
	}
	// Lines reach the deployment's followers, and wait in their queues.
	dep := strings.Split(f.dep, "/")[3]
	for i := 0; i < 20; i++ {
		s.book().hub.Publish(deploymentTopic(dep), LogEntry{ID: int64(i + 1), Phase: "agent", Message: "a line"})
	}
	openHeap, openStacks := memInUse()
	per := int64(openHeap-baseHeap) / k
	t.Logf("baseline: heap %d KiB, stacks %d KiB, %d goroutines; %d followers open: heap %d KiB (%d KiB each), stacks %d KiB, %d goroutines",
		baseHeap>>10, baseStacks>>10, baseG, k, openHeap>>10, per>>10, openStacks>>10, runtime.NumGoroutine())
	if per > 56<<10 {
		t.Errorf("each open follower holds %d KiB of heap, more than 56 KiB", per>>10)
	}
	for _, end := range ends {
		end()
	}
	waitUntil(t, 30*time.Second, func() string {
		n, _ := s.followers().inUse("")
		return "followers still counted: " + strconv.Itoa(n) + "; goroutines " + strconv.Itoa(runtime.NumGoroutine()) + ", baseline " + strconv.Itoa(baseG)
	}, func() bool {
		n, _ := s.followers().inUse("")
		return n == 0 && runtime.NumGoroutine() <= baseG
	})
	if n := s.book().hub.subscribers(deploymentTopic(dep)); n != 0 {
		t.Fatalf("%d subscriptions left in the hub", n)
	}
	heap, stacks := memInUse()
	t.Logf("closed: heap %d KiB, stacks %d KiB", heap>>10, stacks>>10)
	// The baseline plus an eighth of what the open followers held: what
	// stays is the runtime's and net/http's bookkeeping (maps that do not
	// shrink), not a part of every follower.
	base, open, after := baseHeap+baseStacks, openHeap+openStacks, heap+stacks
	if after > base+(open-base)/8 {
		t.Fatalf("heap and stacks %d KiB after the followers closed, baseline %d KiB, %d KiB while open",
			after>>10, base>>10, open>>10)
	}
}
