package orgapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/google/uuid"

	"slipway/server/httpx"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// ParseID parses a UUID path or query parameter, answering a FastAPI-style
// 422 (type uuid_parsing) at loc when it is not one.
func ParseID(s string, loc ...any) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil || len(s) != 36 && len(s) != 32 {
		return uuid.Nil, httpx.Invalid("uuid_parsing", "Input should be a valid UUID, invalid character or length: "+quote(s), loc...)
	}
	return id, nil
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// decodeList decodes a JSON array body element by element, so that an
// error inside an element (an unknown field, a wrong type) is located at
// ["body", index, ...] as FastAPI does, rather than at the array.
func decodeList[T any](r *http.Request) ([]T, error) {
	var raws []json.RawMessage
	if err := httpx.DecodeJSON(r, &raws, true); err != nil {
		return nil, err
	}
	out := make([]T, len(raws))
	for i, raw := range raws {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&out[i]); err != nil {
			err = httpx.JSONError(err)
			var ve *httpx.ValidationError
			if errors.As(err, &ve) {
				for j := range ve.Errors {
					rest := ve.Errors[j].Loc
					if len(rest) > 0 && rest[0] == "body" {
						rest = rest[1:]
					}
					ve.Errors[j].Loc = append([]any{"body", i}, rest...)
				}
			}
			return nil, err
		}
	}
	return out, nil
}
