package agent

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestHTTPExchangeRead: http.read answers what has arrived of a streamed
// request body, never an empty chunk before its end, and keeps failing
// once reading the client's body failed (ServeHTTPApp reports that).
func TestHTTPExchangeRead(t *testing.T) {
	broken := errors.New("client went away")
	for _, tc := range []struct {
		name string
		body io.Reader
		want []bodyChunk // answers in order; the last one ends the body or fails
		err  error
	}{
		{"no body", nil, []bodyChunk{{EOF: true}}, nil},
		{"what arrives, one read each", iotest.OneByteReader(strings.NewReader("ab")),
			[]bodyChunk{{Body: []byte("a")}, {Body: []byte("b")}, {EOF: true}}, nil},
		{"data with its end", iotest.DataErrReader(strings.NewReader("abc")), []bodyChunk{{Body: []byte("abc"), EOF: true}}, nil},
		{"empty reads are skipped", &emptyThen{n: 3, r: strings.NewReader("x")}, []bodyChunk{{Body: []byte("x")}, {EOF: true}}, nil},
		{"a failing body", iotest.ErrReader(broken), nil, broken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ex := &httpExchange{body: tc.body}
			for i, want := range tc.want {
				got, err := ex.read()
				if err != nil || string(got.Body) != string(want.Body) || got.EOF != want.EOF {
					t.Fatalf("read %d: %q eof=%v err=%v; want %q eof=%v", i, got.Body, got.EOF, err, want.Body, want.EOF)
				}
			}
			if tc.err == nil {
				return
			}
			for range 2 { // the failure sticks
				if _, err := ex.read(); !errors.Is(err, tc.err) {
					t.Fatalf("read: %v; want %v", err, tc.err)
				}
			}
			if !errors.Is(ex.readErr, tc.err) {
				t.Fatalf("readErr %v; want %v", ex.readErr, tc.err)
			}
		})
	}
}

// TestHTTPExchangeReadAfterAnswer: an http.read the host sent before its
// answer but that is served after it takes nothing from the body, which
// is the agent API's by then; the answer reports only the reads before it.
func TestHTTPExchangeReadAfterAnswer(t *testing.T) {
	for _, readFirst := range []bool{false, true} {
		body := strings.NewReader("abc")
		ex := &httpExchange{body: iotest.OneByteReader(body)}
		if readFirst {
			if _, err := ex.read(); err != nil {
				t.Fatal(err)
			}
		}
		read1, err := ex.end()
		if read1 != readFirst || err != nil {
			t.Fatalf("readFirst=%v: end() = %v, %v", readFirst, read1, err)
		}
		if _, err := ex.read(); !errors.Is(err, errAnswered) {
			t.Fatalf("readFirst=%v: a read after the answer: %v; want errAnswered", readFirst, err)
		}
		if rest, _ := io.ReadAll(body); len(rest) != 3-btoi(readFirst) {
			t.Fatalf("readFirst=%v: %q left of the body", readFirst, rest)
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// emptyThen returns n empty reads before reading r.
type emptyThen struct {
	n int
	r io.Reader
}

func (e *emptyThen) Read(p []byte) (int, error) {
	if e.n > 0 {
		e.n--
		return 0, nil
	}
	return e.r.Read(p)
}
