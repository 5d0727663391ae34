package agent

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/klauspost/compress/zstd"
	bolt "go.etcd.io/bbolt"
)

// Packed threads. Once a thread's run has ended, the flush that commits
// its rows moves every checkpoint row of the thread into one compressed
// block in lg_packed, keyed by the thread id: a run of the bench graph
// writes two dozen rows (11–12 KiB with their keys, three leaves of lg)
// that repeat channel names, versions, ids and the growing message list,
// and compressed together they take under 2 KiB (row by row, only the
// checkpoint rows compressed, they took 13.5 KiB a run in all). A thread's rows are in one place at a time: in lg, or in its
// block. Readers take the block as the thread's rows (lgBase); anything
// that writes a row of a packed thread first puts its rows back in lg
// (unpackThread); the flush after its next run packs it again, and a unit
// of work that is not a run's packs it again before it commits (repack).
const (
	bLGPacked = "lg_packed"

	lgPackFormat = 1
	// lgPackMax bounds the raw bytes of a thread packed: a thread that
	// grows beyond it stays in lg, so a long conversation is not
	// unpacked, rewritten and packed whole after every turn.
	lgPackMax = 256 << 10
)

// kvRow is one checkpoint row, key and value.
type kvRow struct{ k, v []byte }

// lgThreadOf is the thread a checkpoint row key (or prefix) begins with.
func lgThreadOf(k []byte) []byte {
	if i := bytes.IndexByte(k, 0); i >= 0 {
		return k[:i]
	}
	return k
}

// The packed blocks' codec: zstd (github.com/klauspost/compress, pure Go
// and maintained) at its fastest level, which packs a run's rows of the
// bench graph in about 30 µs against 65 for deflate, a little smaller,
// and unpacks them four times as fast. The flusher packs every thread
// whose run ended before it takes bbolt's writer lock (store_prepack.go).
// The decoder refuses a block that claims more than lgPackDecodeMax bytes.
const lgPackDecodeMax = 4 * lgPackMax

var (
	packEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	packDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(lgPackDecodeMax), zstd.WithDecoderConcurrency(0))
)

// encodePack compresses rows (all of thread's, in key order): per row the
// key after the thread id and the value, inflated (format 1) so that the
// codec sees across rows.
func encodePack(thread []byte, rows []kvRow) ([]byte, error) {
	var raw []byte
	for _, r := range rows {
		v, err := inflateRow(r.v)
		if err != nil {
			return nil, err
		}
		raw = binary.AppendUvarint(raw, uint64(len(r.k)-len(thread)))
		raw = append(raw, r.k[len(thread):]...)
		raw = binary.AppendUvarint(raw, uint64(len(v)))
		raw = append(raw, v...)
	}
	return packEncoder.EncodeAll(raw, []byte{lgPackFormat}), nil
}

var errBadPack = errors.New("damaged packed checkpoint rows")

// decodePack returns a packed thread's rows in key order.
func decodePack(thread, block []byte) ([]kvRow, error) {
	if len(block) == 0 || block[0] != lgPackFormat {
		return nil, errBadPack
	}
	raw, err := packDecoder.DecodeAll(block[1:], nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadPack, err)
	}
	d := rowDec{b: raw}
	var rows []kvRow
	for len(d.b) > 0 && d.err == nil {
		suffix := d.bytes()
		v := d.bytes()
		if d.err == nil && len(v) > 0 && v[0] == lgRowFormatFlate {
			// encodePack inflates every row it packs: a deflated one is
			// damage, which would fail the block's next encoding.
			return nil, errBadPack
		}
		if d.err == nil {
			rows = append(rows, kvRow{append(slices.Clip(thread), suffix...), v})
		}
	}
	if d.err != nil {
		return nil, errBadPack
	}
	return rows, nil
}

// packing is a thread's checkpoint rows gathered by a flush to be
// packed: its block's or lg's, with the flush's rows applied (applyRow).
type packing struct {
	rows    map[string][]byte
	inLG    map[string][]byte // the thread's rows in lg, as they are there
	packed  bool              // the thread has a block
	changed bool              // rows were applied

	// What seal decided store writes: nothing (skip), the rows staying in
	// lg (sorted, no block), or the block.
	sealed bool
	skip   bool
	sorted []kvRow
	block  []byte
}

func (m *packing) Get(k []byte) []byte { return m.rows[string(k)] }
func (m *packing) Put(k, v []byte) error {
	m.rows[string(k)] = v
	return nil
}
func (m *packing) Delete(k []byte) error {
	delete(m.rows, string(k))
	return nil
}

// seal decides what store writes, and compresses the block: the costly
// part, which the flusher does before it takes the writer lock (prepack).
func (m *packing) seal(thread []byte) error {
	if m.sealed {
		return nil
	}
	m.sealed = true
	if !m.changed && len(m.inLG) == 0 {
		m.skip = true // packed already, or nothing to pack
		return nil
	}
	rows := make([]kvRow, 0, len(m.rows))
	size := 0
	for k, v := range m.rows {
		rows = append(rows, kvRow{[]byte(k), v})
		size += len(k) + len(v)
	}
	slices.SortFunc(rows, func(a, b kvRow) int { return bytes.Compare(a.k, b.k) })
	m.sorted = rows
	if len(rows) == 0 || size > lgPackMax {
		// Too big to rewrite whole after every run (or nothing left):
		// the rows stay in lg.
		return nil
	}
	block, err := encodePack(thread, rows)
	if err != nil {
		return fmt.Errorf("pack thread %s: %w", thread, err)
	}
	m.block = block
	return nil
}

// store writes the gathered rows as thread's block (in lg when they are
// more than lgPackMax bytes), and deletes the thread's rows from lg.
func (m *packing) store(tx *bolt.Tx, thread []byte) error {
	if err := m.seal(thread); err != nil || m.skip {
		return err
	}
	lg, pk := tx.Bucket([]byte(bLG)), tx.Bucket([]byte(bLGPacked))
	if m.block == nil {
		// The rows stay in lg, changed where they differ.
		if m.packed {
			if err := pk.Delete(thread); err != nil {
				return fmt.Errorf("pack thread %s: %w", thread, err)
			}
		}
		for k := range m.inLG {
			if _, ok := m.rows[k]; !ok {
				if err := lg.Delete([]byte(k)); err != nil {
					return fmt.Errorf("pack thread %s: %w", thread, err)
				}
			}
		}
		lg.FillPercent = 0.9
		for _, r := range m.sorted {
			if old, ok := m.inLG[string(r.k)]; ok && bytes.Equal(old, r.v) {
				continue
			}
			if err := lg.Put(r.k, r.v); err != nil {
				return fmt.Errorf("pack thread %s: %w", thread, err)
			}
		}
		return nil
	}
	for k := range m.inLG {
		if err := lg.Delete([]byte(k)); err != nil {
			return fmt.Errorf("pack thread %s: %w", thread, err)
		}
	}
	// Thread ids are time-ordered: blocks are appended, leaves split full.
	pk.FillPercent = 0.9
	if err := pk.Put(thread, m.block); err != nil {
		return fmt.Errorf("pack thread %s: %w", thread, err)
	}
	return nil
}

// unpackThread puts a packed thread's rows back in lg, before a write to
// one of them; false: it was not packed.
func unpackThread(tx *bolt.Tx, thread []byte) (bool, error) {
	pk := tx.Bucket([]byte(bLGPacked))
	block := pk.Get(thread)
	if block == nil {
		return false, nil
	}
	rows, err := decodePack(thread, block)
	if err != nil {
		return false, fmt.Errorf("unpack thread %s: %w", thread, err)
	}
	lg := tx.Bucket([]byte(bLG))
	for _, r := range rows {
		if err := lg.Put(r.k, r.v); err != nil {
			return false, fmt.Errorf("unpack thread %s: %w", thread, err)
		}
	}
	if err := pk.Delete(thread); err != nil {
		return false, fmt.Errorf("unpack thread %s: %w", thread, err)
	}
	return true, nil
}

// unpack is unpackThread in a unit of work, which packs the thread again
// before it commits (repack).
func (t *boltTx) unpack(thread []byte) error {
	done, err := unpackThread(t.tx, thread)
	if done {
		t.unpacked = append(t.unpacked, string(thread))
	}
	return err
}

// repack packs again the threads the unit of work unpacked to change
// their rows (a rollback, a prune, update_state), unless a run of the
// thread now writes checkpoints through the journal: the flush after it
// ends packs them.
func (t *boltTx) repack(p *pendingWrites) error {
	for _, thread := range t.unpacked {
		if p.running(thread) {
			continue
		}
		pk, err := loadPacking(t.tx, []byte(thread))
		if err != nil {
			return err
		}
		if err := pk.store(t.tx, []byte(thread)); err != nil {
			return err
		}
	}
	return nil
}

// rowCursor is what reads of checkpoint rows need of a cursor (a
// *bolt.Cursor is one).
type rowCursor interface {
	First() ([]byte, []byte)
	Last() ([]byte, []byte)
	Seek([]byte) ([]byte, []byte)
	Next() ([]byte, []byte)
	Prev() ([]byte, []byte)
}

// rowBase is the checkpoint rows as bbolt holds them, packed or not.
type rowBase interface {
	Get([]byte) []byte
	Cursor() rowCursor
}

// lgBase is tx's checkpoint rows of thread ("": of every thread).
func lgBase(tx *bolt.Tx, thread string) (rowBase, error) {
	lg, pk := tx.Bucket([]byte(bLG)), tx.Bucket([]byte(bLGPacked))
	if pk == nil { // a database migrated no further than schema 9
		return boltBase{lg}, nil
	}
	if thread != "" {
		block := pk.Get([]byte(thread))
		if block == nil {
			return boltBase{lg}, nil
		}
		rows, err := decodePack([]byte(thread), block)
		if err != nil {
			return nil, fmt.Errorf("read thread %s: %w", thread, err)
		}
		return memRows(rows), nil
	}
	if k, _ := pk.Cursor().First(); k == nil {
		return boltBase{lg}, nil
	}
	return &mergedBase{lg: lg, pk: &packedCursor{c: pk.Cursor()}}, nil
}

type boltBase struct{ b *bolt.Bucket }

func (b boltBase) Get(k []byte) []byte { return b.b.Get(k) }
func (b boltBase) Cursor() rowCursor   { return b.b.Cursor() }

// memRows is one packed thread's rows, in key order.
type memRows []kvRow

func (m memRows) find(k []byte) int {
	return sort.Search(len(m), func(i int) bool { return bytes.Compare(m[i].k, k) >= 0 })
}

func (m memRows) Get(k []byte) []byte {
	if i := m.find(k); i < len(m) && bytes.Equal(m[i].k, k) {
		return m[i].v
	}
	return nil
}

func (m memRows) Cursor() rowCursor { return &memCursor{rows: m, i: -1} }

type memCursor struct {
	rows memRows
	i    int // -1 before the first row, len(rows) after the last
}

func (c *memCursor) at() ([]byte, []byte) {
	if c.i < 0 || c.i >= len(c.rows) {
		return nil, nil
	}
	return c.rows[c.i].k, c.rows[c.i].v
}

func (c *memCursor) First() ([]byte, []byte) { c.i = 0; return c.at() }
func (c *memCursor) Last() ([]byte, []byte)  { c.i = len(c.rows) - 1; return c.at() }
func (c *memCursor) Seek(k []byte) ([]byte, []byte) {
	c.i = c.rows.find(k)
	return c.at()
}
func (c *memCursor) Next() ([]byte, []byte) {
	c.i = min(c.i+1, len(c.rows))
	return c.at()
}
func (c *memCursor) Prev() ([]byte, []byte) {
	c.i = max(c.i-1, -1)
	return c.at()
}

// packedCursor walks the rows of every packed thread in key order,
// unpacking one block at a time.
type packedCursor struct {
	c      *bolt.Cursor
	thread []byte // the thread whose rows are in rows
	rows   memRows
}

func (p *packedCursor) load(thread, block []byte) memRows {
	if thread == nil {
		return nil
	}
	if !bytes.Equal(thread, p.thread) || p.rows == nil {
		// A damaged block reads as no rows in a list of every thread's
		// checkpoints; a read of the thread itself reports it (lgBase).
		rows, _ := decodePack(thread, block)
		p.thread, p.rows = storageCopy(thread), rows
	}
	return p.rows
}

// seek returns the first row at or after k.
func (p *packedCursor) seek(k []byte) ([]byte, []byte) {
	t, block := p.c.Seek(lgThreadOf(k))
	for t != nil {
		rows := p.load(t, block)
		if i := rows.find(k); i < len(rows) {
			return rows[i].k, rows[i].v
		}
		t, block = p.c.Next()
	}
	return nil, nil
}

// before returns the last row before k (nil k: the last row).
func (p *packedCursor) before(k []byte) ([]byte, []byte) {
	var t, block []byte
	if k == nil {
		t, block = p.c.Last()
	} else if t, block = p.c.Seek(lgThreadOf(k)); t == nil {
		t, block = p.c.Last()
	}
	for t != nil {
		rows := p.load(t, block)
		i := len(rows)
		if k != nil {
			i = rows.find(k)
		}
		if i > 0 {
			return rows[i-1].k, rows[i-1].v
		}
		t, block = p.c.Prev()
	}
	return nil, nil
}

// mergedBase is every thread's rows: lg's and the packed ones (a thread's
// are in one or the other). Its cursor seeks both at every step, which
// suits the scans that read it (a checkpoint list with no thread).
type mergedBase struct {
	lg *bolt.Bucket
	pk *packedCursor
}

func (m *mergedBase) Get(k []byte) []byte {
	if v := m.lg.Get(k); v != nil {
		return v
	}
	if ck, v := m.pk.seek(k); bytes.Equal(ck, k) {
		return v
	}
	return nil
}

func (m *mergedBase) Cursor() rowCursor { return &mergedCursor{lg: m.lg.Cursor(), pk: m.pk} }

type mergedCursor struct {
	lg  *bolt.Cursor
	pk  *packedCursor
	cur []byte
}

func (c *mergedCursor) pick(ak, av, bk, bv []byte, later bool) ([]byte, []byte) {
	k, v := ak, av
	if ak == nil || bk != nil && (bytes.Compare(bk, ak) < 0) != later {
		k, v = bk, bv
	}
	c.cur = storageCopy(k)
	if k == nil {
		c.cur = nil
	}
	return k, v
}

func (c *mergedCursor) First() ([]byte, []byte) { return c.Seek(nil) }

func (c *mergedCursor) Seek(k []byte) ([]byte, []byte) {
	var ak, av []byte
	if k == nil {
		ak, av = c.lg.First()
	} else {
		ak, av = c.lg.Seek(k)
	}
	bk, bv := c.pk.seek(k)
	return c.pick(ak, av, bk, bv, false)
}

func (c *mergedCursor) Next() ([]byte, []byte) {
	if c.cur == nil {
		return nil, nil
	}
	// The first key above cur is the first at or above cur ‖ 0.
	return c.Seek(append(storageCopy(c.cur), 0))
}

func (c *mergedCursor) Last() ([]byte, []byte) {
	ak, av := c.lg.Last()
	bk, bv := c.pk.before(nil)
	return c.pick(ak, av, bk, bv, true)
}

func (c *mergedCursor) Prev() ([]byte, []byte) {
	if c.cur == nil {
		return nil, nil
	}
	ak, av := c.lg.Seek(c.cur)
	if ak == nil {
		ak, av = c.lg.Last()
	} else {
		ak, av = c.lg.Prev()
	}
	bk, bv := c.pk.before(c.cur)
	return c.pick(ak, av, bk, bv, true)
}
