package agent

import (
	"errors"
	"fmt"
)

// Errors the API maps to statuses.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("conflict")
	ErrInvalid  = errors.New("invalid")
	// ErrBadRequest is a request the thread's state cannot serve (the
	// reference answers these 400, not 422).
	ErrBadRequest = errors.New("bad request")
)

// cancel causes.
var (
	causeInterrupt = errors.New("interrupted by a newer run")
	causeRollback  = errors.New("rolled back by a newer run")
	causeCancel    = errors.New("cancelled")
)

// ErrBusy is the reject strategy's refusal, with the reference server's words.
var ErrBusy = fmt.Errorf("Thread is already running a task. Wait for it to finish or choose a different multitask strategy.")
