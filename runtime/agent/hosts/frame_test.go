package hosts

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestFrameReader(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		max   int
		want  []Message
		fails bool // the stream ends in an ErrFrame (else io.EOF)
	}{
		{name: "request, reply, notification", in: `{"id":1,"m":"run","p":{"a":1}}` + "\n" + `{"id":1,"r":null}` + "\n" + `{"m":"ready","p":{}}` + "\n",
			want: []Message{{ID: 1, M: "run", P: []byte(`{"a":1}`)}, {ID: 1, R: []byte(`null`)}, {M: "ready", P: []byte(`{}`)}}},
		{name: "error reply", in: `{"id":7,"e":{"type":"ValueError","message":"bad"}}` + "\n", want: []Message{{ID: 7, E: &Error{Type: "ValueError", Message: "bad"}}}},
		{name: "blank lines and CRLF skipped", in: "\n\r\n" + `{"m":"x"}` + "\r\n\n", want: []Message{{M: "x"}}},
		{name: "not JSON", in: "hello\n", fails: true},
		{name: "not an object", in: "[1,2]\n", fails: true},
		{name: "reply without id", in: `{"r":1}` + "\n", fails: true},
		{name: "reply without result", in: `{"id":3}` + "\n", fails: true},
		{name: "method and result", in: `{"id":3,"m":"x","r":1}` + "\n", fails: true},
		{name: "negative id", in: `{"id":-3,"m":"x"}` + "\n", fails: true},
		{name: "truncated at the end", in: `{"m":"x"}` + "\n" + `{"m":"y"`, want: []Message{{M: "x"}}, fails: true},
		{name: "frame at the limit", in: `{"m":"xxxxxxxxx"}` + "\n", max: 17, want: []Message{{M: "xxxxxxxxx"}}},
		{name: "frame over the limit", in: `{"m":"xxxxxxxxxx"}` + "\n", max: 17, fails: true},
		{name: "long frame over the reader's buffer", in: `{"m":"` + strings.Repeat("a", 200<<10) + `"}` + "\n", want: []Message{{M: strings.Repeat("a", 200<<10)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fr := NewFrameReader(strings.NewReader(tc.in), tc.max)
			var got []Message
			var err error
			for {
				var m Message
				if m, err = fr.Next(); err != nil {
					break
				}
				got = append(got, m)
			}
			if tc.fails != errors.Is(err, ErrFrame) || !tc.fails && !errors.Is(err, io.EOF) {
				t.Fatalf("ended with %v, want a frame error: %v", err, tc.fails)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %d frames, want %d", len(got), len(tc.want))
			}
			for i := range got {
				g, w := got[i], tc.want[i]
				if g.ID != w.ID || g.M != w.M || !bytes.Equal(g.P, w.P) || !bytes.Equal(g.R, w.R) || (g.E == nil) != (w.E == nil) || g.E != nil && *g.E != *w.E {
					t.Fatalf("frame %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

// FuzzFrameReader: whatever a host writes, the reader returns valid
// messages or an error, never panics, and never returns a frame over the
// limit.
func FuzzFrameReader(f *testing.F) {
	for _, s := range []string{`{"id":1,"m":"run","p":{}}` + "\n", `{"id":1,"r":null}` + "\n{\"m\":\"x\"}", "\n\n", `{"id":1,"e":{"type":"x"}}`, "[", `{"id":-1}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := NewFrameReader(bytes.NewReader(in), 64)
		for range 1000 {
			m, err := fr.Next()
			if err != nil {
				return
			}
			if err := m.check(); err != nil {
				t.Fatalf("returned an invalid frame: %v", err)
			}
			raw, _ := m.P.MarshalJSON()
			if len(raw) > 64 {
				t.Fatalf("frame params of %d bytes over the 64-byte limit", len(raw))
			}
		}
	})
}
