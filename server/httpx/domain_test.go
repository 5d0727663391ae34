package httpx

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	"slipway/storage/errs"
)

func TestFromDomain(t *testing.T) {
	plain := errors.New("disk on fire")
	cases := []struct {
		name   string
		err    error
		status int // 0: passed on unchanged
		detail string
	}{
		{"not found", errs.New(errs.NotFound, "Deployment ID %d not found.", 1), http.StatusNotFound, "Deployment ID 1 not found."},
		{"wrapped conflict", fmt.Errorf("put: %w", errs.New(errs.Conflict, "Name taken.")), http.StatusConflict, "Name taken."},
		{"bad request", errs.New(errs.BadRequest, "No."), http.StatusBadRequest, "No."},
		{"invalid", errs.New(errs.Invalid, "Bad field."), http.StatusUnprocessableEntity, "Bad field."},
		{"forbidden", errs.New(errs.Forbidden, "Not yours."), http.StatusForbidden, "Not yours."},
		{"unavailable", errs.New(errs.Unavailable, "Try again."), http.StatusServiceUnavailable, "Try again."},
		// A bare kind (storage.Get's not-found, wrapped) carries no client
		// message: it stays an internal error.
		{"bare kind", fmt.Errorf("record: %w", errs.NotFound), 0, ""},
		{"other", plain, 0, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := FromDomain(c.err)
			var he *Error
			if c.status == 0 {
				if got != c.err {
					t.Fatalf("FromDomain(%v) = %v, want it unchanged", c.err, got)
				}
				return
			}
			if !errors.As(got, &he) || he.Status != c.status || he.Detail != c.detail {
				t.Fatalf("FromDomain(%v) = %#v, want %d %q", c.err, got, c.status, c.detail)
			}
		})
	}
}

func TestDomainStatusOfWrappedKinds(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
	}{
		{fmt.Errorf("%w: thread x", errs.NotFound), http.StatusNotFound},
		{fmt.Errorf("%w: run y is busy", errs.Conflict), http.StatusConflict},
		{fmt.Errorf("%w: no state", errs.BadRequest), http.StatusBadRequest},
		{fmt.Errorf("%w: limit", errs.Invalid), http.StatusUnprocessableEntity},
		{errs.Forbidden, http.StatusForbidden},
	} {
		status, kind, ok := DomainStatus(c.err)
		if !ok || status != c.status || !errors.Is(c.err, kind) {
			t.Errorf("DomainStatus(%v) = %d, %v, %v; want %d", c.err, status, kind, ok, c.status)
		}
	}
	if _, _, ok := DomainStatus(errors.New("not found")); ok {
		t.Error("an error that only reads like a kind passed for one")
	}
}
