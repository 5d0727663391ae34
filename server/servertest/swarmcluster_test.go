package servertest

import (
	"slices"
	"testing"
)

// TestMissingCapsOf checks the capabilities a swarm node container drops:
// those missing from the bounding set, by name.
func TestMissingCapsOf(t *testing.T) {
	tests := []struct {
		name, status string
		want         []string
	}{
		{"every capability", "Name:\tx\nCapBnd:\t000001ffffffffff\nCapAmb:\t0\n", nil},
		{"CAP_SYS_RESOURCE dropped", "CapPrm:\t000001fffeffffff\nCapBnd:\t000001fffeffffff\n", []string{"SYS_RESOURCE"}},
		{"an older kernel's set, and two dropped", "CapBnd:\t0000003fffffeffe\n", []string{"CHOWN", "NET_ADMIN", "PERFMON", "BPF", "CHECKPOINT_RESTORE"}},
		{"no bounding set", "Name:\tx\n", nil},
		{"unreadable", "CapBnd:\tzz\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := missingCapsOf(tt.status); !slices.Equal(got, tt.want) {
				t.Errorf("missingCapsOf = %v, want %v", got, tt.want)
			}
		})
	}
}
