package controlplane

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
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
	s          *Service
	srv        *httptest.Server
	dep, rev   string // follow URL paths
	depID, rid uuid.UUID
}

// smallBuffers makes both ends' socket buffers small, so that a client
// that does not read blocks the server's writes after a few KiB rather
// than after the megabytes loopback sockets take.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4 << 10)
	}
	return c, err
}

func newFollowFixture(t *testing.T, s *Service) *followFixture {
	return newFollowFixtureOpt(t, s, false)
}

func newFollowFixtureOpt(t *testing.T, s *Service, small bool) *followFixture {
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
	srv := httptest.NewUnstartedServer(rt)
	if small {
		srv.Listener = smallBuffers{srv.Listener}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	tr := srv.Client().Transport.(*http.Transport)
	tr.MaxIdleConnsPerHost = -1 // every follow on its own connection, closed with it
	if small {
		tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetReadBuffer(4 << 10)
			}
			return c, err
		}
	}
	base := "/v2/deployments/" + dep.String()
	return &followFixture{s: s, srv: srv, dep: base + "/logs?follow=true", rev: base + "/revisions/" + rid.String() + "/logs?follow=true",
		depID: dep, rid: rid}
}

// setStatus sets the revision's status.
func (f *followFixture) setStatus(t *testing.T, status string) {
	t.Helper()
	if err := f.s.DB.Update(func(tx *bolt.Tx) error {
		rev, err := getRevision(tx, f.rid)
		if err != nil {
			return err
		}
		rev.Status = status
		return putRevision(tx, rev)
	}); err != nil {
		t.Fatal(err)
	}
}

// writeLog stores n build lines of the revision and n agent lines of its
// deployment, alternating in time, each message size bytes long.
func (f *followFixture) writeLog(t *testing.T, n, size int) {
	t.Helper()
	t0 := time.Now().UTC()
	for done := 0; done < n; done += 500 { // a transaction per 500 pairs
		if err := f.s.DB.Update(func(tx *bolt.Tx) error {
			for i := done; i < min(n, done+500); i++ {
				msg := strconv.Itoa(i) + " " + strings.Repeat("x", max(0, size-8))
				if _, err := appendLogID(tx, f.rid.String(), LogEntry{Timestamp: t0.Add(time.Duration(2*i) * time.Millisecond),
					Level: "info", Message: "build " + msg, Phase: "build"}); err != nil {
					return err
				}
				if _, err := appendAgentLog(tx, f.depID, LogEntry{Timestamp: t0.Add(time.Duration(2*i+1) * time.Millisecond),
					Level: "info", Message: "agent " + msg, Phase: "agent", RevisionID: f.rid.String()}, 1<<30); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
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

// TestFollowPagesInOrder follows a finished revision whose log is many
// catch-up pages long, build and agent lines interleaved in time: every
// line arrives once, in time order, and the stream ends.
func TestFollowPagesInOrder(t *testing.T) {
	s := testService(t, 1<<30)
	f := newFollowFixture(t, s)
	const n = 3000
	f.writeLog(t, n, 100) // 600 KB of lines: several pages of each source
	f.setStatus(t, RevisionBuildFailed)
	resp, end := f.open(t, f.rev, uuid.NewString())
	defer end()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		var e LogEntry
		if !ok || json.Unmarshal([]byte(data), &e) != nil || e.Phase == "" {
			continue // not a log line's data (the end event's)
		}
		got = append(got, strings.Join(strings.Fields(e.Message)[:2], " "))
	}
	if !strings.Contains(string(raw), "event: end") {
		t.Fatal("the stream did not end")
	}
	if len(got) != 2*n {
		t.Fatalf("%d lines, want %d", len(got), 2*n)
	}
	for i := 0; i < n; i++ {
		if got[2*i] != "build "+strconv.Itoa(i) || got[2*i+1] != "agent "+strconv.Itoa(i) {
			t.Fatalf("line %d: %q %q, want build and agent %d in turn", 2*i, got[2*i], got[2*i+1], i)
		}
	}
}

// TestSlowFollowersHoldAPage opens followers of a long log whose clients
// read nothing, so the server's writes block: each holds at most a page
// of the log and its hub queue while it waits, not the whole log decoded
// (which it used to read at once before writing any of it).
func TestSlowFollowersHoldAPage(t *testing.T) {
	s := testService(t, 1<<30)
	f := newFollowFixtureOpt(t, s, true)
	f.writeLog(t, 4000, 1000) // 8 MB of lines
	const k = 8
	base, _ := memInUse()
	for i := 0; i < k; i++ {
		resp, end := f.open(t, f.rev, uuid.NewString())
		defer end()
		// The first bytes came: the server has begun writing the log, and
		// blocks once the small socket buffers are full.
		if _, err := bufio.NewReaderSize(resp.Body, 16).Peek(1); err != nil {
			t.Fatal(err)
		}
	}
	heap, _ := memInUse()
	per := (int64(heap) - int64(base)) / k
	t.Logf("%d slow followers of an 8 MB log: %d KiB of heap each", k, per>>10)
	if per > 1<<20 {
		t.Fatalf("each slow follower holds %d KiB, more than 1 MiB", per>>10)
	}
}

// TestMergePages checks where a merged page of two sources ends: after
// the last line of a full page, since the source it came from may have
// lines before the other's next ones.
func TestMergePages(t *testing.T) {
	at := func(phase string, ms int) LogEntry {
		return LogEntry{Phase: phase, Message: phase + strconv.Itoa(ms), Timestamp: time.UnixMilli(int64(ms))}
	}
	b, a := func(ms int) LogEntry { return at("build", ms) }, func(ms int) LogEntry { return at("agent", ms) }
	cases := []struct {
		name               string
		own, agent         []LogEntry
		ownFull, agentFull bool
		want               string
		more               bool
	}{
		{"neither full", []LogEntry{b(1), b(3)}, []LogEntry{a(2), a(4)}, false, false, "build1 agent2 build3 agent4", false},
		{"build page full", []LogEntry{b(1), b(3)}, []LogEntry{a(2), a(4), a(5)}, true, false, "build1 agent2 build3", true},
		{"agent page full", []LogEntry{b(2)}, []LogEntry{a(1)}, false, true, "agent1", true},
		{"both full, agent ends first", []LogEntry{b(1), b(4)}, []LogEntry{a(2), a(3)}, true, true, "build1 agent2 agent3", true},
		{"full, nothing of the other", []LogEntry{b(1), b(2)}, nil, true, false, "build1 build2", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, more := mergePages(tc.own, tc.agent, tc.ownFull, tc.agentFull)
			var got []string
			for _, e := range out {
				got = append(got, e.Message)
			}
			if strings.Join(got, " ") != tc.want || more != tc.more {
				t.Fatalf("got %q more %v, want %q more %v", got, more, tc.want, tc.more)
			}
		})
	}
}
