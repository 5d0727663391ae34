package agent

import (
	"bytes"
	"encoding/json"
	"strings"
)

const bStore = "store"

// itemReads are a unit of work's reads of store items (namespace, key).
type itemReads interface {
	// GetItem returns the item, or an error wrapping ErrNotFound.
	GetItem(ns []string, key string) (*Item, error)
	// ScanItems calls fn for the items whose namespace starts with the
	// labels of prefix (whole labels: ["a"] holds ["a","b"], not ["ab"]),
	// ordered by namespace then key, while fn returns true and no error.
	ScanItems(prefix []string, fn func(*Item) (bool, error)) error
	// ForEachItemNamespace calls fn with the namespace of every item, in
	// the same order, without decoding the items.
	ForEachItemNamespace(fn func(ns []string) error) error
}

// itemWrites are a unit of work's writes of store items.
type itemWrites interface {
	// PutItem creates or replaces the item.
	PutItem(it *Item) error
	// DeleteItem deletes the item (a missing one is no error).
	DeleteItem(ns []string, key string) error
}

func itemKey(ns []string, key string) []byte {
	return []byte(strings.Join(ns, "\x1f") + "\x00" + key)
}

func (t *boltTx) GetItem(ns []string, key string) (*Item, error) {
	var it Item
	if err := getJSON(t.tx.Bucket([]byte(bStore)), string(itemKey(ns, key)), &it); err != nil {
		return nil, err
	}
	return &it, nil
}

func (t *boltTx) ScanItems(prefix []string, fn func(*Item) (bool, error)) error {
	p := []byte(strings.Join(prefix, "\x1f"))
	c := t.tx.Bucket([]byte(bStore)).Cursor()
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		rest := k[len(p):]
		if len(prefix) > 0 && len(rest) > 0 && rest[0] != 0x1f && rest[0] != 0 {
			continue // "ab" is not under the prefix "a"
		}
		var it Item
		if err := unmarshalStored(v, &it); err != nil {
			return err
		}
		more, err := fn(&it)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *boltTx) ForEachItemNamespace(fn func([]string) error) error {
	return t.tx.Bucket([]byte(bStore)).ForEach(func(k, _ []byte) error {
		nsPart, _, _ := bytes.Cut(k, []byte{0})
		return fn(strings.Split(string(nsPart), "\x1f"))
	})
}

func (t *boltTx) PutItem(it *Item) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	raw, err := json.Marshal(it)
	if err != nil {
		return err
	}
	return t.tx.Bucket([]byte(bStore)).Put(itemKey(it.Namespace, it.Key), raw)
}

func (t *boltTx) DeleteItem(ns []string, key string) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.tx.Bucket([]byte(bStore)).Delete(itemKey(ns, key))
}
