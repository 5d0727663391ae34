package agent

import (
	"fmt"
	"time"
)

// renameSystemAssistant gives the stored system assistant raw the name its
// graph has now (a revision renamed the compiled graph, or the assistant
// predates graph names), as the reference syncs a system assistant's name
// at start. Its current version is renamed with it; assistants users made
// are never touched.
func renameSystemAssistant(tx Tx, a *Assistant, name string) error {
	if a.Metadata["created_by"] != "system" || a.Name == name {
		return nil
	}
	a.Name, a.UpdatedAt = name, time.Now().UTC()
	if err := tx.PutAssistant(a); err != nil {
		return fmt.Errorf("rename system assistant: %w", err)
	}
	if err := tx.PutAssistantVersion(a); err != nil {
		return fmt.Errorf("rename system assistant: %w", err)
	}
	return nil
}
