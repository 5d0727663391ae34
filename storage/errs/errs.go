// Package errs is Slipway's one domain error vocabulary: the kinds of
// refusal a store or an engine answers (not found, conflict, invalid, bad
// request, forbidden), shared by both processes. The agent engine's
// ErrNotFound … and storage.ErrNotFound are these same values, and the
// control plane's and organization API's stores return them as *Error
// (a message written for the client), so errors.Is(err, errs.NotFound)
// holds wherever a not-found came from.
//
// It is its own leaf package, importing nothing of Slipway, rather than
// part of storage, because server/httpx (a leaf both processes import)
// maps these kinds to HTTP statuses and may not import storage, which
// brings bbolt and the schema with it; storage, the agent engine and the
// serve side's stores all import this package without a cycle.
package errs

import (
	"errors"
	"fmt"
)

// The kinds. Their texts are the ones the agent engine's errors always
// had ("not found: thread …"): its HTTP layer strips them as prefixes.
var (
	// NotFound: the thing named does not exist (or is not visible to the caller).
	NotFound = errors.New("not found")
	// Conflict: it exists already, or another record holds the name or key.
	Conflict = errors.New("conflict")
	// Invalid: the request is malformed for the domain (HTTP 422).
	Invalid = errors.New("invalid")
	// BadRequest: the current state cannot serve the request (HTTP 400).
	BadRequest = errors.New("bad request")
	// Forbidden: the caller may not do this (HTTP 403).
	Forbidden = errors.New("forbidden")
	// Unavailable: a service the store needs refused the request before
	// anything was done (no connection free at its database); sending it
	// again may succeed (HTTP 503).
	Unavailable = errors.New("unavailable")
)

// Error is a domain error whose message is written for the client and
// becomes an answer's detail as it is. errors.Is(e, e.Kind) holds.
type Error struct {
	Kind error // one of the kinds above
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Kind }

// New returns an *Error of kind with a formatted message.
func New(kind error, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// As returns the *Error in err's chain and whether there is one; a bare
// kind (storage.Get's NotFound, wrapped) is not one: its text was not
// written for a client.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}
