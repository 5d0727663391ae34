package orgapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"

	bolt "go.etcd.io/bbolt"

	"slipway/server/auth"
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

func orgManager(p *auth.Principal, what string) error {
	if !p.OrgManage() || p.ReadOnly {
		return denied("%s requires the Organization Admin or Organization Operator role.", what)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// viewJSON runs read in a read transaction, then answers with out, which
// read fills (a pointer, or a map).
func (s *Store) viewJSON(w http.ResponseWriter, out any, read func(*bolt.Tx) error) error {
	if err := s.DB.View(read); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// changeJSON runs change in a write transaction, then answers with out,
// which change fills (a pointer, or a map).
func (s *Store) changeJSON(w http.ResponseWriter, out any, change func(*bolt.Tx) error) error {
	if err := s.update(change); err != nil {
		return err
	}
	httpx.WriteJSON(w, http.StatusOK, out)
	return nil
}

// managerBody begins an organization manager's write: the caller must
// manage the organization (what names the change for the refusal), then
// the body decodes into req.
func managerBody(r *http.Request, what string, req any) (*auth.Principal, error) {
	p := auth.From(r)
	if err := orgManager(p, what); err != nil {
		return nil, err
	}
	return p, httpx.DecodeJSON(r, req, true)
}

// wsAdminBody is managerBody for a workspace administrator's write.
func wsAdminBody(r *http.Request, what string, req any) (*auth.Principal, error) {
	p := auth.From(r)
	if err := wsAdmin(p, what); err != nil {
		return nil, err
	}
	return p, httpx.DecodeJSON(r, req, true)
}

// changeAs is changeJSON for a caller who passes check (orgManager or
// wsAdmin; what names the change for the refusal).
func (s *Store) changeAs(w http.ResponseWriter, r *http.Request, check func(*auth.Principal, string) error, what string,
	out any, change func(*bolt.Tx, *auth.Principal) error) error {
	p := auth.From(r)
	if err := check(p, what); err != nil {
		return err
	}
	return s.changeJSON(w, out, func(tx *bolt.Tx) error { return change(tx, p) })
}
