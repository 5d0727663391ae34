package agent

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"slipway/storage"
)

// resourceStoreCases check the resources outside threads
// (runStoreConformance).
func resourceStoreCases() []storeCase {
	return []storeCase{
		{"assistants and their versions", func(t *testing.T, s Store) {
			a1 := &Assistant{AssistantID: "a1", GraphID: "g", Name: "one", Version: 1, Metadata: map[string]any{}}
			a2 := &Assistant{AssistantID: "a2", GraphID: "g", Name: "two", Version: 1, Metadata: map[string]any{}}
			mustUpdate(t, s, func(tx Tx) error {
				for _, a := range []*Assistant{a1, a2} {
					if err := tx.PutAssistant(a); err != nil {
						return err
					}
					if err := tx.PutAssistantVersion(a); err != nil {
						return err
					}
				}
				v2 := *a1
				v2.Version, v2.Name = 2, "one again"
				if err := tx.PutAssistant(&v2); err != nil {
					return err
				}
				return tx.PutAssistantVersion(&v2)
			})
			mustView(t, s, func(tx ReadTx) error {
				if a, err := tx.GetAssistant("a1"); err != nil || a.Version != 2 || a.Name != "one again" {
					t.Errorf("GetAssistant = %+v %v", a, err)
				}
				vs, err := tx.AssistantVersions("a1")
				if err != nil || len(vs) != 2 || vs[0].Version != 2 || vs[1].Version != 1 {
					t.Errorf("AssistantVersions = %+v %v, want 2 then 1", vs, err)
				}
				if v, err := tx.GetAssistantVersion("a1", 1); err != nil || v.Name != "one" {
					t.Errorf("GetAssistantVersion(1) = %+v %v", v, err)
				}
				if _, err := tx.GetAssistantVersion("a1", 9); !errors.Is(err, ErrNotFound) {
					t.Errorf("a missing version: %v", err)
				}
				var ids []string
				_ = tx.ForEachAssistant(func(a *Assistant) error { ids = append(ids, a.AssistantID); return nil })
				if !reflect.DeepEqual(ids, []string{"a1", "a2"}) {
					t.Errorf("ForEachAssistant = %v", ids)
				}
				return nil
			})
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteAssistant("a1") })
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetAssistant("a1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted assistant: %v", err)
				}
				if vs, _ := tx.AssistantVersions("a1"); len(vs) != 0 {
					t.Errorf("a deleted assistant's versions: %d", len(vs))
				}
				if vs, _ := tx.AssistantVersions("a2"); len(vs) != 1 {
					t.Errorf("another assistant's versions: %d, want 1", len(vs))
				}
				return nil
			})
		}},
		{"store items by namespace", func(t *testing.T, s Store) {
			items := []*Item{
				{Namespace: []string{"a", "b"}, Key: "k1", Value: map[string]any{"n": 1.0}},
				{Namespace: []string{"a"}, Key: "k2", Value: map[string]any{"n": 2.0}},
				{Namespace: []string{"ab"}, Key: "k3", Value: map[string]any{"n": 3.0}},
			}
			mustUpdate(t, s, func(tx Tx) error {
				for _, it := range items {
					if err := tx.PutItem(it); err != nil {
						return err
					}
				}
				return nil
			})
			mustView(t, s, func(tx ReadTx) error {
				if it, err := tx.GetItem([]string{"a", "b"}, "k1"); err != nil || it.Value["n"] != 1.0 {
					t.Errorf("GetItem = %+v %v", it, err)
				}
				if _, err := tx.GetItem([]string{"a"}, "k1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("an item under another namespace: %v", err)
				}
				var keys []string
				_ = tx.ScanItems([]string{"a"}, func(it *Item) (bool, error) { keys = append(keys, it.Key); return true, nil })
				if !reflect.DeepEqual(keys, []string{"k2", "k1"}) {
					t.Errorf(`ScanItems(["a"]) = %v, want k2, k1 (not "ab"'s k3)`, keys)
				}
				var nss [][]string
				_ = tx.ForEachItemNamespace(func(ns []string) error { nss = append(nss, ns); return nil })
				if len(nss) != 3 {
					t.Errorf("ForEachItemNamespace = %v", nss)
				}
				return nil
			})
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteItem([]string{"a"}, "k2") })
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetItem([]string{"a"}, "k2"); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted item: %v", err)
				}
				return nil
			})
		}},
		{"crons", func(t *testing.T, s Store) {
			c1, c2 := &Cron{CronID: "c1", Schedule: "* * * * *"}, &Cron{CronID: "c2", Schedule: "0 * * * *"}
			mustUpdate(t, s, func(tx Tx) error {
				if err := tx.PutCron(c1); err != nil {
					return err
				}
				return tx.PutCron(c2)
			})
			mustUpdate(t, s, func(tx Tx) error {
				if c, err := tx.GetCron("c2"); err != nil || c.Schedule != "0 * * * *" {
					t.Errorf("GetCron = %+v %v", c, err)
				}
				var ids []string
				_ = tx.ForEachCron(func(c *Cron, err error) error { ids = append(ids, c.CronID); return err })
				if !reflect.DeepEqual(ids, []string{"c1", "c2"}) {
					t.Errorf("ForEachCron = %v", ids)
				}
				return tx.DeleteCron("c1")
			})
			mustView(t, s, func(tx ReadTx) error {
				if _, err := tx.GetCron("c1"); !errors.Is(err, ErrNotFound) {
					t.Errorf("a deleted cron: %v", err)
				}
				return nil
			})
		}},
		{"TTL index", func(t *testing.T, s Store) {
			now := time.Now().UTC()
			th1, th2, th3 := storage.NewID().String(), storage.NewID().String(), storage.NewID().String()
			e1, e2, e3 := ttlEntryOf(now.Add(-time.Hour), th1), ttlEntryOf(now.Add(-time.Minute), th2), ttlEntryOf(now.Add(time.Hour), th3)
			mustUpdate(t, s, func(tx Tx) error {
				for _, e := range []ttlEntry{e3, e2, e1} {
					if err := tx.PutTTLEntry(e); err != nil {
						return err
					}
				}
				return nil
			})
			mustView(t, s, func(tx ReadTx) error {
				due, err := tx.DueTTLEntries(now, 10)
				if err != nil || !reflect.DeepEqual(due, []ttlEntry{e1, e2}) {
					t.Errorf("DueTTLEntries = %v %v, want the two past entries, earliest first", due, err)
				}
				if due, _ := tx.DueTTLEntries(now, 1); !reflect.DeepEqual(due, []ttlEntry{e1}) {
					t.Errorf("DueTTLEntries limited to 1 = %v", due)
				}
				if !tx.HasTTLEntry(e3) || tx.HasTTLEntry(ttlEntryOf(now, th3)) {
					t.Error("HasTTLEntry disagrees with what was put")
				}
				return nil
			})
			// A thread's deletion deletes its entry.
			rec := newThreadRec("")
			rec.ThreadID = th1
			rec.TTL = &ttlPolicy{Strategy: TTLDelete, Minutes: 1, Indexed: now.Add(-time.Hour)}
			mustUpdate(t, s, func(tx Tx) error { return tx.PutThread(rec) })
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteThreadRecord(th1) })
			mustUpdate(t, s, func(tx Tx) error { return tx.DeleteTTLEntry(e2) })
			mustView(t, s, func(tx ReadTx) error {
				if due, _ := tx.DueTTLEntries(now, 10); len(due) != 0 {
					t.Errorf("entries left after the thread's deletion and DeleteTTLEntry: %v", due)
				}
				return nil
			})
		}},
	}
}
