package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
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
	return e.store.Update(context.Background(), func(tx Tx) error {
		var stale []string
		err := tx.ForEachAssistant(func(a *Assistant) error {
			if _, served := e.Graphs[a.GraphID]; !served && a.Metadata["created_by"] == "system" {
				stale = append(stale, a.AssistantID)
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
			if cur, err := tx.GetAssistant(aid); err == nil {
				if err := renameSystemAssistant(tx, cur, name); err != nil {
					return err
				}
				continue
			} else if !errors.Is(err, ErrNotFound) {
				return err
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
			if err := tx.PutAssistant(&a); err != nil {
				return err
			}
			if err := tx.PutAssistantVersion(&a); err != nil {
				return err
			}
		}
		return nil
	})
}

// ResolveAssistant accepts an assistant id or a graph id.
func (e *Engine) ResolveAssistant(tx ReadTx, id string) (*Assistant, error) {
	if a, err := tx.GetAssistant(id); err == nil {
		return a, nil
	}
	if _, ok := e.Graphs[id]; ok {
		if a, err := tx.GetAssistant(AssistantID(id)); err == nil {
			return a, nil
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
	err := e.store.Update(context.Background(), func(tx Tx) error {
		if old, err := tx.GetAssistant(a.AssistantID); err == nil {
			if ifExists == "do_nothing" {
				out = *old
				return nil
			}
			return fmt.Errorf("%w: assistant %s already exists", ErrConflict, a.AssistantID)
		}
		out = a
		if err := tx.PutAssistant(&a); err != nil {
			return err
		}
		return tx.PutAssistantVersion(&a)
	})
	return out, err
}

// versionKey is id ‖ 0x00 ‖ big-endian version: the separator keeps one
// id's versions apart from a longer id that starts with it.
// AssistantVersions lists an assistant's versions, newest first, filtered
// by metadata.
func (e *Engine) AssistantVersions(id string, metadata map[string]any, limit, offset int) ([]Assistant, error) {
	var out []Assistant
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		a, err := e.ResolveAssistant(tx, id)
		if err != nil {
			return err
		}
		all, err := tx.AssistantVersions(a.AssistantID)
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
	err := e.store.Update(context.Background(), func(tx Tx) error {
		a, err := e.ResolveAssistant(tx, id)
		if err != nil {
			return err
		}
		v, err := tx.GetAssistantVersion(a.AssistantID, version)
		if err != nil {
			return fmt.Errorf("%w: assistant %s has no version %d", ErrNotFound, a.AssistantID, version)
		}
		v.CreatedAt, v.UpdatedAt = a.CreatedAt, time.Now().UTC()
		out = *v
		return tx.PutAssistant(v)
	})
	return out, err
}

// GetAssistant returns an assistant by id or graph id.
func (e *Engine) GetAssistant(id string) (Assistant, error) {
	var out Assistant
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
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
	err := e.store.Update(context.Background(), func(tx Tx) error {
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
		all, err := tx.AssistantVersions(a.AssistantID)
		if err != nil {
			return err
		}
		if len(all) > 0 && all[0].Version >= a.Version {
			a.Version = all[0].Version
		}
		a.Version++
		a.UpdatedAt = time.Now().UTC()
		out = *a
		if err := tx.PutAssistant(a); err != nil {
			return err
		}
		return tx.PutAssistantVersion(a)
	})
	return out, err
}

// DeleteAssistant deletes an assistant.
func (e *Engine) DeleteAssistant(id string) error {
	return e.store.Update(context.Background(), func(tx Tx) error {
		if _, err := tx.GetAssistant(id); errors.Is(err, ErrNotFound) {
			return fmt.Errorf("%w: assistant %s", ErrNotFound, id)
		}
		return deleteAssistant(tx, id)
	})
}

// deleteAssistant removes assistant id, its versions and its crons (as
// the reference does) in tx.
func deleteAssistant(tx Tx, id string) error {
	if err := deleteCronsOf(tx, id, ""); err != nil {
		return err
	}
	return tx.DeleteAssistant(id)
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
	all, err := e.FindAssistants(q)
	if err != nil {
		return all, 0, err
	}
	n, err := e.CountAssistants(q)
	return all, n, err
}

// FindAssistants returns the page of assistants q selects, in its order,
// read through the assistant indexes (store_assistantindex.go).
func (e *Engine) FindAssistants(q AssistantQuery) ([]Assistant, error) {
	var all []Assistant
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		var err error
		all, err = tx.SearchAssistants(q)
		return err
	})
	if all == nil {
		all = []Assistant{}
	}
	return all, err
}

// CountAssistants counts the assistants q selects, from the indexes.
func (e *Engine) CountAssistants(q AssistantQuery) (int, error) {
	var n int
	err := e.store.ViewCommitted(context.Background(), func(tx ReadTx) error {
		var err error
		n, err = tx.CountAssistants(q)
		return err
	})
	return n, err
}
