package errs

import (
	"errors"
	"fmt"
	"testing"
)

func TestErrorIsItsKind(t *testing.T) {
	kinds := []error{NotFound, Conflict, Invalid, BadRequest, Forbidden}
	for _, kind := range kinds {
		t.Run(kind.Error(), func(t *testing.T) {
			err := fmt.Errorf("wrapped: %w", New(kind, "Thing %d not found.", 7))
			for _, other := range kinds {
				if got, want := errors.Is(err, other), other == kind; got != want {
					t.Errorf("errors.Is(%q, %v) = %v, want %v", err, other, got, want)
				}
			}
			e, ok := As(err)
			if !ok || e.Msg != "Thing 7 not found." || e.Error() != e.Msg {
				t.Fatalf("As(%q) = %+v, %v", err, e, ok)
			}
		})
	}
}

func TestBareKindIsNotAnError(t *testing.T) {
	if e, ok := As(fmt.Errorf("record x: %w", NotFound)); ok {
		t.Fatalf("a bare kind passed for a client message: %+v", e)
	}
}
