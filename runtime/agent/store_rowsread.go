package agent

import (
	"bytes"
	"sort"
	"strings"
	"sync/atomic"

	bolt "go.etcd.io/bbolt"
)

// rowsRead reads a bucket as it stands with a thread's journaled rows:
// bbolt's rows with those newer than the read's horizon laid over them.
// Readers of checkpoint rows (the host's getTuple and list, mostly during
// the very run that wrote) and of one thread's records (ViewThread,
// store_readview.go) then need no write transaction.
type rowsRead struct {
	b      rowBase
	over   map[string][]byte // nil: deleted
	keys   []string          // over's keys, sorted
	visits *atomic.Int64     // counts the rows scans hand out, when set
}

// reader returns the lg bucket of tx with ops' rows over it (ops of one
// thread, or of every thread for ""). A thread's reader reads only that
// thread's rows: a packed thread's come from its block (lgBase).
func reader(tx *bolt.Tx, thread string, ops []*wbOp) (*rowsRead, error) {
	base, err := lgBase(tx, thread)
	if err != nil {
		return nil, err
	}
	r := layRows(base, bLG, ops)
	r.visits = &lgRowsVisited
	return r, nil
}

// layRows returns base with the rows of bucket in ops laid over it.
func layRows(base rowBase, bucket string, ops []*wbOp) *rowsRead {
	r := &rowsRead{b: base}
	for _, op := range ops {
		for _, row := range op.rows {
			if row.bucket != bucket {
				continue
			}
			if r.over == nil {
				r.over = map[string][]byte{}
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
			// readers do not see. An index row's empty value is kept
			// non-nil: nil is a deletion.
			v := row.val
			if v == nil {
				v = []byte{}
			}
			r.over[k] = v
		}
	}
	if len(r.over) == 0 {
		return r
	}
	r.keys = make([]string, 0, len(r.over))
	for k := range r.over {
		r.keys = append(r.keys, k)
	}
	sort.Strings(r.keys)
	return r
}

func (r *rowsRead) get(k []byte) []byte {
	if v, ok := r.over[string(k)]; ok {
		return v
	}
	return r.b.Get(k)
}

// Get is get, for getJSON.
func (r *rowsRead) Get(k []byte) []byte { return r.get(k) }

func (r *rowsRead) visited() {
	if r.visits != nil {
		r.visits.Add(1)
	}
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

func (r *rowsRead) scanBack(prefix, below []byte, fn func(k, v []byte) bool) {
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
		r.visited()
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
func (r *rowsRead) scan(prefix []byte, fn func(k, v []byte) bool) {
	i := sort.SearchStrings(r.keys, string(prefix))
	c := r.b.Cursor()
	k, v := c.Seek(prefix)
	fn0 := fn
	fn = func(k, v []byte) bool {
		r.visited()
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
func (r *rowsRead) last(prefix []byte) ([]byte, []byte) {
	var lk, lv []byte
	r.scanLast(prefix, func(k, v []byte) { lk, lv = k, v })
	return lk, lv
}

// scanLast finds the last row under prefix: bbolt's by a seek, unless
// the overlay has a later key or deleted that one (then by a scan).
func (r *rowsRead) scanLast(prefix []byte, found func(k, v []byte)) {
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
