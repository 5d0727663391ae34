package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

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
	return e.store.Update(context.Background(), func(tx Tx) error {
		if value == nil {
			return tx.DeleteItem(ns, key)
		}
		now := time.Now().UTC()
		it := Item{Namespace: ns, Key: key, Value: value, CreatedAt: now, UpdatedAt: now}
		if old, err := tx.GetItem(ns, key); err == nil {
			it.CreatedAt = old.CreatedAt
		}
		return tx.PutItem(&it)
	})
}

// GetItem returns an item.
func (e *Engine) GetItem(ns []string, key string) (Item, error) {
	var it Item
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		got, err := tx.GetItem(ns, key)
		if errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: item %s in %s", ErrNotFound, key, strings.Join(ns, "."))
		}
		if err != nil {
			return err
		}
		it = *got
		return nil
	})
	return it, err
}

// DeleteItem deletes an item.
func (e *Engine) DeleteItem(ns []string, key string) error { return e.PutItem(ns, key, nil) }

// SearchItems lists items under a namespace prefix whose values match filter.
func (e *Engine) SearchItems(prefix []string, filter map[string]any, query string, limit, offset int) ([]Item, error) {
	out := []Item{}
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		skipped := 0
		return tx.ScanItems(prefix, func(it *Item) (bool, error) {
			if !matches(it.Value, filter) {
				return true, nil
			}
			if query != "" {
				raw, _ := json.Marshal(it.Value)
				if !strings.Contains(strings.ToLower(string(raw)), strings.ToLower(query)) {
					return true, nil
				}
			}
			if skipped < offset {
				skipped++
				return true, nil
			}
			if len(out) == limit {
				return false, nil
			}
			out = append(out, *it)
			return true, nil
		})
	})
	return out, err
}

// ListNamespaces lists distinct namespaces (optionally under a prefix, up to maxDepth labels).
func (e *Engine) ListNamespaces(prefix []string, maxDepth, limit, offset int) ([][]string, error) {
	seen := map[string][]string{}
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		return tx.ForEachItemNamespace(func(ns []string) error {
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
