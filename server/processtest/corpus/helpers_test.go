package corpus_test

import (
	"testing"

	"slipway/server/servertest"
)

// The machine checks the corpus shares with processtest (servertest).

func requirePython311(t *testing.T)                           { servertest.RequirePython311(t) }
func requireJSSDK(t *testing.T)                               { servertest.RequireJSSDK(t) }
func requireRuntime(t testing.TB, driver string)              { servertest.RequireRuntime(t, driver) }
func requireDebootstrap(t *testing.T)                         { servertest.RequireDebootstrap(t) }
func jsSuite() string                                         { return servertest.JSSuite() }
func projectFiles(t testing.TB, dir string) map[string]string { return servertest.ProjectFiles(t, dir) }
