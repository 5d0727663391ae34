package httpx

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// ParseID parses a UUID path or query parameter, answering a FastAPI-style
// 422 (type uuid_parsing) at loc when it is not one. Only the canonical
// 36-character form and the 32-character hex form are accepted, as pydantic
// does; uuid.Parse alone would also take the urn: and braced forms.
func ParseID(s string, loc ...any) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 && len(s) != 32 {
		return uuid.Nil, Invalid("uuid_parsing", "Input should be a valid UUID, invalid character or length: "+quoteInput(s), loc...)
	}
	return id, nil
}

// quoteInput renders a rejected input for an error message, cut short so a
// hostile value cannot make the answer large.
func quoteInput(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// QueryInt reads an optional integer query parameter bounded by [min, max]
// (max < min means unbounded above), answering FastAPI's 422 types
// (int_parsing, greater_than_equal, less_than_equal) at ["query", name].
// def is returned when the parameter is absent.
func QueryInt(q url.Values, name string, def, min, max int) (int, error) {
	v := q.Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil:
		return 0, Invalid("int_parsing", "Input should be a valid integer", "query", name)
	case n < min:
		return 0, Invalid("greater_than_equal", "Input should be greater than or equal to "+strconv.Itoa(min), "query", name)
	case max >= min && n > max:
		return 0, Invalid("less_than_equal", "Input should be less than or equal to "+strconv.Itoa(max), "query", name)
	}
	return n, nil
}

// QueryBool reads an optional boolean query parameter (true/false, 1/0 and
// the other spellings strconv.ParseBool takes; absent is false), answering
// FastAPI's 422 (bool_parsing) at ["query", name].
func QueryBool(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, Invalid("bool_parsing", "Input should be a valid boolean", "query", name)
	}
	return b, nil
}

// LimitOffset reads the limit (1..maxLimit, default def) and offset (≥ 0)
// query parameters every paged list of the hosted APIs takes.
func LimitOffset(q url.Values, def, maxLimit int) (limit, offset int, err error) {
	if limit, err = QueryInt(q, "limit", def, 1, maxLimit); err != nil {
		return 0, 0, err
	}
	if offset, err = QueryInt(q, "offset", 0, 0, -1); err != nil {
		return 0, 0, err
	}
	return limit, offset, nil
}

// BearerToken returns the token of an "Authorization: Bearer …" header
// (the scheme name is case-insensitive, RFC 9110 §11.1), or "".
func BearerToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}
