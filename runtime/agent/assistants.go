package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// AssistantID is the deterministic id of a graph's default assistant.
func AssistantID(graphID string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("slipway:graph:"+graphID)).String()
}

// ensureAssistants gives every served graph its system assistant and, as
// the reference does at start, removes the system assistants of graphs
// this agent no longer serves (a revision rolled back to before the graph
// existed): they would be listed, and answer 404 to a run. Assistants
// users made for such a graph stay.
func (e *Engine) ensureAssistants() error {
	return e.w.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bAssistants))
		var stale []string
		err := b.ForEach(func(k, v []byte) error {
			var a Assistant
			if err := unmarshalStored(v, &a); err != nil {
				return err
			}
			if _, served := e.Graphs[a.GraphID]; !served && a.Metadata["created_by"] == "system" {
				stale = append(stale, string(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, id := range stale {
			if err := deleteAssistant(tx, id); err != nil {
				return err
			}
		}
		for id := range e.Graphs {
			aid := AssistantID(id)
			name := id
			if hg, ok := e.Graphs[id].(*HostGraph); ok && hg.Name != "" {
				name = hg.Name
			}
			if raw := b.Get([]byte(aid)); raw != nil {
				if err := renameSystemAssistant(tx, raw, name); err != nil {
					return err
				}
				continue
			}
			now := time.Now().UTC()
			cfg, cx := map[string]any{}, map[string]any{}
			for k, v := range e.DefaultConfigs[id] {
				if m, ok := v.(map[string]any); ok && k == "context" {
					cx = m
					continue
				}
				cfg[k] = v
			}
			a := Assistant{AssistantID: aid, GraphID: id, Name: name, Config: cfg, Context: cx,
				Metadata: map[string]any{"created_by": "system"}, Version: 1, CreatedAt: now, UpdatedAt: now}
			if err := putJSON(b, aid, &a); err != nil {
				return err
			}
			if err := putVersion(tx, &a); err != nil {
				return err
			}
		}
		return nil
	})
}

// ResolveAssistant accepts an assistant id or a graph id.
func (e *Engine) ResolveAssistant(tx *bolt.Tx, id string) (*Assistant, error) {
	var a Assistant
	if err := getJSON(tx.Bucket([]byte(bAssistants)), id, &a); err == nil {
		return &a, nil
	}
	if _, ok := e.Graphs[id]; ok {
		if err := getJSON(tx.Bucket([]byte(bAssistants)), AssistantID(id), &a); err == nil {
			return &a, nil
		}
	}
	// Neither an assistant's id nor a graph's: worded as the reference's.
	return nil, fmt.Errorf("%w: assistant %s", ErrNotFound, id)
}

// CreateAssistant creates an assistant for a served graph.
func (e *Engine) CreateAssistant(a Assistant, ifExists string) (Assistant, error) {
	if _, ok := e.Graphs[a.GraphID]; !ok {
		return Assistant{}, fmt.Errorf("%w: graph %q is not served by this agent", ErrNotFound, a.GraphID)
	}
	if a.AssistantID == "" {
		a.AssistantID = uuid.NewString()
	}
	now := time.Now().UTC()
	a.CreatedAt, a.UpdatedAt, a.Version = now, now, 1
	// An assistant created without a name is "Untitled", as on both
	// reference servers (a graph's system assistant is named after it).
	if a.Name == "" {
		a.Name = "Untitled"
	}
	for _, m := range []*map[string]any{&a.Config, &a.Context, &a.Metadata} {
		if *m == nil {
			*m = map[string]any{}
		}
	}
	var out Assistant
	err := e.w.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(bAssistants))
		var old Assistant
		if getJSON(b, a.AssistantID, &old) == nil {
			if ifExists == "do_nothing" {
				out = old
				return nil
			}
			return fmt.Errorf("%w: assistant %s already exists", ErrConflict, a.AssistantID)
		}
		out = a
		if err := putJSON(b, a.AssistantID, &a); err != nil {
			return err
		}
		return putVersion(tx, &a)
	})
	return out, err
}

// versionKey is id ‖ 0x00 ‖ big-endian version: the separator keeps one
// id's versions apart from a longer id that starts with it.
func versionKey(id string, v int) []byte {
	return append([]byte(id+"\x00"), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// putVersion records a as its version in the assistant's history.
func putVersion(tx *bolt.Tx, a *Assistant) error {
	raw, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode assistant version: %w", err)
	}
	return tx.Bucket([]byte(bAssistantVersions)).Put(versionKey(a.AssistantID, a.Version), raw)
}

// versions returns an assistant's versions, newest first.
func versions(tx *bolt.Tx, id string) ([]Assistant, error) {
	var out []Assistant
	prefix := []byte(id + "\x00")
	c := tx.Bucket([]byte(bAssistantVersions)).Cursor()
	for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		var a Assistant
		if err := unmarshalStored(v, &a); err != nil {
			return nil, fmt.Errorf("decode assistant version: %w", err)
		}
		out = append(out, a)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// AssistantVersions lists an assistant's versions, newest first, filtered
// by metadata.
func (e *Engine) AssistantVersions(id string, metadata map[string]any, limit, offset int) ([]Assistant, error) {
	var out []Assistant
	err := e.DB.View(func(tx *bolt.Tx) error {
		a, err := e.ResolveAssistant(tx, id)
		if err != nil {
			return err
		}
		all, err := versions(tx, a.AssistantID)
		if err != nil {
			return err
		}
		for _, v := range all {
			if matches(v.Metadata, metadata) {
				out = append(out, v)
			}
		}
		return nil
	})
	if offset > len(out) {
		offset = len(out)
	}
	out = out[offset:]
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []Assistant{}
	}
	return out, err
}

// SetLatestVersion makes an earlier (or later) version the assistant's
// current one; the history is unchanged.
func (e *Engine) SetLatestVersion(id string, version int) (Assistant, error) {
	var out Assistant
	err := e.w.Update(func(tx *bolt.Tx) error {
		a, err := e.ResolveAssistant(tx, id)
		if err != nil {
			return err
		}
		var v Assistant
		if err := getJSON(tx.Bucket([]byte(bAssistantVersions)), string(versionKey(a.AssistantID, version)), &v); err != nil {
			return fmt.Errorf("%w: assistant %s has no version %d", ErrNotFound, a.AssistantID, version)
		}
		v.CreatedAt, v.UpdatedAt = a.CreatedAt, time.Now().UTC()
		out = v
		return putJSON(tx.Bucket([]byte(bAssistants)), a.AssistantID, &v)
	})
	return out, err
}

// GetAssistant returns an assistant by id or graph id.
func (e *Engine) GetAssistant(id string) (Assistant, error) {
	var out Assistant
	err := e.DB.View(func(tx *bolt.Tx) error {
		a, err := e.ResolveAssistant(tx, id)
		if err != nil {
			return err
		}
		out = *a
		return nil
	})
	return out, err
}

// PatchAssistant updates an assistant, bumping its version.
func (e *Engine) PatchAssistant(id string, patch Assistant) (Assistant, error) {
	var out Assistant
	err := e.w.Update(func(tx *bolt.Tx) error {
		a, err := e.ResolveAssistant(tx, id)
		if err != nil {
			return err
		}
		if patch.GraphID != "" {
			if _, ok := e.Graphs[patch.GraphID]; !ok {
				return fmt.Errorf("%w: graph %q is not served by this agent", ErrNotFound, patch.GraphID)
			}
			a.GraphID = patch.GraphID
		}
		if patch.Name != "" {
			a.Name = patch.Name
		}
		if patch.Description != nil {
			a.Description = patch.Description
		}
		if patch.Config != nil {
			a.Config = patch.Config
		}
		if patch.Context != nil {
			a.Context = patch.Context
		}
		for k, v := range patch.Metadata {
			a.Metadata[k] = v
		}
		// The new version follows the newest one, which is not the current
		// one after SetLatestVersion went back.
		all, err := versions(tx, a.AssistantID)
		if err != nil {
			return err
		}
		if len(all) > 0 && all[0].Version >= a.Version {
			a.Version = all[0].Version
		}
		a.Version++
		a.UpdatedAt = time.Now().UTC()
		out = *a
		if err := putJSON(tx.Bucket([]byte(bAssistants)), a.AssistantID, a); err != nil {
			return err
		}
		return putVersion(tx, a)
	})
	return out, err
}

// DeleteAssistant deletes an assistant.
func (e *Engine) DeleteAssistant(id string) error {
	return e.w.Update(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(bAssistants)).Get([]byte(id)) == nil {
			return fmt.Errorf("%w: assistant %s", ErrNotFound, id)
		}
		return deleteAssistant(tx, id)
	})
}

// deleteAssistant removes assistant id, its versions and its crons (as
// the reference does) in tx.
func deleteAssistant(tx *bolt.Tx, id string) error {
	all, err := versions(tx, id)
	if err != nil {
		return err
	}
	if err := deleteCronsWhere(tx, func(c *Cron) bool { return c.AssistantID == id }); err != nil {
		return err
	}
	for _, v := range all {
		if err := tx.Bucket([]byte(bAssistantVersions)).Delete(versionKey(id, v.Version)); err != nil {
			return err
		}
	}
	return tx.Bucket([]byte(bAssistants)).Delete([]byte(id))
}

// AssistantQuery is a search of assistants: the filters, the page, and
// the order (SortBy one of assistant_id, graph_id, name, created_at,
// updated_at; "" is created_at; Desc newest or last first).
type AssistantQuery struct {
	GraphID, Name string
	Metadata      map[string]any
	Limit, Offset int
	SortBy        string
	Desc          bool
}

// SearchAssistants lists assistants matching graph id, name (a
// case-insensitive substring, as the reference servers match it) and
// metadata, in q's order.
func (e *Engine) SearchAssistants(q AssistantQuery) ([]Assistant, int, error) {
	var all []Assistant
	err := e.DB.View(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte(bAssistants)).ForEach(func(_, v []byte) error {
			var a Assistant
			if err := unmarshalStored(v, &a); err != nil {
				return err
			}
			if q.GraphID != "" && a.GraphID != q.GraphID || q.Name != "" && !strings.Contains(strings.ToLower(a.Name), strings.ToLower(q.Name)) || !matches(a.Metadata, q.Metadata) {
				return nil
			}
			all = append(all, a)
			return nil
		})
	})
	// As the reference: names and graph ids compare case-insensitively.
	less := map[string]func(a, b Assistant) int{
		"assistant_id": func(a, b Assistant) int { return strings.Compare(a.AssistantID, b.AssistantID) },
		"graph_id": func(a, b Assistant) int {
			return strings.Compare(strings.ToLower(a.GraphID), strings.ToLower(b.GraphID))
		},
		"name":       func(a, b Assistant) int { return strings.Compare(strings.ToLower(a.Name), strings.ToLower(b.Name)) },
		"updated_at": func(a, b Assistant) int { return a.UpdatedAt.Compare(b.UpdatedAt) },
	}[q.SortBy]
	if less == nil {
		less = func(a, b Assistant) int { return a.CreatedAt.Compare(b.CreatedAt) }
	}
	slices.SortStableFunc(all, func(a, b Assistant) int {
		if q.Desc {
			return less(b, a)
		}
		return less(a, b)
	})
	n := len(all)
	offset := min(q.Offset, len(all))
	all = all[offset:]
	if q.Limit > 0 && len(all) > q.Limit {
		all = all[:q.Limit]
	}
	if all == nil {
		all = []Assistant{}
	}
	return all, n, err
}
