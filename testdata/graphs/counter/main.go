// Command counter is an example command graph for `slipway agent`. It
// reads the run request as JSON on stdin and writes JSON Lines events on
// stdout: it answers the last human message with its length and keeps a
// running count of runs in the thread's state.
//
// Its input may ask it to misbehave, for tests of the protocol:
// {"fail": "message"} exits non-zero with that message on stderr,
// {"garbage": true} prints a line that is not JSON, {"interrupt": question}
// stops to ask it (a later run with command {"resume": answer} answers), and {"sleep": seconds}
// waits first (and honours SIGTERM, unless {"stubborn": true}: then only
// SIGKILL stops it).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

type request struct {
	Input   map[string]any `json:"input"`
	Command map[string]any `json:"command"`
	Values  map[string]any `json:"values"`
	RunID   string         `json:"run_id"`
}

func emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func main() {
	// `counter --wait SECONDS` sleeps and exits 0: a slow init container
	// for deploy tests.
	if len(os.Args) == 3 && os.Args[1] == "--wait" {
		d, err := time.ParseDuration(os.Args[2] + "s")
		if err != nil {
			fmt.Fprintln(os.Stderr, "counter: --wait takes seconds:", err)
			os.Exit(2)
		}
		time.Sleep(d)
		return
	}
	var req request
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		fmt.Fprintln(os.Stderr, "counter: bad request:", err)
		os.Exit(2)
	}
	if s, ok := req.Input["sleep"].(float64); ok {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		if req.Input["stubborn"] == true {
			// Swallow SIGTERM: the agent must fall back to SIGKILL.
			signal.Ignore(syscall.SIGTERM)
		}
		select {
		case <-time.After(time.Duration(s * float64(time.Second))):
		case <-sig:
			fmt.Fprintln(os.Stderr, "counter: stopped")
			os.Exit(143)
		}
	}
	if msg, ok := req.Input["fail"].(string); ok {
		fmt.Fprintln(os.Stderr, msg)
		os.Exit(1)
	}
	if q, ok := req.Input["interrupt"]; ok {
		emit(map[string]any{"event": "interrupt", "data": q})
		return
	}
	if answer, ok := req.Command["resume"]; ok {
		emit(map[string]any{"event": "updates", "node": "counter", "data": map[string]any{
			"messages": []any{map[string]any{"type": "ai", "content": fmt.Sprintf("resumed with %v", answer)}},
		}})
		return
	}
	if req.Input["garbage"] == true {
		fmt.Println("this is not json")
		return
	}
	last := ""
	msgs, _ := req.Values["messages"].([]any)
	for i := len(msgs) - 1; i >= 0; i-- {
		if m, ok := msgs[i].(map[string]any); ok && m["type"] == "human" {
			last, _ = m["content"].(string)
			break
		}
	}
	count, _ := req.Values["count"].(float64)
	emit(map[string]any{"event": "custom", "data": map[string]any{"progress": "counting"}})
	emit(map[string]any{"event": "updates", "node": "counter", "data": map[string]any{
		"count":    count + 1,
		"messages": []any{map[string]any{"type": "ai", "content": fmt.Sprintf("%d characters", len([]rune(last)))}},
	}})
}
