package agent

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// renameSystemAssistant gives the stored system assistant raw the name its
// graph has now (a revision renamed the compiled graph, or the assistant
// predates graph names), as the reference syncs a system assistant's name
// at start. Its current version is renamed with it; assistants users made
// are never touched.
func renameSystemAssistant(tx *bolt.Tx, raw []byte, name string) error {
	var a Assistant
	if err := unmarshalStored(raw, &a); err != nil {
		return err
	}
	if a.Metadata["created_by"] != "system" || a.Name == name {
		return nil
	}
	a.Name, a.UpdatedAt = name, time.Now().UTC()
	if err := putJSON(tx.Bucket([]byte(bAssistants)), a.AssistantID, &a); err != nil {
		return fmt.Errorf("rename system assistant: %w", err)
	}
	if err := putVersion(tx, &a); err != nil {
		return fmt.Errorf("rename system assistant: %w", err)
	}
	return nil
}
