// Package httpx holds what every Slipway HTTP API shares: JSON rendering, the
// error shapes (404/401/403/409/400 as {"detail": string}, 422 as the
// FastAPI-style HTTPValidationError), and the middleware chain. Handlers
// return errors; they are rendered here, in one place, so every API answers
// bad input the same way.
package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/julienschmidt/httprouter"
)

// Error is an error that is safe to show to the client.
type Error struct {
	Status int
	Detail string
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Detail) }

// Errorf builds a client-visible error with the given status.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Detail: fmt.Sprintf(format, args...)}
}

func NotFound(format string, args ...any) *Error {
	return Errorf(http.StatusNotFound, format, args...)
}
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, format, args...)
}
func Conflict(format string, args ...any) *Error { return Errorf(http.StatusConflict, format, args...) }
func Unauthorized(format string, args ...any) *Error {
	return Errorf(http.StatusUnauthorized, format, args...)
}
func Forbidden(format string, args ...any) *Error {
	return Errorf(http.StatusForbidden, format, args...)
}

// Unprocessable is a 422 whose detail is one sentence: the shape the
// LangGraph agent servers give their own checks of a request. (The control
// plane and the organization API answer 422 with Invalid's field errors.)
func Unprocessable(format string, args ...any) *Error {
	return Errorf(http.StatusUnprocessableEntity, format, args...)
}

// FieldError is one entry of a 422 HTTPValidationError.
type FieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// ValidationError is a 422 with one or more field errors.
type ValidationError struct {
	Errors []FieldError
}

func (v *ValidationError) Error() string {
	parts := make([]string, 0, len(v.Errors))
	for _, e := range v.Errors {
		parts = append(parts, fmt.Sprintf("%v: %s", e.Loc, e.Msg))
	}
	return "validation: " + strings.Join(parts, "; ")
}

// Invalid builds a 422 for a single field. loc is e.g. "body", "source_config", "name".
func Invalid(typ, msg string, loc ...any) *ValidationError {
	return &ValidationError{Errors: []FieldError{{Loc: loc, Msg: msg, Type: typ}}}
}

// Handle is the handler signature used across Slipway: return an error and
// let the adapter render it.
type Handle func(w http.ResponseWriter, r *http.Request, p httprouter.Params) error

// Adapt turns a Handle into an httprouter.Handle that renders returned errors.
func Adapt(h Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		if err := h(w, r, p); err != nil {
			WriteError(w, r, err)
		}
	}
}

// WriteError renders err in the documented shape. Errors that are not
// client-visible become a generic 500 and are logged with the request.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var he *Error
	var ve *ValidationError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &ve):
		WriteJSON(w, http.StatusUnprocessableEntity, map[string]any{"detail": ve.Errors})
	case errors.As(err, &he):
		WriteJSON(w, he.Status, map[string]any{"detail": he.Detail})
	case errors.As(err, &mbe):
		WriteJSON(w, http.StatusRequestEntityTooLarge, map[string]any{
			"detail": fmt.Sprintf("Request body exceeds the limit of %d bytes.", mbe.Limit)})
	default:
		LogFrom(r).Error().Err(err).Msg("internal error")
		WriteJSON(w, http.StatusInternalServerError, map[string]any{"detail": "Internal server error."})
	}
}

// WriteJSON renders v with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if v == nil {
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

// DecodeJSON decodes a request body into v. With strict, unknown fields are
// a 422. The body is checked first (CheckJSON: depth, duplicate keys,
// UTF-8). Syntax and type errors become 422s pointing at the body, the
// shape clients of FastAPI services expect.
func DecodeJSON(r *http.Request, v any, strict bool) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return BadRequest("Could not read the request body: %v", err)
	}
	if err := CheckJSON(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return JSONError(err)
	}
	if dec.More() {
		return Invalid("json_invalid", "JSON decode error: unexpected data after the top-level value", "body")
	}
	return nil
}

// JSONError maps an encoding/json error to a 422 (or a 413 for an oversized body).
func JSONError(err error) error {
	var mbe *http.MaxBytesError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &mbe):
		return err
	case errors.Is(err, io.EOF):
		return Invalid("missing", "Field required: the request body is empty", "body")
	case errors.As(err, &se):
		return Invalid("json_invalid", fmt.Sprintf("JSON decode error at offset %d: %s", se.Offset, se.Error()), "body")
	case errors.As(err, &te):
		loc := []any{"body"}
		if te.Field != "" {
			for _, f := range strings.Split(te.Field, ".") {
				loc = append(loc, f)
			}
		}
		return &ValidationError{Errors: []FieldError{{Loc: loc,
			Msg: fmt.Sprintf("Input should be a valid %s", jsonKind(te.Type.Kind().String())), Type: jsonKind(te.Type.Kind().String()) + "_type"}}}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return Invalid("extra_forbidden", "Extra inputs are not permitted", "body", name)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return Invalid("json_invalid", "JSON decode error: unexpected end of input", "body")
	default:
		return Invalid("json_invalid", "JSON decode error: "+err.Error(), "body")
	}
}

func jsonKind(k string) string {
	switch k {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "int"
	case "float32", "float64":
		return "float"
	case "bool":
		return "bool"
	case "slice", "array":
		return "list"
	case "map", "struct":
		return "dict"
	default:
		return k
	}
}
