package httpx

import (
	"errors"
	"net/http"
	"net/url"
	"testing"
)

func TestLimitOffset(t *testing.T) {
	for _, c := range []struct {
		query         string
		limit, offset int
		errType       string
		errLoc        string
	}{
		{"", 20, 0, "", ""},
		{"limit=1&offset=5", 1, 5, "", ""},
		{"limit=100", 100, 0, "", ""},
		{"limit=0", 0, 0, "greater_than_equal", "limit"},
		{"limit=101", 0, 0, "less_than_equal", "limit"},
		{"limit=x", 0, 0, "int_parsing", "limit"},
		{"offset=-1", 0, 0, "greater_than_equal", "offset"},
		{"offset=999999999", 20, 999999999, "", ""},
	} {
		q, _ := url.ParseQuery(c.query)
		limit, offset, err := LimitOffset(q, 20, 100)
		if c.errType == "" {
			if err != nil || limit != c.limit || offset != c.offset {
				t.Errorf("%q: got %d, %d, %v; want %d, %d", c.query, limit, offset, err, c.limit, c.offset)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Errors[0].Type != c.errType || ve.Errors[0].Loc[1] != c.errLoc {
			t.Errorf("%q: got %v, want %s at %s", c.query, err, c.errType, c.errLoc)
		}
	}
}

func TestQueryBool(t *testing.T) {
	for _, c := range []struct {
		query   string
		want    bool
		invalid bool
	}{
		{"", false, false},
		{"flag=true", true, false},
		{"flag=1", true, false},
		{"flag=False", false, false},
		{"flag=0", false, false},
		{"flag=maybe", false, true},
		{"flag=yes", false, true},
	} {
		q, _ := url.ParseQuery(c.query)
		got, err := QueryBool(q, "flag")
		var ve *ValidationError
		switch {
		case c.invalid && (!errors.As(err, &ve) || ve.Errors[0].Type != "bool_parsing" || ve.Errors[0].Loc[1] != "flag"):
			t.Errorf("%q: got %v, want bool_parsing at flag", c.query, err)
		case !c.invalid && (err != nil || got != c.want):
			t.Errorf("%q: got %v, %v; want %v", c.query, got, err, c.want)
		}
	}
}

func TestParseIDAndBearer(t *testing.T) {
	for _, s := range []string{"urn:uuid:6ba7b810-9dad-11d1-80b4-00c04fd430c8", "{6ba7b810-9dad-11d1-80b4-00c04fd430c8}", "x"} {
		if _, err := ParseID(s, "path", "id"); err == nil {
			t.Errorf("ParseID(%q) accepted a non-canonical form", s)
		}
	}
	if _, err := ParseID("6ba7b8109dad11d180b400c04fd430c8"); err != nil {
		t.Errorf("hex form refused: %v", err)
	}
	for h, want := range map[string]string{"Bearer abc": "abc", "bearer  abc ": "abc", "Basic abc": "", "Bearer": ""} {
		r := &http.Request{Header: http.Header{"Authorization": {h}}}
		if got := BearerToken(r); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", h, got, want)
		}
	}
}
