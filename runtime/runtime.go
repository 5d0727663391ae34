// Package runtime is everything that makes a deployment run. The control
// plane stores desired state and drives a Driver through a revision's
// lifecycle; drivers (docker, process, and a fake one for tests) turn that
// into running agent servers.
package runtime

import (
	"context"
	"errors"
	"io"
	"strings"
	"time"
)

// Spec is what a driver needs to build and run one revision.
type Spec struct {
	DeploymentID   string
	DeploymentName string
	RevisionID     string
	WorkspaceID    string
	Source         string // internal_source, internal_docker, external_docker
	ImageURI       string
	TarballPath    string // absolute path of the uploaded source archive
	GraphConfig    string // path of the graph configuration inside the source
	InstallCommand string
	BuildCommand   string
	// Env holds decrypted secrets; drivers must never log it.
	Env              map[string]string
	SecretReferences []SecretReference
	ResourceSpec     *ResourceSpec // nil: none given
	// AgentEnv is what Slipway itself tells the agent (such as
	// SLIPWAY_AGENT_POSTGRES_URL); it wins over Env, may hold credentials
	// and must never be logged either.
	AgentEnv map[string]string
	// Scale is how many agent processes the revision runs (replicas.go);
	// the zero value is one. Drivers without Scaler refuse a scaled one.
	Scale Scale
}

// Driver builds and runs revisions. Every method is idempotent: the control
// plane may repeat a call after a crash.
type Driver interface {
	Name() string
	// Build turns the revision's source into something Deploy can start and
	// returns a reference to it. Build output goes to log.
	Build(ctx context.Context, spec Spec, log io.Writer) (artifact string, err error)
	// Deploy starts the revision and returns once its health check passes,
	// with the base URL the proxy forwards to.
	Deploy(ctx context.Context, spec Spec, artifact string, log io.Writer) (endpoint string, err error)
	// Stop stops one revision and frees what only it used.
	Stop(ctx context.Context, deploymentID, revisionID string) error
	// Remove deletes everything the deployment owns: containers, volumes, files.
	Remove(ctx context.Context, deploymentID string) error
	// Endpoint is the base URL serving the deployment now, if any. When
	// the URL carries a password (http://agent:SECRET@host), the agent
	// answers only requests that send SECRET in AgentTokenHeader.
	Endpoint(deploymentID string) (string, bool)
}

// AgentTokenHeader carries the secret a driver gave the agent it started
// (see Driver.Endpoint). Agents that share the host's loopback answer only
// Slipway with it, never another deployment's code.
const AgentTokenHeader = "X-Slipway-Agent-Token"

// The drivers' defaults: how long a new revision may take to answer GET
// /ok, and how long an agent gets to finish after SIGTERM.
const (
	DefaultHealthTimeout = 30 * time.Second
	DefaultStopGrace     = 10 * time.Second
)

// ErrUnsupported marks a spec the driver cannot run (e.g. a docker-only
// source on the process driver); the revision fails with its message.
var ErrUnsupported = errors.New("unsupported by this runtime")

// Reconciler is implemented by drivers whose agents outlive Slipway (the
// docker driver's containers). Reconcile runs once at start-up, before any
// build or deploy: deployments maps every deployment on record to its
// active revision ("" for none), and the driver removes what no record
// claims. Active revisions are then adopted or restarted by Deploy.
type Reconciler interface {
	Reconcile(ctx context.Context, deployments map[string]string) error
}

// Refresher is implemented by drivers whose agents can move while they
// serve (a restarted container gets a new address). The proxy calls
// Refresh when a deployment's endpoint stops answering.
type Refresher interface {
	Refresh(deploymentID string)
}

// Isolation says what separates deployment code from Slipway and from
// other deployments on this host, as the driver found it at start-up. It
// is logged and shown at GET /info so that an operator sees the isolation
// actually in force, never an assumed one.
type Isolation struct {
	// Mode names the mechanism in one phrase, e.g. "per-deployment uid,
	// namespaces" or "same user as slipway (none)".
	Mode string `json:"mode"`
	// Guarantees lists what holds, one sentence each.
	Guarantees []string `json:"guarantees"`
	// Missing lists what does not hold on this host and why.
	Missing []string `json:"missing"`
}

// Isolator is implemented by drivers that run deployment code.
type Isolator interface {
	Isolation() Isolation
}

// Settle is env with Slipway's own settings for an agent (own) in place
// of whatever of env names the same variables. Of two entries with one
// name a process reads the first (Go's os.Getenv, the C library's
// getenv), a container engine keeps the last: either way a deployment's
// secret named SLIPWAY_AGENT_ADDR or SLIPWAY_AGENT_DATA_DIR must not be
// the one its agent gets.
func Settle(env, own []string) []string {
	set := make(map[string]bool, len(own))
	for _, kv := range own {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(env)+len(own))
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); !set[k] {
			out = append(out, kv)
		}
	}
	return append(out, own...)
}
