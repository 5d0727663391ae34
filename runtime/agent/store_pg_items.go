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

// items reads the keys and bodies under the key prefix p, in key order.
func (t *pgTx) items(p []byte, withBody bool) (keys, bodies [][]byte, err error) {
	cond, args := lgRange(p)
	col := "null::bytea"
	if withBody {
		col = "body"
	}
	if t.err != nil {
		return nil, nil, t.err
	}
	rows, err := t.tx.Query(t.ctx, "select k, "+col+" from items where "+cond+" order by k", args...)
	if err != nil {
		return nil, nil, t.fail("read items", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, b []byte
		if err := rows.Scan(&k, &b); err != nil {
			return nil, nil, t.fail("read items", err)
		}
		keys, bodies = append(keys, k), append(bodies, b)
	}
	return keys, bodies, t.fail("read items", rows.Err())
}

func (t *pgTx) ScanItems(prefix []string, fn func(*Item) (bool, error)) error {
	p := []byte(strings.Join(prefix, "\x1f"))
	keys, bodies, err := t.items(p, true)
	if err != nil {
		return err
	}
	for i, k := range keys {
		rest := k[len(p):]
		if len(prefix) > 0 && len(rest) > 0 && rest[0] != 0x1f && rest[0] != 0 {
			continue // "ab" is not under the prefix "a"
		}
		var it Item
		if err := unmarshalStored(bodies[i], &it); err != nil {
			return fmt.Errorf("decode item: %w", err)
		}
		more, err := fn(&it)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (t *pgTx) ForEachItemNamespace(fn func([]string) error) error {
	keys, _, err := t.items(nil, false)
	if err != nil {
		return err
	}
	for _, k := range keys {
		nsPart, _, _ := bytes.Cut(k, []byte{0})
		if err := fn(strings.Split(string(nsPart), "\x1f")); err != nil {
			return err
		}
	}
	return nil
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
