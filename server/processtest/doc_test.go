// Package processtest holds the control-plane tests that need `slipway`
// as a real process: signals and exit codes (serve_test.go), a SIGKILL in
// the middle of writes (crash_test.go), the admin socket a crash leaves
// behind (admin_socket_test.go). Everything that only speaks HTTP starts
// the control plane in-process instead (package apptest).
package processtest_test
