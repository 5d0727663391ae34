package validate

import (
	"errors"
	"fmt"
	"testing"

	"slipway/server/httpx"
)

type inner struct {
	N int `json:"n" cp:"required"`
}

type body struct {
	Name  string            `json:"name" cp:"required,nonnull"`
	Tags  []string          `json:"tags"`
	Inner *inner            `json:"inner"`
	Env   map[string]string `json:"env"`
}

func TestDecodeReportsEveryShapeError(t *testing.T) {
	cases := []struct {
		name, in string
		want     []string // loc/type of each error, in order
	}{
		{"valid", `{"name": "a", "tags": ["x"], "inner": {"n": 1}, "env": {"K": "v"}}`, nil},
		{"empty body", ``, []string{"[body]/missing"}},
		{"missing and unknown", `{"extra": 1}`, []string{"[body name]/missing", "[body extra]/extra_forbidden"}},
		{"null where nonnull", `{"name": null}`, []string{"[body name]/string_type"}},
		{"nested types", `{"name": "a", "tags": [1], "inner": {"n": "x"}, "env": {"K": 2}}`,
			[]string{"[body tags 0]/string_type", "[body inner n]/int_type", "[body env K]/string_type"}},
		{"trailing data", `{"name": "a"} {}`, []string{"[body]/json_invalid"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var dst body
			err := Decode([]byte(c.in), &dst)
			var got []string
			var ve *httpx.ValidationError
			if errors.As(err, &ve) {
				for _, e := range ve.Errors {
					got = append(got, fmt.Sprintf("%v/%s", e.Loc, e.Type))
				}
			} else if err != nil {
				t.Fatalf("err = %v, want a validation error", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("errors %v, want %v", got, c.want)
			}
		})
	}
}

func TestErrorsStopAtMaxErrors(t *testing.T) {
	var e Errors
	for i := 0; i < MaxErrors+5; i++ {
		e.Add("value_error", "bad", "body", i)
	}
	var ve *httpx.ValidationError
	if !errors.As(e.Err(), &ve) || len(ve.Errors) != MaxErrors || e.Len() != MaxErrors {
		t.Fatalf("kept %d errors, want %d", e.Len(), MaxErrors)
	}
}
