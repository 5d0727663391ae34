package agent

import (
	"errors"
	"fmt"

	"slipway/storage/errs"
)

// Errors the API maps to statuses: the domain vocabulary's kinds
// (slipway/storage/errs) under the engine's names, the same values, so
// errors.Is(err, agent.ErrNotFound) and errors.Is(err, errs.NotFound)
// agree. The engine wraps them with its message ("not found: thread …").
var (
	ErrNotFound = errs.NotFound
	ErrConflict = errs.Conflict
	ErrInvalid  = errs.Invalid
	// ErrBadRequest is a request the thread's state cannot serve (the
	// reference answers these 400, not 422).
	ErrBadRequest = errs.BadRequest
)

// cancel causes.
var (
	causeInterrupt = errors.New("interrupted by a newer run")
	causeRollback  = errors.New("rolled back by a newer run")
	causeCancel    = errors.New("cancelled")
)

// ErrBusy is the reject strategy's refusal, with the reference server's words.
var ErrBusy = fmt.Errorf("Thread is already running a task. Wait for it to finish or choose a different multitask strategy.")
