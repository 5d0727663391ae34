package audit

import "testing"

func FuzzDecodeCursor(f *testing.F) {
	f.Add(EncodeCursor(Position{T: 1795369985454, S: 2}))
	f.Add("")
	f.Add("eyJ0IjoxfQ")
	f.Add("!!!")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := DecodeCursor(s)
		if err != nil {
			return
		}
		// Whatever decodes must round-trip.
		q, err := DecodeCursor(EncodeCursor(*p))
		if err != nil || *q != *p {
			t.Fatalf("round trip of %+v: %+v, %v", p, q, err)
		}
	})
}
