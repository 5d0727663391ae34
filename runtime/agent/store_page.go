package agent

import (
	"bytes"
	"slices"
)

// pageOf collects one page of an index walk (assistants, crons): walk calls
// its function with each selected id in order, with the record when a
// residual filter already decoded it; the page skips offset of them,
// decodes (record) only those it keeps, and stops the walk once it holds
// limit (0: no limit). A record gone since it was indexed (nil) is left out.
func pageOf[T any](offset, limit int, walk func(func(id []byte, rec *T) (bool, error)) error, record func([]byte) (*T, error)) ([]T, error) {
	var out []T
	err := walk(func(id []byte, rec *T) (bool, error) {
		if offset > 0 {
			offset--
			return true, nil
		}
		if rec == nil {
			var err error
			if rec, err = record(id); err != nil {
				return false, err
			}
		}
		if rec != nil {
			out = append(out, *rec)
		}
		return limit <= 0 || len(out) < limit, nil
	})
	return out, err
}

// inKeyOrder calls fn with ids in the order of their keys (descending with
// desc) until fn returns false: the in-memory sort of an intersection small
// enough to collect (collectBound), where walking a sort index and testing
// each id against the postings would read more.
func inKeyOrder(ids [][]byte, key func([]byte) ([]byte, error), desc bool, fn func([]byte) bool) error {
	type entry struct{ key, id []byte }
	es := make([]entry, 0, len(ids))
	for _, id := range ids {
		k, err := key(id)
		if err != nil {
			return err
		}
		es = append(es, entry{k, id})
	}
	slices.SortFunc(es, func(x, y entry) int {
		if desc {
			return bytes.Compare(y.key, x.key)
		}
		return bytes.Compare(x.key, y.key)
	})
	for _, e := range es {
		if !fn(e.id) {
			break
		}
	}
	return nil
}
