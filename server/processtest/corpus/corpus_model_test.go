package corpus_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// fakeAnswer is what the fake model says to every chat.
const fakeAnswer = "The corpus's fake model answers."

// fakeModel is an OpenAI-compatible model server for the corpus's
// templates, which reach it through their own configuration (a model
// named "openai/..." and OPENAI_BASE_URL): chat completions, streamed
// (server-sent events, as ChatOpenAI streams) or not, answer fakeAnswer;
// embeddings (the memory templates' store index) are fixed vectors.
type fakeModel struct {
	URL   string // the base URL, ".../v1"
	chats atomic.Int64
}

// startFakeModel listens on host, an address of this machine ("127.0.0.1",
// or the docker bridge's gateway, which containers can route to).
func startFakeModel(t *testing.T, host string) *fakeModel {
	t.Helper()
	m := &fakeModel{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", m.chat)
	mux.HandleFunc("POST /v1/embeddings", m.embeddings)
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/v1"
	return m
}

func (m *fakeModel) chat(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error": {"message": "bad request"}}`, http.StatusBadRequest)
		return
	}
	m.chats.Add(1)
	usage := map[string]any{"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-corpus", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": fakeAnswer}, "finish_reason": "stop"}},
			"usage":   usage})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	chunk := func(choices []any, extra map[string]any) {
		c := map[string]any{"id": "chatcmpl-corpus", "object": "chat.completion.chunk", "created": 1, "model": req.Model, "choices": choices}
		for k, v := range extra {
			c[k] = v
		}
		raw, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", raw)
	}
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "finish_reason": nil}}, nil)
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"content": fakeAnswer}, "finish_reason": nil}}, nil)
	chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": "stop"}}, nil)
	if req.StreamOptions.IncludeUsage {
		chunk([]any{}, map[string]any{"usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func (m *fakeModel) embeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model      string          `json:"model"`
		Input      json.RawMessage `json:"input"`
		Dimensions int             `json:"dimensions"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error": {"message": "bad request"}}`, http.StatusBadRequest)
		return
	}
	// One vector per input: a string, a list of strings, or of token lists.
	n := 1
	var list []json.RawMessage
	if json.Unmarshal(req.Input, &list) == nil && len(list) > 0 {
		var first any
		_ = json.Unmarshal(list[0], &first)
		if _, tokens := first.(float64); !tokens {
			n = len(list)
		}
	}
	dims := req.Dimensions
	if dims <= 0 {
		dims = 1536
	}
	data := make([]any, n)
	for i := range data {
		v := make([]float64, dims)
		v[i%dims] = 1
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": v}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": data, "model": req.Model,
		"usage": map[string]any{"prompt_tokens": 1, "total_tokens": 1}})
}
