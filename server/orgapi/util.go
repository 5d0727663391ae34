package orgapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	"slipway/server/httpx"
)

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

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
