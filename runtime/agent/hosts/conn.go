package hosts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Handler answers the other side's requests and notifications. Requests
// run in goroutines of their own (a host's checkpoint writes wait on
// Slipway's database, and must not hold up the events of other runs);
// notifications run in the reading goroutine, in order, so the events of a
// run are seen before the reply that ends it.
type Handler interface {
	Request(ctx context.Context, method string, params json.RawMessage) (any, error)
	Notify(method string, params json.RawMessage)
}

// ErrClosed is returned by calls on a connection that has ended.
var ErrClosed = errors.New("host connection closed")

// Conn multiplexes requests in both directions over one stream.
type Conn struct {
	rw io.ReadWriteCloser
	h  Handler

	wmu sync.Mutex // one frame at a time on the wire

	mu      sync.Mutex
	next    int64
	pending map[int64]chan Message
	err     error // why the connection ended
	done    chan struct{}

	ctx    context.Context
	cancel context.CancelFunc
}

// NewConn serves rw until it fails or Close is called; Done is closed then.
func NewConn(rw io.ReadWriteCloser, h Handler) *Conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &Conn{rw: rw, h: h, pending: map[int64]chan Message{}, done: make(chan struct{}), ctx: ctx, cancel: cancel}
	go c.read()
	return c
}

// Done is closed when the connection has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the connection ended (nil while it is up).
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Close ends the connection; pending calls fail with ErrClosed.
func (c *Conn) Close() error {
	c.shutdown(ErrClosed)
	return nil
}

func (c *Conn) shutdown(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	pending := c.pending
	c.pending = map[int64]chan Message{}
	c.mu.Unlock()
	// Close before cancelling handlers: a handler that returns because of
	// the cancel must find the channel closed, not send the other side a
	// "context canceled" reply in place of the close it should see.
	_ = c.rw.Close()
	c.cancel()
	for _, ch := range pending {
		close(ch)
	}
	close(c.done)
}

func (c *Conn) read() {
	fr := NewFrameReader(c.rw, MaxFrame)
	for {
		m, err := fr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			c.shutdown(err)
			return
		}
		switch {
		case m.M != "" && m.ID != 0:
			go c.serve(m)
		case m.M != "":
			c.h.Notify(m.M, m.P)
		default:
			c.mu.Lock()
			ch := c.pending[m.ID]
			delete(c.pending, m.ID)
			c.mu.Unlock()
			if ch != nil {
				ch <- m
			}
		}
	}
}

func (c *Conn) serve(m Message) {
	res, err := c.h.Request(c.ctx, m.M, m.P)
	reply := Message{ID: m.ID}
	if err != nil {
		var pe *Error
		if !errors.As(err, &pe) {
			pe = &Error{Type: "Error", Message: err.Error()}
		}
		reply.E = pe
	} else {
		raw, merr := json.Marshal(res)
		if merr != nil {
			reply.E = &Error{Type: "Error", Message: merr.Error()}
		} else {
			reply.R = raw
		}
	}
	_ = c.write(&reply)
}

func (c *Conn) write(m *Message) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := WriteFrame(c.rw, m); err != nil {
		c.shutdown(fmt.Errorf("write to host: %w", err))
		return err
	}
	return nil
}

// Call sends a request and waits for its reply. When ctx ends first the
// call returns ctx's error; a late reply is dropped.
func (c *Conn) Call(ctx context.Context, method string, params any, out any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	ch := make(chan Message, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.next++
	id := c.next
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.write(&Message{ID: id, M: method, P: raw}); err != nil {
		return err
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return c.Err()
		}
		if m.E != nil {
			return m.E
		}
		if out != nil {
			return json.Unmarshal(m.R, out)
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return ctx.Err()
	}
}

// Notify sends a notification.
func (c *Conn) Notify(method string, params any) error {
	raw, err := json.Marshal(params)
	if err != nil {
		return err
	}
	if err := c.Err(); err != nil {
		return err
	}
	return c.write(&Message{M: method, P: raw})
}
