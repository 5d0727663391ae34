package agent

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestUnmarshalStoredDeepCheckpoint: a checkpoint nested past
// encoding/json's limit decodes into its type, every field in place, and
// encodes back to what was stored.
func TestUnmarshalStoredDeepCheckpoint(t *testing.T) {
	const depth = 10010
	deep := strings.Repeat(`{"d":`, depth) + `[1.5,"xé",true,null]` + strings.Repeat("}", depth)
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	cp := Checkpoint{Values: map[string]any{"deep": "__DEEP__", "n": 2.0}, Next: []string{}, Tasks: []any{},
		Checkpoint: CheckpointRef{ThreadID: "t", CheckpointID: "c"}, Metadata: map[string]any{"step": 1.0},
		CreatedAt: now, ParentConfig: &CheckpointRef{ThreadID: "t", CheckpointID: "p"}, Interrupts: []any{}}
	shallow, _ := json.Marshal(cp)
	raw := []byte(strings.Replace(string(shallow), `"__DEEP__"`, deep, 1))
	var plain Checkpoint
	if err := json.Unmarshal(raw, &plain); err == nil {
		t.Fatal("encoding/json decoded the deep record; the test needs a deeper one")
	}
	var got Checkpoint
	if err := unmarshalStored(raw, &got); err != nil {
		t.Fatal(err)
	}
	if got.Checkpoint != cp.Checkpoint || *got.ParentConfig != *cp.ParentConfig || !got.CreatedAt.Equal(now) ||
		got.Values["n"] != 2.0 || got.Metadata["step"] != 1.0 || got.Next == nil || got.Interrupts == nil {
		t.Fatalf("fields lost: %+v", got)
	}
	again, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(raw) {
		t.Fatalf("re-encoded record differs:\n%.200s\n%.200s", again, raw)
	}
}

// FuzzParseDeep: on whatever encoding/json decodes into an any, parseDeep
// gives the same value.
func FuzzParseDeep(f *testing.F) {
	for _, s := range []string{`{"a":[1,2,{"b":null}],"c":"\u00e9\n"}`, `[]`, `{}`, `-1.5e3`, `"\ud83d\ude00"`, `{"a":1,"a":2}`, ` [ true , false ] `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want any
		if json.Unmarshal(b, &want) != nil {
			_, _ = parseDeep(b) // must not panic
			return
		}
		got, err := parseDeep(b)
		if err != nil {
			t.Fatalf("parseDeep(%q): %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("parseDeep(%q) = %#v, want %#v", b, got, want)
		}
	})
}
