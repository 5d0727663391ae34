package controlplane

import (
	"bytes"
	"strings"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"slipway/storage"
)

// idxDeploymentTrigrams serves name_contains: each deployment's name is
// indexed under every three-character piece of it (a trigram index, as
// PostgreSQL's pg_trgm), so a substring of three characters or more is
// looked up by intersecting the pieces' posting lists instead of reading
// every name of the workspace. Names are immutable, lower-case DNS labels.
const idxDeploymentTrigrams = "idx_ws_deployment_trigrams" // workspace ‖ trigram ‖ deployment → nil (v11)

// trigrams returns the distinct three-byte pieces of s (lower-cased).
func trigrams(s string) []string {
	s = strings.ToLower(s)
	seen := map[string]bool{}
	var out []string
	for i := 0; i+3 <= len(s); i++ {
		if t := s[i : i+3]; !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}

// indexName writes (or, with remove, deletes) the trigram postings of a
// deployment's name.
func indexName(tx *bolt.Tx, ws, id uuid.UUID, name string, remove bool) error {
	b := tx.Bucket([]byte(idxDeploymentTrigrams))
	for _, t := range trigrams(name) {
		k := storage.Key(ws, t, id)
		var err error
		if remove {
			err = b.Delete(k)
		} else {
			err = b.Put(k, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// nameCandidates calls fn, newest first, with each deployment of ws below
// before (uuid.Max: from the newest) whose name holds every trigram of q
// (len(q) >= 3), until fn returns false. A candidate may still not hold q
// itself (its pieces can lie apart): the caller tests the name. It
// intersects the posting lists by leapfrogging (each list seeks to the
// largest id not above the highest candidate so far), so its cost follows
// the shortest list, not the workspace.
func nameCandidates(tx *bolt.Tx, ws uuid.UUID, q string, before uuid.UUID, fn func(uuid.UUID) bool) {
	grams := trigrams(q)
	type list struct {
		c      *bolt.Cursor
		prefix []byte
	}
	lists := make([]list, len(grams))
	b := tx.Bucket([]byte(idxDeploymentTrigrams))
	for i, t := range grams {
		lists[i] = list{b.Cursor(), storage.Key(ws, t)}
	}
	// atMost positions l at its largest id <= target (strictly below
	// when strict); false when it has none.
	atMost := func(l list, target uuid.UUID, strict bool) (uuid.UUID, bool) {
		want := append(bytes.Clone(l.prefix), target[:]...)
		k, _ := l.c.Seek(want)
		if k == nil {
			k, _ = l.c.Last()
		} else if strict || !bytes.Equal(k, want) {
			k, _ = l.c.Prev()
		}
		if k == nil || !bytes.HasPrefix(k, l.prefix) || len(k) != len(l.prefix)+16 {
			return uuid.Nil, false
		}
		return uuid.UUID(k[len(l.prefix):]), true
	}
	target, strict := before, before != uuid.Max
	for {
		agreed := true
		for _, l := range lists {
			id, ok := atMost(l, target, strict)
			if !ok {
				return
			}
			if id != target {
				// A lower id: every list must reach it (or below).
				target, strict, agreed = id, false, false
				break
			}
			strict = false
		}
		if !agreed {
			continue
		}
		if !fn(target) {
			return
		}
		strict = true
	}
}
