// Package hosts runs language hosts for `slipway agent`: long-lived child
// processes (one per language) that import a deployment's graphs and run
// them, talking to Slipway over a socketpair on their fd 3.
//
// The protocol (version ProtocolVersion) is newline-delimited JSON, one
// message per line, at most MaxFrame bytes:
//
//	request       {"id": n, "m": "method", "p": {...}}
//	reply         {"id": n, "r": {...}}  or  {"id": n, "e": {"type": "...", "message": "..."}}
//	notification  {"m": "method", "p": {...}}            (no id, no reply)
//
// Both sides send requests; each numbers its own, so a reply is matched to
// the request of the side that receives it. The host's first message is
// the notification "ready" (see Ready). The methods are listed in the
// README ("Language hosts").
package hosts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ProtocolVersion is the version of the host protocol this Slipway speaks;
// a host announcing another one is refused.
const ProtocolVersion = 1

// MaxFrame bounds one message: a checkpoint with its channel values
// travels in one, so it must fit a large conversation, but a host must not
// be able to make Slipway buffer without limit.
const MaxFrame = 32 << 20

// Message is one frame.
type Message struct {
	ID int64           `json:"id,omitempty"`
	M  string          `json:"m,omitempty"`
	P  json.RawMessage `json:"p,omitempty"`
	R  json.RawMessage `json:"r,omitempty"`
	E  *Error          `json:"e,omitempty"`
}

// Error is a failed request's answer.
type Error struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Type == "" {
		return e.Message
	}
	return e.Type + ": " + e.Message
}

// ErrFrame marks input that is not a valid frame.
var ErrFrame = errors.New("host protocol error")

// FrameReader reads frames from a stream.
type FrameReader struct {
	r   *bufio.Reader
	max int
}

// NewFrameReader reads frames of at most max bytes (MaxFrame when max ≤ 0).
func NewFrameReader(r io.Reader, max int) *FrameReader {
	if max <= 0 {
		max = MaxFrame
	}
	return &FrameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// Next returns the next frame. Blank lines are skipped. A frame that is too
// long, not a JSON object, or neither a request, a reply nor a notification
// is an ErrFrame; io.EOF means the stream ended between frames.
func (f *FrameReader) Next() (Message, error) {
	for {
		line, err := f.line()
		if err != nil {
			return Message{}, err
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			return Message{}, fmt.Errorf("%w: not a JSON object: %v", ErrFrame, err)
		}
		if err := m.check(); err != nil {
			return Message{}, err
		}
		return m, nil
	}
}

func (m *Message) check() error {
	switch {
	case m.M != "" && (m.R != nil || m.E != nil):
		return fmt.Errorf("%w: a message has a method or a result, not both", ErrFrame)
	case m.M == "" && m.ID == 0:
		return fmt.Errorf("%w: a reply needs an id", ErrFrame)
	case m.M == "" && m.R == nil && m.E == nil:
		return fmt.Errorf("%w: reply %d has neither r nor e", ErrFrame, m.ID)
	case m.ID < 0:
		return fmt.Errorf("%w: negative id %d", ErrFrame, m.ID)
	}
	return nil
}

// line reads up to a newline without ever holding more than max bytes.
func (f *FrameReader) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := f.r.ReadSlice('\n')
		if len(buf)+len(chunk) > f.max+1 { // +1: the newline itself
			return nil, fmt.Errorf("%w: frame longer than %d bytes", ErrFrame, f.max)
		}
		switch {
		case err == nil:
			if buf == nil {
				return chunk, nil
			}
			return append(buf, chunk...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			buf = append(buf, chunk...)
		case errors.Is(err, io.EOF):
			if len(buf)+len(chunk) > 0 {
				return nil, fmt.Errorf("%w: stream ended inside a frame", ErrFrame)
			}
			return nil, io.EOF
		default:
			return nil, err
		}
	}
}

// WriteFrame encodes m as one line.
func WriteFrame(w io.Writer, m *Message) error {
	raw, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if len(raw) > MaxFrame {
		return fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrFrame, len(raw), MaxFrame)
	}
	_, err = w.Write(append(raw, '\n'))
	return err
}
