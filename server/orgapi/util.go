package orgapi

import (
	"encoding/json"

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
