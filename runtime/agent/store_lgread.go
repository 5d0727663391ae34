package agent

import (
	"bytes"
	"sort"
	"strings"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// lgRead reads the lg bucket as it stands with a thread's journaled rows:
// bbolt's rows with those newer than the read's horizon laid over them.
// Readers (the host's getTuple and list, mostly during the very run that
// wrote) then need no write transaction.
type lgRead struct {
	b    rowBase
	over map[string][]byte
	keys []string // over's keys, sorted
}

// reader returns the lg bucket of tx with thread's journaled rows over it
// (every thread's for ""). A thread's reader reads only that thread's
// rows: a packed thread's come from its block (lgBase).
func (p *pendingWrites) reader(tx *bolt.Tx, thread string) (*lgRead, error) {
	base, err := lgBase(tx, thread)
	if err != nil {
		return nil, err
	}
	r := &lgRead{b: base}
	if p == nil {
		return r, nil
	}
	ops := p.since(horizon(tx), thread)
	if len(ops) == 0 {
		return r, nil
	}
	r.over = map[string][]byte{}
	for _, op := range ops {
		for _, row := range op.rows {
			if row.bucket != bLG {
				continue
			}
			k := string(row.key)
			switch row.mode {
			case rowDelete:
				r.over[k] = nil
				continue
			case rowPutNew:
				if v, ok := r.over[k]; ok && v != nil || !ok && r.b.Get(row.key) != nil {
					continue
				}
			}
			// rowPutChanged keeps the stored row when the value is the
			// same; the row differs only in the run it names, which
			// readers do not see.
			r.over[k] = row.val
		}
	}
	r.keys = make([]string, 0, len(r.over))
	for k := range r.over {
		r.keys = append(r.keys, k)
	}
	sort.Strings(r.keys)
	return r, nil
}

func (r *lgRead) get(k []byte) []byte {
	if v, ok := r.over[string(k)]; ok {
		return v
	}
	return r.b.Get(k)
}

// lgRowsVisited counts the rows scans handed out (a test hook: a page of
// history must read only the rows it returns).
var lgRowsVisited atomic.Int64

// prefixEnd is the least key above every key with prefix (nil: none).
func prefixEnd(prefix []byte) []byte {
	end := storageCopy(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

func (r *lgRead) scanBack(prefix, below []byte, fn func(k, v []byte) bool) {
	if end := prefixEnd(prefix); below == nil || end != nil && bytes.Compare(end, below) < 0 {
		below = end
	}
	c := r.b.Cursor()
	var k, v []byte
	if below == nil {
		k, v = c.Last()
	} else if k, _ = c.Seek(below); k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	i := len(r.keys) - 1
	if below != nil {
		i = sort.SearchStrings(r.keys, string(below)) - 1
	}
	visit := func(k, v []byte) bool {
		lgRowsVisited.Add(1)
		return fn(k, v)
	}
	for {
		bk := k != nil && bytes.HasPrefix(k, prefix)
		ok := i >= 0 && strings.HasPrefix(r.keys[i], string(prefix))
		switch {
		case !bk && !ok:
			return
		case ok && (!bk || r.keys[i] >= string(k)):
			if bk && r.keys[i] == string(k) {
				k, v = c.Prev() // laid over
			}
			if ov := r.over[r.keys[i]]; ov != nil && !visit([]byte(r.keys[i]), ov) {
				return
			}
			i--
		default:
			if !visit(k, v) {
				return
			}
			k, v = c.Prev()
		}
	}
}

// scan calls fn for every row whose key has prefix, in key order, until
// fn returns false.
func (r *lgRead) scan(prefix []byte, fn func(k, v []byte) bool) {
	i := sort.SearchStrings(r.keys, string(prefix))
	c := r.b.Cursor()
	k, v := c.Seek(prefix)
	fn0 := fn
	fn = func(k, v []byte) bool {
		lgRowsVisited.Add(1)
		return fn0(k, v)
	}
	for {
		bk := k != nil && bytes.HasPrefix(k, prefix)
		ok := i < len(r.keys) && strings.HasPrefix(r.keys[i], string(prefix))
		switch {
		case !bk && !ok:
			return
		case ok && (!bk || r.keys[i] <= string(k)):
			if bk && r.keys[i] == string(k) {
				k, v = c.Next() // laid over
			}
			if ov := r.over[r.keys[i]]; ov != nil && !fn([]byte(r.keys[i]), ov) {
				return
			}
			i++
		default:
			if !fn(k, v) {
				return
			}
			k, v = c.Next()
		}
	}
}

// last returns the row with the greatest key that has prefix, or nils.
func (r *lgRead) last(prefix []byte) ([]byte, []byte) {
	var lk, lv []byte
	r.scanLast(prefix, func(k, v []byte) { lk, lv = k, v })
	return lk, lv
}

// scanLast finds the last row under prefix: bbolt's by a seek, unless
// the overlay has a later key or deleted that one (then by a scan).
func (r *lgRead) scanLast(prefix []byte, found func(k, v []byte)) {
	c := r.b.Cursor()
	k, v := c.Seek(append(storageCopy(prefix), 0xff))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	if k != nil && !bytes.HasPrefix(k, prefix) {
		k, v = nil, nil
	}
	i := sort.SearchStrings(r.keys, string(prefix)+"\xff") - 1
	overLast := i >= 0 && strings.HasPrefix(r.keys[i], string(prefix))
	if _, laid := r.over[string(k)]; !overLast && (k == nil || !laid) {
		if k != nil {
			found(k, v)
		}
		return
	}
	r.scan(prefix, func(k, v []byte) bool { found(k, v); return true })
}
