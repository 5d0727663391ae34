package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
)

const (
	bAssistants        = "assistants"
	bAssistantVersions = "assistant_versions"
)

// assistantReads are a unit of work's reads of assistants and their
// versions (every version an assistant had is kept).
type assistantReads interface {
	// GetAssistant returns the assistant's current version, or an error
	// wrapping ErrNotFound.
	GetAssistant(id string) (*Assistant, error)
	// ForEachAssistant calls fn for every assistant in id order until fn
	// returns an error, which it returns.
	ForEachAssistant(fn func(*Assistant) error) error
	// AssistantVersions returns the assistant's versions, newest first.
	AssistantVersions(id string) ([]Assistant, error)
	// GetAssistantVersion returns one version, or ErrNotFound.
	GetAssistantVersion(id string, version int) (*Assistant, error)
	// SearchAssistants returns the page of assistants q selects, in its
	// order (store_assistantindex.go says what is indexed).
	SearchAssistants(q AssistantQuery) ([]Assistant, error)
	// CountAssistants counts them (q's limit and offset ignored).
	CountAssistants(q AssistantQuery) (int, error)
}

// assistantWrites are a unit of work's writes of assistants.
type assistantWrites interface {
	// PutAssistant creates or replaces the assistant's current version.
	PutAssistant(a *Assistant) error
	// PutAssistantVersion records a as version a.Version of its history.
	PutAssistantVersion(a *Assistant) error
	// DeleteAssistant deletes the assistant and its versions.
	DeleteAssistant(id string) error
}

func versionKey(id string, v int) []byte {
	return append([]byte(id+"\x00"), byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func (t *boltTx) GetAssistant(id string) (*Assistant, error) {
	var a Assistant
	if err := getJSON(t.tx.Bucket([]byte(bAssistants)), id, &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func (t *boltTx) ForEachAssistant(fn func(*Assistant) error) error {
	return t.tx.Bucket([]byte(bAssistants)).ForEach(func(_, v []byte) error {
		var a Assistant
		if err := unmarshalStored(v, &a); err != nil {
			return err
		}
		return fn(&a)
	})
}

func (t *boltTx) AssistantVersions(id string) ([]Assistant, error) {
	var out []Assistant
	prefix := []byte(id + "\x00")
	c := t.tx.Bucket([]byte(bAssistantVersions)).Cursor()
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

func (t *boltTx) GetAssistantVersion(id string, version int) (*Assistant, error) {
	var a Assistant
	if err := getJSON(t.tx.Bucket([]byte(bAssistantVersions)), string(versionKey(id, version)), &a); err != nil {
		return nil, err
	}
	return &a, nil
}

func (t *boltTx) PutAssistant(a *Assistant) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	if err := t.reindexAssistant(a.AssistantID, a); err != nil {
		return fmt.Errorf("put assistant: %w", err)
	}
	return putJSON(t.tx.Bucket([]byte(bAssistants)), a.AssistantID, a)
}

func (t *boltTx) PutAssistantVersion(a *Assistant) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	raw, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("encode assistant version: %w", err)
	}
	return t.tx.Bucket([]byte(bAssistantVersions)).Put(versionKey(a.AssistantID, a.Version), raw)
}

func (t *boltTx) DeleteAssistant(id string) error {
	if err := t.unconfined(); err != nil {
		return err
	}
	all, err := t.AssistantVersions(id)
	if err != nil {
		return err
	}
	for _, v := range all {
		if err := t.tx.Bucket([]byte(bAssistantVersions)).Delete(versionKey(id, v.Version)); err != nil {
			return err
		}
	}
	if err := t.reindexAssistant(id, nil); err != nil {
		return fmt.Errorf("delete assistant: %w", err)
	}
	return t.tx.Bucket([]byte(bAssistants)).Delete([]byte(id))
}
