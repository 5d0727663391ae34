package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func nest(depth int) string {
	return strings.Repeat(`{"a":`, depth) + "1" + strings.Repeat("}", depth)
}

func TestCheckJSON(t *testing.T) {
	deepLoc := []any{"body"}
	for range MaxJSONDepth {
		deepLoc = append(deepLoc, "a")
	}
	cases := []struct {
		name, body string
		loc        []any  // nil: accepted
		typ        string // with loc
	}{
		{"object", `{"name":"a","secrets":[{"name":"A","value":"v"}]}`, nil, ""},
		{"empty", ``, nil, ""},
		{"syntax error is the decoder's", `{"a":`, nil, ""},
		{"same key in sibling objects", `[{"a":1},{"a":2}]`, nil, ""},
		{"same key at two levels", `{"a":{"a":1}}`, nil, ""},
		{"keys differing in case", `{"a":1,"A":2}`, nil, ""},
		{"escaped valid pair", `{"e":"\ud83d\ude00"}`, nil, ""},
		{"max depth", nest(MaxJSONDepth), nil, ""},
		{"arrays at max depth", strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth), nil, ""},
		{"too deep", nest(MaxJSONDepth + 1), deepLoc, "json_invalid"},
		{"duplicate key", `{"name":"a","name":"b"}`, []any{"body", "name"}, "json_invalid"},
		{"duplicate escaped key", `{"name":"a","n\u0061me":"b"}`, []any{"body", "name"}, "json_invalid"},
		{"duplicate nested", `{"secrets":[{"name":"A"},{"name":"B","value":"1","value":"2"}]}`, []any{"body", "secrets", 1, "value"}, "json_invalid"},
		{"duplicate in a large object", "{" + manyKeys(40) + `,"k7":0}`, []any{"body", "k7"}, "json_invalid"},
		{"invalid UTF-8 in a value", "{\"secrets\":[{\"name\":\"A\",\"value\":\"\xff\xfe\"}]}", []any{"body", "secrets", 0, "value"}, "string_unicode"},
		{"invalid UTF-8 in a key", "{\"ok\":1,\"b\xffd\":1}", []any{"body", "b\uFFFDd"}, "string_unicode"},
		{"lone high surrogate", `{"v":"\ud800"}`, []any{"body", "v"}, "string_unicode"},
		{"lone low surrogate", `{"v":["\udc00x"]}`, []any{"body", "v", 0}, "string_unicode"},
		{"top-level string", "\"\xc3\"", []any{"body"}, "string_unicode"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckJSON([]byte(tc.body))
			if tc.loc == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) != 1 {
				t.Fatalf("got %v, want a 422 at %v", err, tc.loc)
			}
			if e := ve.Errors[0]; !reflect.DeepEqual(e.Loc, tc.loc) || e.Type != tc.typ || e.Msg == "" {
				t.Fatalf("got %v %q %q, want loc %v type %s", e.Loc, e.Type, e.Msg, tc.loc, tc.typ)
			}
		})
	}
}

func manyKeys(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":%d`, i, i)
	}
	return strings.Join(parts, ",")
}

// TestDecodeJSONRefusesWhatCheckJSONRefuses: the shared decoder runs the
// check first.
func TestDecodeJSONRefusesWhatCheckJSONRefuses(t *testing.T) {
	r := &http.Request{Body: io.NopCloser(strings.NewReader(`{"name":"a","name":"b"}`))}
	var v struct {
		Name string `json:"name"`
	}
	var ve *ValidationError
	if err := DecodeJSON(r, &v, true); !errors.As(err, &ve) {
		t.Fatalf("duplicate key decoded: %v %+v", err, v)
	}
}

var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)

// refStats walks a valid body with encoding/json's tokenizer: its deepest
// nesting and whether an object repeats a key.
func refStats(body []byte) (depth int, dup bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	type obj struct {
		keys map[string]bool
		key  bool // the next string token is a key
	}
	var stack []*obj
	for {
		tok, err := dec.Token()
		if err != nil {
			return depth, dup
		}
		var top *obj
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.keys != nil && top.key
		if top != nil && top.keys != nil {
			top.key = !top.key
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{':
				stack = append(stack, &obj{keys: map[string]bool{}, key: true})
			case '[':
				stack = append(stack, &obj{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].keys != nil {
					stack[len(stack)-1].key = true
				}
				continue
			}
			depth = max(depth, len(stack))
		case string:
			if isKey {
				dup = dup || top.keys[v]
				top.keys[v] = true
			}
		}
	}
}

// FuzzCheckJSON compares CheckJSON with encoding/json on valid JSON: a
// refusal must name a real problem, and an accepted body must decode with
// no key lost, no deeper than MaxJSONDepth, with every string intact.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":1,"a":2}`, `[{"x":{"y":[1,2,{"z":"\u00e9"}]}}]`,
		"{\"a\":\"\xff\"}", `{"a":"\ud800"}`, `{"a\"b":1,"a\u0022b":2}`, nest(MaxJSONDepth + 1), `"x"`, `1e5`, `{"":{"":1,"":2}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		err := CheckJSON(body)
		if !json.Valid(body) {
			var ve *ValidationError
			if err != nil && !errors.As(err, &ve) {
				t.Fatalf("invalid body: error %T %v", err, err)
			}
			return
		}
		depth, dup := refStats(body)
		if err == nil {
			if depth > MaxJSONDepth || dup || !utf8.Valid(body) {
				t.Fatalf("accepted %q: depth %d, duplicate %v, UTF-8 %v", body, depth, dup, utf8.Valid(body))
			}
			return
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Errors) != 1 {
			t.Fatalf("error %T %v", err, err)
		}
		switch e := ve.Errors[0]; {
		case e.Type == "string_unicode":
			if utf8.Valid(body) && !surrogateEscape.Match(body) {
				t.Fatalf("%q refused for UTF-8: %v", body, e)
			}
		case strings.HasPrefix(e.Msg, "duplicate key"):
			if !dup {
				t.Fatalf("%q refused for a duplicate key: %v", body, e)
			}
		case strings.HasPrefix(e.Msg, "JSON nesting"):
			if depth <= MaxJSONDepth {
				t.Fatalf("%q (depth %d) refused as too deep", body, depth)
			}
		default:
			t.Fatalf("unexpected refusal %v", e)
		}
	})
}

// typicalBody is a control-plane create of about 2 KB.
func typicalBody() []byte {
	secrets := make([]map[string]any, 12)
	for i := range secrets {
		secrets[i] = map[string]any{"name": fmt.Sprintf("SECRET_%d", i), "value": strings.Repeat("s", 40)}
	}
	b, _ := json.Marshal(map[string]any{"name": "my-agent", "source": "internal_source",
		"source_config": map[string]any{"resource_spec": map[string]any{"cpu": 1, "memory_mb": 1024,
			"labels": map[string]string{"team": "agents", "tier": "prod"}, "annotations": map[string]string{"a": "b"}}},
		"source_revision_config": map[string]any{"graph_config_path": "langgraph.json"}, "secrets": secrets})
	return b
}

// largeBody is an agent run input of about 1 MB: a conversation.
func largeBody() []byte {
	msgs := make([]map[string]any, 0, 2000)
	for i := 0; len(msgs) < cap(msgs); i++ {
		msgs = append(msgs, map[string]any{"role": "user", "id": fmt.Sprintf("m%d", i),
			"content": []any{map[string]any{"type": "text", "text": strings.Repeat("héllo wörld ", 40)}}})
	}
	b, _ := json.Marshal(map[string]any{"assistant_id": "agent", "input": map[string]any{"messages": msgs}})
	return b
}

func benchCheck(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := CheckJSON(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckJSON2KB(b *testing.B) { benchCheck(b, typicalBody()) }
func BenchmarkCheckJSON1MB(b *testing.B) { benchCheck(b, largeBody()) }

// The decode the check precedes, for scale.
func BenchmarkUnmarshal2KB(b *testing.B) { benchUnmarshal(b, typicalBody()) }
func BenchmarkUnmarshal1MB(b *testing.B) { benchUnmarshal(b, largeBody()) }

func benchUnmarshal(b *testing.B, body []byte) {
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}
