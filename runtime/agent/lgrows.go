package agent

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
)

// Rows of language-host checkpoints are stored in a compact binary form:
// a format byte, then length-prefixed fields. The serializer's bytes are
// stored as they are (JSON would hold them as base64, a third larger), so a
// run's rows take fewer pages and a commit rewrites fewer of them. Rows
// written before this format are JSON objects (their first byte is '{');
// both are read, so an existing database needs no rewrite of its values.
// Checkpoint rows written before packed threads (store_lgpack.go) were
// stored deflated when that was smaller (format 2); they are still read.
// Rows are no longer deflated one by one: a thread's rows are compressed
// together once its run ends, four times smaller than row by row, and
// deflating each row cost the run path 5% of the agent's CPU.
const (
	lgRowFormat      = 1
	lgRowFormatFlate = 2
)

var flateReaders = sync.Pool{New: func() any { return flate.NewReader(nil) }}

// inflateRow returns a format-2 row as format 1; other rows unchanged.
func inflateRow(v []byte) ([]byte, error) {
	if len(v) == 0 || v[0] != lgRowFormatFlate {
		return v, nil
	}
	r := flateReaders.Get().(io.ReadCloser)
	defer flateReaders.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(v[1:]), nil); err != nil {
		return nil, err
	}
	out := []byte{lgRowFormat}
	out, err := appendAll(out, r)
	if err != nil {
		return nil, fmt.Errorf("inflate checkpoint row: %w", err)
	}
	return out, nil
}

func appendAll(b []byte, r io.Reader) ([]byte, error) {
	var buf bytes.Buffer
	buf.Write(b)
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

var errShortRow = errors.New("truncated checkpoint row")

type rowEnc struct{ b []byte }

func (e *rowEnc) bytes(p []byte) {
	e.b = binary.AppendUvarint(e.b, uint64(len(p)))
	e.b = append(e.b, p...)
}

func (e *rowEnc) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *rowEnc) uint(n uint64) { e.b = binary.AppendUvarint(e.b, n) }

type rowDec struct {
	b   []byte
	err error
}

func (d *rowDec) uint() uint64 {
	if d.err != nil {
		return 0
	}
	n, k := binary.Uvarint(d.b)
	if k <= 0 {
		d.err = errShortRow
		return 0
	}
	d.b = d.b[k:]
	return n
}

func (d *rowDec) bytes() []byte {
	n := d.uint()
	if d.err != nil {
		return nil
	}
	if uint64(len(d.b)) < n {
		d.err = errShortRow
		return nil
	}
	// A copy: rows are read inside a bbolt transaction, whose memory is
	// not valid after it ends.
	out := append([]byte{}, d.b[:n]...)
	d.b = d.b[n:]
	return out
}

func (d *rowDec) str() string { return string(d.bytes()) }

func isJSONRow(v []byte) bool { return len(v) > 0 && v[0] == '{' }

func encodeCheckpoint(c *lgCheckpoint) []byte {
	e := rowEnc{b: []byte{lgRowFormat}}
	e.str(c.RunID)
	e.str(c.Parent)
	e.str(c.Checkpoint.T)
	e.bytes(c.Checkpoint.B)
	e.str(c.Metadata.T)
	e.bytes(c.Metadata.B)
	e.bytes(c.MetadataJSON)
	channels := make([]string, 0, len(c.ChannelVersions))
	for ch := range c.ChannelVersions {
		channels = append(channels, ch)
	}
	sort.Strings(channels)
	e.uint(uint64(len(channels)))
	for _, ch := range channels {
		e.str(ch)
		e.str(c.ChannelVersions[ch])
	}
	return e.b
}

// decodeCheckpoint reads a checkpoint row; withMeta false skips decoding
// the metadata's JSON copy (only list filters need it).
func decodeCheckpoint(v []byte, withMeta bool) (*lgCheckpoint, error) {
	var c lgCheckpoint
	if isJSONRow(v) {
		if err := json.Unmarshal(v, &c); err != nil {
			return nil, err
		}
		return &c, nil
	}
	v, err := inflateRow(v)
	if err != nil {
		return nil, err
	}
	if len(v) == 0 || v[0] != lgRowFormat {
		return nil, fmt.Errorf("unknown checkpoint row format")
	}
	d := rowDec{b: v[1:]}
	c.RunID = d.str()
	c.Parent = d.str()
	c.Checkpoint.T = d.str()
	c.Checkpoint.B = d.bytes()
	c.Metadata.T = d.str()
	c.Metadata.B = d.bytes()
	mj := d.bytes()
	if withMeta && len(mj) > 0 {
		c.MetadataJSON = mj
	}
	n := d.uint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = errShortRow
	}
	if d.err == nil {
		c.ChannelVersions = make(map[string]string, n)
		for range n {
			ch := d.str()
			c.ChannelVersions[ch] = d.str()
		}
	}
	return &c, d.err
}

func encodeBlob(b *lgBlob) []byte {
	e := rowEnc{b: []byte{lgRowFormat}}
	e.str(b.RunID)
	e.str(b.T)
	e.bytes(b.B)
	return e.b
}

func decodeBlob(v []byte) (*lgBlob, error) {
	var b lgBlob
	if isJSONRow(v) {
		return &b, json.Unmarshal(v, &b)
	}
	if len(v) == 0 || v[0] != lgRowFormat {
		return nil, fmt.Errorf("unknown channel value row format")
	}
	d := rowDec{b: v[1:]}
	b.RunID = d.str()
	b.T = d.str()
	b.B = d.bytes()
	return &b, d.err
}

func encodeWrite(w *lgWrite) []byte {
	e := rowEnc{b: []byte{lgRowFormat}}
	e.str(w.RunID)
	e.str(w.TaskID)
	e.str(w.TaskPath)
	e.str(w.Channel)
	e.uint(uint64(uint32(w.Idx)))
	e.str(w.T)
	e.bytes(w.B)
	return e.b
}

func decodeWrite(v []byte) (*lgWrite, error) {
	var w lgWrite
	if isJSONRow(v) {
		return &w, json.Unmarshal(v, &w)
	}
	if len(v) == 0 || v[0] != lgRowFormat {
		return nil, fmt.Errorf("unknown pending write row format")
	}
	d := rowDec{b: v[1:]}
	w.RunID = d.str()
	w.TaskID = d.str()
	w.TaskPath = d.str()
	w.Channel = d.str()
	w.Idx = int32(uint32(d.uint()))
	w.T = d.str()
	w.B = d.bytes()
	return &w, d.err
}

// rowRunID is the run that wrote a row of any kind, in either format.
func rowRunID(v []byte) (string, error) {
	if isJSONRow(v) {
		var row struct {
			RunID string `json:"run_id"`
		}
		err := json.Unmarshal(v, &row)
		return row.RunID, err
	}
	v, err := inflateRow(v)
	if err != nil {
		return "", err
	}
	if len(v) == 0 || v[0] != lgRowFormat {
		return "", fmt.Errorf("unknown checkpoint row format")
	}
	d := rowDec{b: v[1:]}
	id := d.str()
	return id, d.err
}

// Kinds of rows in the lg bucket, after thread ‖ 0 ‖ ns ‖ 0.
const (
	lgKindBlob       = "b"
	lgKindCheckpoint = "c"
	lgKindWrite      = "w"
)
