package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

func itemKey(ns []string, key string) []byte {
	return []byte(strings.Join(ns, "\x1f") + "\x00" + key)
}

// ValidNamespace checks a store namespace.
func ValidNamespace(ns []string) error {
	if len(ns) == 0 {
		return fmt.Errorf("%w: namespace must have at least one label", ErrInvalid)
	}
	for _, l := range ns {
		if l == "" || strings.ContainsAny(l, ".\x00\x1f") {
			return fmt.Errorf("%w: namespace label %q must be non-empty and contain no periods", ErrInvalid, l)
		}
	}
	return nil
}

// PutItem stores (or, with a nil value, deletes) an item.
func (e *Engine) PutItem(ns []string, key string, value map[string]any) error {
	if err := ValidNamespace(ns); err != nil {
		return err
	}
	if key == "" {
		return fmt.Errorf("%w: key must not be empty", ErrInvalid)
	}
	return e.w.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bStore))
		k := itemKey(ns, key)
		if value == nil {
			return b.Delete(k)
		}
		now := time.Now().UTC()
		it := Item{Namespace: ns, Key: key, Value: value, CreatedAt: now, UpdatedAt: now}
		var old Item
		if raw := b.Get(k); raw != nil && unmarshalStored(raw, &old) == nil {
			it.CreatedAt = old.CreatedAt
		}
		raw, err := json.Marshal(&it)
		if err != nil {
			return err
		}
		return b.Put(k, raw)
	})
}

// GetItem returns an item.
func (e *Engine) GetItem(ns []string, key string) (Item, error) {
	var it Item
	err := e.DB.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket([]byte(bStore)).Get(itemKey(ns, key))
		if raw == nil {
			return fmt.Errorf("%w: item %s in %s", ErrNotFound, key, strings.Join(ns, "."))
		}
		return unmarshalStored(raw, &it)
	})
	return it, err
}

// DeleteItem deletes an item.
func (e *Engine) DeleteItem(ns []string, key string) error { return e.PutItem(ns, key, nil) }

// SearchItems lists items under a namespace prefix whose values match filter.
func (e *Engine) SearchItems(prefix []string, filter map[string]any, query string, limit, offset int) ([]Item, error) {
	out := []Item{}
	err := e.DB.View(func(tx *bolt.Tx) error {
		p := []byte(strings.Join(prefix, "\x1f"))
		c := tx.Bucket([]byte(bStore)).Cursor()
		skipped := 0
		for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
			rest := k[len(p):]
			if len(prefix) > 0 && len(rest) > 0 && rest[0] != 0x1f && rest[0] != 0 {
				continue // "ab" is not under the prefix "a"
			}
			var it Item
			if err := unmarshalStored(v, &it); err != nil {
				return err
			}
			if !matches(it.Value, filter) {
				continue
			}
			if query != "" {
				raw, _ := json.Marshal(it.Value)
				if !strings.Contains(strings.ToLower(string(raw)), strings.ToLower(query)) {
					continue
				}
			}
			if skipped < offset {
				skipped++
				continue
			}
			if len(out) == limit {
				break
			}
			out = append(out, it)
		}
		return nil
	})
	return out, err
}

// ListNamespaces lists distinct namespaces (optionally under a prefix, up to maxDepth labels).
func (e *Engine) ListNamespaces(prefix []string, maxDepth, limit, offset int) ([][]string, error) {
	seen := map[string][]string{}
	err := e.DB.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bStore)).ForEach(func(k, _ []byte) error {
			nsPart, _, _ := bytes.Cut(k, []byte{0})
			ns := strings.Split(string(nsPart), "\x1f")
			if len(ns) < len(prefix) {
				return nil
			}
			for i := range prefix {
				if ns[i] != prefix[i] {
					return nil
				}
			}
			if maxDepth > 0 && len(ns) > maxDepth {
				ns = ns[:maxDepth]
			}
			seen[strings.Join(ns, "\x1f")] = ns
			return nil
		})
	})
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := [][]string{}
	for i := offset; i < len(keys) && len(out) < limit; i++ {
		out = append(out, seen[keys[i]])
	}
	return out, err
}
