package runtime

import (
	"bytes"
	"io"
	"sync"
	"time"
)

// Output receives what a deployment's running agent (and the programs it
// starts: command graphs, language hosts) writes on stdout and stderr, one
// line at a time. Implementations must not block: a driver calls Line from
// the goroutine that drains the agent's pipe, and a slow sink would stall
// the agent itself.
type Output interface {
	Line(l OutputLine)
}

// OutputLine is one line of agent output.
type OutputLine struct {
	DeploymentID string
	RevisionID   string
	Stream       string // "stdout" or "stderr"
	Time         time.Time
	Text         string
}

// OutputCapturer is implemented by drivers that can hand their agents'
// output to the control plane. Capture is called once, before any deploy.
type OutputCapturer interface {
	CaptureOutput(Output)
}

// MaxOutputLine bounds one stored line: a longer one is cut into pieces of
// this size, so that one runaway line cannot fill a deployment's log.
const MaxOutputLine = 16 << 10

// LineWriter splits a stream into lines for an Output. Close hands over an
// unterminated last line. It is safe for concurrent use.
type LineWriter struct {
	out              Output
	dep, rev, stream string
	now              func() time.Time
	mu               sync.Mutex
	partial          bytes.Buffer
}

// NewLineWriter returns a writer of one stream of one revision's agent.
func NewLineWriter(out Output, dep, rev, stream string) *LineWriter {
	return &LineWriter{out: out, dep: dep, rev: rev, stream: stream, now: time.Now}
}

var _ io.WriteCloser = (*LineWriter)(nil)

func (w *LineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial.Write(p)
	for {
		b := w.partial.Bytes()
		i := bytes.IndexByte(b, '\n')
		switch {
		case i >= 0 && i <= MaxOutputLine:
			w.emit(string(bytes.TrimSuffix(b[:i], []byte{'\r'})))
			w.partial.Next(i + 1)
		case len(b) > MaxOutputLine:
			w.emit(string(b[:MaxOutputLine]))
			w.partial.Next(MaxOutputLine)
		default:
			return len(p), nil
		}
	}
}

// Close emits what is left of an unterminated last line.
func (w *LineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.partial.Len() > 0 {
		w.emit(w.partial.String())
		w.partial.Reset()
	}
	return nil
}

func (w *LineWriter) emit(text string) {
	w.out.Line(OutputLine{DeploymentID: w.dep, RevisionID: w.rev, Stream: w.stream, Time: w.now().UTC(), Text: text})
}
