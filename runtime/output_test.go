package runtime

import (
	"reflect"
	"strings"
	"sync"
	"testing"
)

type collect struct {
	mu    sync.Mutex
	lines []string
}

func (c *collect) Line(l OutputLine) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lines = append(c.lines, l.Text)
}

func TestLineWriter(t *testing.T) {
	long := strings.Repeat("x", MaxOutputLine)
	cases := []struct {
		name   string
		writes []string
		want   []string
	}{
		{"whole lines", []string{"a\nb\n"}, []string{"a", "b"}},
		{"split across writes", []string{"he", "llo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"crlf", []string{"dos\r\n"}, []string{"dos"}},
		{"empty line kept", []string{"\n\n"}, []string{"", ""}},
		{"unterminated last line on close", []string{"a\npartial"}, []string{"a", "partial"}},
		{"exactly the bound", []string{long + "\n"}, []string{long}},
		{"over the bound is cut", []string{long + "yz\n"}, []string{long, "yz"}},
		{"over the bound without newline", []string{long, "y"}, []string{long, "y"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c collect
			w := NewLineWriter(&c, "d", "r", "stdout")
			for _, s := range tc.writes {
				if n, err := w.Write([]byte(s)); n != len(s) || err != nil {
					t.Fatalf("write: %d %v", n, err)
				}
			}
			_ = w.Close()
			if !reflect.DeepEqual(c.lines, tc.want) {
				t.Fatalf("lines %q, want %q", c.lines, tc.want)
			}
		})
	}
}
