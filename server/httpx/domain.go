package httpx

import (
	"errors"
	"net/http"

	"slipway/storage/errs"
)

// domainStatus is the one table of HTTP statuses for the domain error
// vocabulary (slipway/storage/errs): the serve side's stores (FromDomain)
// and the agent engine (agentapi) answer their refusals by it. Order is
// the order of the checks: the first kind an error is wins.
var domainStatus = []struct {
	kind   error
	status int
}{
	{errs.NotFound, http.StatusNotFound},
	{errs.Conflict, http.StatusConflict},
	{errs.BadRequest, http.StatusBadRequest},
	{errs.Invalid, http.StatusUnprocessableEntity},
	{errs.Forbidden, http.StatusForbidden},
	{errs.Unavailable, http.StatusServiceUnavailable},
}

// DomainStatus returns the status of the first kind of the vocabulary
// that err is (errors.Is), that kind, and whether there is one.
func DomainStatus(err error) (status int, kind error, ok bool) {
	for _, d := range domainStatus {
		if errors.Is(err, d.kind) {
			return d.status, d.kind, true
		}
	}
	return 0, nil, false
}

// FromDomain turns a domain error written for the client (*errs.Error)
// into the answer it gets, {"detail": its message} with its kind's
// status; any other error, a bare kind included, is returned unchanged.
func FromDomain(err error) error {
	e, ok := errs.As(err)
	if !ok {
		return err
	}
	if status, _, ok := DomainStatus(e.Kind); ok {
		return Errorf(status, "%s", e.Msg)
	}
	return err
}
