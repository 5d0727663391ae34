package server

import (
	"context"
	"fmt"
	"io"

	"slipway/runtime"
)

// unavailable is the driver when no runtime can run agents: revisions fail
// with a message that says so instead of waiting forever.
type unavailable struct{ name string }

func (u unavailable) Name() string { return "none" }

func (u unavailable) Build(context.Context, runtime.Spec, io.Writer) (string, error) {
	return "", fmt.Errorf("%w: no runtime driver is available (SLIPWAY_RUNTIME=%s)", runtime.ErrUnsupported, u.name)
}

func (u unavailable) Deploy(context.Context, runtime.Spec, string, io.Writer) (string, error) {
	return "", fmt.Errorf("%w: no runtime driver is available", runtime.ErrUnsupported)
}

func (u unavailable) Stop(context.Context, string, string) error { return nil }
func (u unavailable) Remove(context.Context, string) error       { return nil }

func (u unavailable) Endpoint(string) (string, bool) { return "", false }
