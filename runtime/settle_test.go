package runtime

import (
	"slices"
	"testing"
)

func TestSettleKeepsSlipwaysOwn(t *testing.T) {
	cases := []struct {
		env, own, want []string
	}{
		{[]string{"A=1", "B=2"}, []string{"C=3"}, []string{"A=1", "B=2", "C=3"}},
		{[]string{"A=1", "SLIPWAY_AGENT_ADDR=0.0.0.0:1", "B=2"}, []string{"SLIPWAY_AGENT_ADDR=127.0.0.1:9"},
			[]string{"A=1", "B=2", "SLIPWAY_AGENT_ADDR=127.0.0.1:9"}},
		{[]string{"X=a=b", "X=c"}, []string{"X=own"}, []string{"X=own"}},
		{nil, []string{"A="}, []string{"A="}},
	}
	for _, tc := range cases {
		if got := Settle(tc.env, tc.own); !slices.Equal(got, tc.want) {
			t.Errorf("Settle(%q, %q) = %q, want %q", tc.env, tc.own, got, tc.want)
		}
	}
}
