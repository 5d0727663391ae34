package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

func (t *pgTx) GetItem(ns []string, key string) (*Item, error) {
	raw, err := t.body("get item", "select body from items where k = $1", itemKey(ns, key))
	if err != nil {
		return nil, err
	}
	var it Item
	if err := unmarshalStored(raw, &it); err != nil {
		return nil, fmt.Errorf("decode item: %w", err)
	}
	return &it, nil
}

func (t *pgTx) ScanItems(prefix []string, fn func(*Item) (bool, error)) error {
	p := []byte(strings.Join(prefix, "\x1f"))
	var ferr error
	err := t.keyRows("items", "body", p, nil, false, func(k, raw []byte) bool {
		rest := k[len(p):]
		if len(prefix) > 0 && len(rest) > 0 && rest[0] != 0x1f && rest[0] != 0 {
			return true // "ab" is not under the prefix "a"
		}
		var it Item
		if ferr = unmarshalStored(raw, &it); ferr != nil {
			ferr = fmt.Errorf("decode item: %w", ferr)
			return false
		}
		more := false
		more, ferr = fn(&it)
		return more && ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	return err
}

func (t *pgTx) ForEachItemNamespace(fn func([]string) error) error {
	var ferr error
	err := t.keyRows("items", "null::bytea", nil, nil, false, func(k, _ []byte) bool {
		nsPart, _, _ := bytes.Cut(k, []byte{0})
		ferr = fn(strings.Split(string(nsPart), "\x1f"))
		return ferr == nil
	})
	if ferr != nil {
		return ferr
	}
	return err
}

func (t *pgTx) PutItem(it *Item) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	raw, err := json.Marshal(it)
	if err != nil {
		return fmt.Errorf("put item: %w", err)
	}
	return t.exec("put item", "insert into items (k, body) values ($1, $2) on conflict (k) do update set body = excluded.body",
		itemKey(it.Namespace, it.Key), raw)
}

func (t *pgTx) DeleteItem(ns []string, key string) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	return t.exec("delete item", "delete from items where k = $1", itemKey(ns, key))
}
