package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The load itself: runs created and joined, sequentially and from
// concurrent clients, streams timed to their first events, and the probes
// of the loaded machine's floor.

// firstEvents streams one run on a fresh thread and times, from the
// stream request, its first event (metadata) and its first values event.
func firstEvents(base, graph string, i int) (time.Duration, time.Duration, error) {
	th, _, err := post(base+"/threads", map[string]any{})
	if err != nil {
		return 0, 0, err
	}
	tid, _ := th["thread_id"].(string)
	raw, _ := json.Marshal(map[string]any{"assistant_id": graph, "stream_mode": []string{"values"},
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("message %d", i)}}}})
	start := time.Now()
	resp, err := client.Post(base+"/threads/"+tid+"/runs/stream", "application/json", bytes.NewReader(raw))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("stream: %d", resp.StatusCode)
	}
	var first, values time.Duration
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		ev, ok := strings.CutPrefix(sc.Text(), "event:")
		if !ok {
			continue
		}
		if first == 0 {
			first = time.Since(start)
		}
		if strings.TrimSpace(ev) == "values" && values == 0 {
			values = time.Since(start)
		}
	}
	if values == 0 {
		return 0, 0, fmt.Errorf("stream of run %d had no values event", i)
	}
	return first, values, sc.Err()
}

// apiKeyTransport sends an API key with each request.
type apiKeyTransport struct {
	key  string
	next http.RoundTripper
}

func (t apiKeyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Api-Key", t.key)
	return t.next.RoundTrip(r)
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 60 * time.Second}

func post(url string, body any) (map[string]any, time.Duration, error) {
	raw, _ := json.Marshal(body)
	start := time.Now()
	resp, err := client.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	d := time.Since(start)
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return nil, d, fmt.Errorf("POST %s: %d %s", url, resp.StatusCode, strings.TrimSpace(string(b)))
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m, d, nil
}

// oneRun creates a thread, a run on it (timed), and joins the run.
func oneRun(base, graph string, i int) (time.Duration, error) {
	th, _, err := post(base+"/threads", map[string]any{})
	if err != nil {
		return 0, err
	}
	tid, _ := th["thread_id"].(string)
	run, d, err := post(base+"/threads/"+tid+"/runs", map[string]any{"assistant_id": graph,
		"input": map[string]any{"messages": []any{map[string]any{"role": "user", "content": fmt.Sprintf("message %d", i)}}}})
	if err != nil {
		return 0, err
	}
	rid, _ := run["run_id"].(string)
	resp, err := client.Get(base + "/threads/" + tid + "/runs/" + rid + "/join")
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, fmt.Errorf("join: %d", resp.StatusCode)
	}
	return d, nil
}

// concurrent runs n create-run-plus-join runs from conc clients and
// returns their creation latencies. With a pace, a run starts at most
// every pace: the clients are then an open load at a chosen rate instead
// of a closed loop that saturates the server.
func concurrent(base, graph string, conc, n int, pace time.Duration) ([]time.Duration, error) {
	var (
		mu     sync.Mutex
		lat    []time.Duration
		failed error
		wg     sync.WaitGroup
	)
	next := make(chan int)
	for w := 0; w < conc; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				d, err := oneRun(base, graph, i)
				mu.Lock()
				if err != nil && failed == nil {
					failed = err
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	var tick <-chan time.Time
	if pace > 0 {
		t := time.NewTicker(pace)
		defer t.Stop()
		tick = t.C
	}
	for i := 0; i < n; i++ {
		if tick != nil {
			<-tick
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return lat, failed
}

func measure(name, base, graph string, pids func() []int, seq, conc, concRuns, rssRuns, streamRuns int) result {
	r := result{name: name}
	if streamRuns > 0 {
		fmt.Printf("%s: %d sequential streamed runs ...\n", name, streamRuns)
		var first, values []time.Duration
		for i := 0; i < streamRuns; i++ {
			f, v, err := firstEvents(base, graph, i)
			if err != nil {
				fmt.Fprintln(os.Stderr, "loadtool:", err)
				os.Exit(1)
			}
			first, values = append(first, f), append(values, v)
		}
		r.firstEvent, r.firstValues, r.streamed = percentiles(first), percentiles(values), streamRuns
	}
	var lat []time.Duration
	// A load average taken now says how busy the machine was.
	if raw, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("%s: load average %s\n", name, strings.Join(strings.Fields(string(raw))[:3], " "))
	}
	fmt.Printf("%s: %d sequential runs ...\n", name, seq)
	start := time.Now()
	for i := 0; i < seq; i++ {
		d, err := oneRun(base, graph, i)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		lat = append(lat, d)
	}
	r.seqRate = float64(seq) / time.Since(start).Seconds()
	seqLat := append([]time.Duration(nil), lat...)
	r.seqLat = percentiles(lat)
	fmt.Printf("%s: %d runs from %d concurrent clients ...\n", name, concRuns, conc)
	start = time.Now()
	stopFloor := probeFloor(base)
	conLat, err := concurrent(base, graph, conc, concRuns, 0)
	r.floorGet, r.floorSync, r.floorN = stopFloor()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtool:", err)
		os.Exit(1)
	}
	r.concRate = float64(concRuns) / time.Since(start).Seconds()
	r.concLat = percentiles(conLat)
	r.allLat = percentiles(append(seqLat, conLat...))
	r.totalRuns = seq + concRuns
	if fill := rssRuns - r.totalRuns; fill > 0 {
		fmt.Printf("%s: %d more runs before reading RSS ...\n", name, fill)
		if _, err := concurrent(base, graph, conc, fill, 0); err != nil {
			fmt.Fprintln(os.Stderr, "loadtool:", err)
			os.Exit(1)
		}
		r.totalRuns = rssRuns
	}
	// A server may be several processes (the reference runs its API in a
	// child of the CLI): its memory is theirs together.
	for _, pid := range pids() {
		if pid <= 0 {
			continue
		}
		r.procs++
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(raw), "\n") {
			for _, f := range []struct {
				name string
				dst  *float64
			}{{"VmRSS:", &r.rssMB}, {"RssAnon:", &r.anonMB}, {"RssFile:", &r.fileMB}} {
				if rest, ok := strings.CutPrefix(line, f.name); ok {
					var kb float64
					fmt.Sscanf(strings.TrimSpace(rest), "%f kB", &kb)
					*f.dst += kb / 1024
					r.rssMeasure = true
				}
			}
		}
	}
	return r
}

// probeFloor measures, every 20 ms until the returned function is called,
// what the machine gives any request while the clients load it: the
// latency of GET base/ok and, apart, of a 512-byte write and fdatasync
// to a preallocated file in the temporary directory (where startAgent
// puts the agent's database). The function returns their percentiles and
// the number of probes.
func probeFloor(base string) func() (latency, latency, int) {
	stop, done := make(chan struct{}), make(chan struct{})
	var get, syncs []time.Duration
	go func() {
		defer close(done)
		f, err := os.CreateTemp("", "loadtool-floor-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadtool: floor probe:", err)
			return
		}
		defer os.Remove(f.Name())
		defer f.Close()
		// Written once, so a probe's write needs no block allocation.
		const size = 1 << 20
		if _, err := f.Write(make([]byte, size)); err != nil || f.Sync() != nil {
			return
		}
		block := make([]byte, 512)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			t := time.Now()
			resp, err := client.Get(base + "/ok")
			if err != nil {
				continue
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			get = append(get, time.Since(t))
			t = time.Now()
			if _, err := f.WriteAt(block, (i*512)%size); err != nil {
				continue
			}
			if err := syscall.Fdatasync(int(f.Fd())); err != nil {
				continue
			}
			syncs = append(syncs, time.Since(t))
		}
	}()
	return func() (latency, latency, int) {
		close(stop)
		<-done
		return percentiles(get), percentiles(syncs), min(len(get), len(syncs))
	}
}
