package agent

import "testing"

func TestPostgresStoreConformance(t *testing.T) {
	runStoreConformance(t, func(t *testing.T) Store { return openPGTestStore(t) })
}
