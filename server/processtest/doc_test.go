// Package processtest holds the control-plane tests that need `slipway`
// as a real process: signals and exit codes, a SIGKILL in the middle of
// writes, the admin socket a crash leaves behind, the process and docker
// runtimes (which run the binary as the agent and the sandbox launcher),
// the sandbox attacks, real agent processes behind the proxy and browsers
// in front of them, the golden database, the server's memory, the corpus,
// the soak and the process-level benchmarks. Everything that only speaks
// HTTP starts the control plane in-process instead (package apptest).
// Under -short all of it skips (servertest.Binary).
package processtest_test
