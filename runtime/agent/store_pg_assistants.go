package agent

import (
	"encoding/json"
	"fmt"
	"strings"
)

func decodeAssistant(raw []byte) (*Assistant, error) {
	var a Assistant
	if err := unmarshalStored(raw, &a); err != nil {
		return nil, fmt.Errorf("decode assistant: %w", err)
	}
	return &a, nil
}

func (t *pgTx) GetAssistant(id string) (*Assistant, error) {
	raw, err := t.body("get assistant", "select body from assistants where assistant_id = $1", id)
	if err != nil {
		return nil, err
	}
	return decodeAssistant(raw)
}

func (t *pgTx) ForEachAssistant(fn func(*Assistant) error) error {
	_, raws, err := t.pairs("scan assistants", "select assistant_id, body from assistants order by assistant_id")
	if err != nil {
		return err
	}
	for _, raw := range raws {
		a, err := decodeAssistant(raw)
		if err != nil {
			return err
		}
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

func (t *pgTx) AssistantVersions(id string) ([]Assistant, error) {
	_, raws, err := t.pairs("assistant versions",
		"select assistant_id, body from assistant_versions where assistant_id = $1 order by version desc", id)
	if err != nil {
		return nil, err
	}
	var out []Assistant
	for _, raw := range raws {
		a, err := decodeAssistant(raw)
		if err != nil {
			return nil, fmt.Errorf("decode assistant version: %w", err)
		}
		out = append(out, *a)
	}
	return out, nil
}

func (t *pgTx) GetAssistantVersion(id string, version int) (*Assistant, error) {
	raw, err := t.body("get assistant version", "select body from assistant_versions where assistant_id = $1 and version = $2", id, version)
	if err != nil {
		return nil, err
	}
	return decodeAssistant(raw)
}

func (t *pgTx) PutAssistant(a *Assistant) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("put assistant: %w", err)
	}
	id := []byte(a.AssistantID)
	return t.exec("put assistant", `insert into assistants (assistant_id, body, graph_id, k_created, k_updated, k_graph, k_name, metas)
		values ($1, $2, $3, $4, $5, $6, $7, $8)
		on conflict (assistant_id) do update set body = excluded.body, graph_id = excluded.graph_id, k_created = excluded.k_created,
			k_updated = excluded.k_updated, k_graph = excluded.k_graph, k_name = excluded.k_name, metas = excluded.metas`,
		a.AssistantID, raw, a.GraphID, cat(timeKey(a.CreatedAt), id), cat(timeKey(a.UpdatedAt), id),
		cat(sortText(a.GraphID), []byte{0}, id), cat(sortText(a.Name), []byte{0}, id), pgMetas(a.Metadata))
}

func (t *pgTx) PutAssistantVersion(a *Assistant) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode assistant version: %w", err)
	}
	return t.exec("put assistant version", `insert into assistant_versions (assistant_id, version, body) values ($1, $2, $3)
		on conflict (assistant_id, version) do update set body = excluded.body`, a.AssistantID, a.Version, raw)
}

func (t *pgTx) DeleteAssistant(id string) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	if err := t.exec("delete assistant", "delete from assistant_versions where assistant_id = $1", id); err != nil {
		return err
	}
	return t.exec("delete assistant", "delete from assistants where assistant_id = $1", id)
}

// assistantSearch plans q as the bbolt store does (store_assistantindex.go):
// graph_id and scalar metadata by the indexed columns, the name (a
// case-insensitive substring) and other metadata on decoded records.
func (t *pgTx) assistantSearch(q AssistantQuery) *pgSearch {
	s := &pgSearch{table: "assistants", id: "assistant_id", desc: q.Desc, refuse: func() error {
		return fmt.Errorf("%w: the name filter (or a metadata filter on an object, array, null or long value) "+
			"would read more than %d assistants; narrow the search with graph_id or metadata filters on strings, numbers or booleans",
			ErrInvalid, maxResidualScan)
	}}
	switch q.SortBy {
	case "assistant_id":
		s.order = "assistant_id"
	case "updated_at":
		s.order = "k_updated"
	case "graph_id":
		s.order = "k_graph"
	case "name":
		s.order = "k_name"
	default:
		s.order = "k_created"
	}
	if q.GraphID != "" {
		s.filter("graph_id = $%d", q.GraphID)
	}
	residual := s.metadata(q.Metadata)
	if q.Name != "" || len(residual) > 0 {
		s.residual = func(raw []byte) (bool, error) {
			a, err := decodeAssistant(raw)
			if err != nil {
				return false, err
			}
			return (q.Name == "" || strings.Contains(strings.ToLower(a.Name), strings.ToLower(q.Name))) && matches(a.Metadata, residual), nil
		}
	}
	return s
}

func (t *pgTx) SearchAssistants(q AssistantQuery) ([]Assistant, error) {
	raws, err := t.assistantSearch(q).page(t, q.Offset, q.Limit)
	if err != nil {
		return nil, err
	}
	return decodeAll(raws, decodeAssistant)
}

func (t *pgTx) CountAssistants(q AssistantQuery) (int, error) {
	q.SortBy = ""
	return t.assistantSearch(q).count(t)
}
