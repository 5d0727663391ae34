// Package controlplane owns deployments, revisions, listeners, uploads,
// tracing projects, custom hosts and the revision and agent logs: their
// HTTP API (routes.go lists every route; one file per resource), their
// store (store*.go, the only code that touches their bbolt buckets, which
// keeps every index right and answers domain errors that routes.go maps to
// HTTP), and the Reconciler (reconcile*.go, health.go) that drives the
// runtime toward what the store holds and that handlers only signal.
//
// This file holds the API shapes with their exact JSON names (spec
// "Resources and their fields", completed from the hosted service's API
// description); validate.go checks requests against the spec's rules.
package controlplane

import (
	"encoding/json"
	"errors"
	"time"

	"slipway/runtime"
	"slipway/server/httpx/validate"
)

// Deployment sources.
const (
	SourceGitHub         = "github"
	SourceExternalDocker = "external_docker"
	SourceInternalDocker = "internal_docker"
	SourceInternalSource = "internal_source"
)

// Deployment status values (spec "States and transitions").
const (
	DeploymentAwaitingDatabase = "AWAITING_DATABASE"
	DeploymentReady            = "READY"
	DeploymentUnused           = "UNUSED"
	DeploymentAwaitingDelete   = "AWAITING_DELETE"
	DeploymentUnknown          = "UNKNOWN"
)

// Revision status values (reference control-plane.md "Revision").
const (
	RevisionCreating       = "CREATING"
	RevisionQueued         = "QUEUED"
	RevisionAwaitingBuild  = "AWAITING_BUILD"
	RevisionBuilding       = "BUILDING"
	RevisionAwaitingDeploy = "AWAITING_DEPLOY"
	RevisionDeploying      = "DEPLOYING"
	RevisionCreateFailed   = "CREATE_FAILED"
	RevisionBuildFailed    = "BUILD_FAILED"
	RevisionDeployFailed   = "DEPLOY_FAILED"
	RevisionDeployed       = "DEPLOYED"
	RevisionSkipped        = "SKIPPED"
	RevisionInterrupted    = "INTERRUPTED"
	RevisionUnknown        = "UNKNOWN"
)

// RevisionStatuses lists every revision status, in lifecycle order.
var RevisionStatuses = []string{
	RevisionCreating, RevisionQueued, RevisionAwaitingBuild, RevisionBuilding,
	RevisionAwaitingDeploy, RevisionDeploying, RevisionCreateFailed, RevisionBuildFailed,
	RevisionDeployFailed, RevisionDeployed, RevisionSkipped, RevisionInterrupted, RevisionUnknown,
}

// DeploymentStatuses lists every deployment status.
var DeploymentStatuses = []string{
	DeploymentAwaitingDatabase, DeploymentReady, DeploymentUnused, DeploymentAwaitingDelete, DeploymentUnknown,
}

// RevisionTerminal reports whether a revision status is final (the official
// client's terminal set, plus INTERRUPTED which nothing resumes).
func RevisionTerminal(status string) bool {
	switch status {
	case RevisionDeployed, RevisionCreateFailed, RevisionBuildFailed, RevisionDeployFailed,
		RevisionSkipped, RevisionInterrupted:
		return true
	}
	return false
}

// Deployment compute types / deployment types.
const (
	ComputeTypeK8s = "k8s"

	DeploymentTypeDevFree = "dev_free"
	DeploymentTypeDev     = "dev"
	DeploymentTypeProd    = "prod"
)

// RedactedSecret replaces every secret value in responses. A PATCH that
// sends it back as a value is rejected (422): the client must send the real
// value or leave `secrets` null.
const RedactedSecret = "**********"

// Deployment is the deployment resource as served.
type Deployment struct {
	ID                   string               `json:"id"`
	Name                 string               `json:"name"`
	Source               string               `json:"source"`
	SourceConfig         SourceConfig         `json:"source_config"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
	// Secrets are exposed as environment variables. In responses every
	// value is RedactedSecret (see Redacted).
	Secrets          []Secret          `json:"secrets"`
	SecretReferences []SecretReference `json:"secret_references"`
	TenantID         string            `json:"tenant_id"`
	CreatedAt        time.Time         `json:"created_at"`
	UpdatedAt        time.Time         `json:"updated_at"`
	Status           string            `json:"status"`
	LatestRevisionID *string           `json:"latest_revision_id"`
	ActiveRevisionID *string           `json:"active_revision_id"`
	ImageVersion     *string           `json:"image_version"`
	// URL is where the deployment's agent server is served (null until it is).
	URL *string `json:"url"`
	// Health is what the health watcher last found of the active
	// revision's agent (null without one): status "healthy" or
	// "unhealthy", the reason, since when, and how often it was recreated.
	// While it is unhealthy the deployment's status is UNKNOWN.
	Health *runtime.Health `json:"health"`
}

// Redacted returns a copy safe to serve: secret values replaced by
// RedactedSecret and `secrets` never null.
func (d *Deployment) Redacted() Deployment {
	out := *d
	out.Secrets = make([]Secret, len(d.Secrets))
	for i, s := range d.Secrets {
		out.Secrets[i] = Secret{Name: s.Name, Value: RedactedSecret}
	}
	return out
}

// SourceConfig holds the source-specific fields that do not create a
// revision (or cannot change). All fields are nullable.
type SourceConfig struct {
	IntegrationID  *string         `json:"integration_id"`
	RepoURL        *string         `json:"repo_url"`
	DeploymentType *string         `json:"deployment_type"`
	BuildOnPush    *bool           `json:"build_on_push"`
	CustomURL      *string         `json:"custom_url"`
	ResourceSpec   *ResourceSpec   `json:"resource_spec"`
	ListenerID     *string         `json:"listener_id"`
	ListenerConfig *ListenerConfig `json:"listener_config"`
	InstallCommand *string         `json:"install_command"`
	BuildCommand   *string         `json:"build_command"`
}

// SourceRevisionConfig holds the fields that describe one revision. Output
// uses `graph_config_path`; input also accepts the hosted service's name
// `langgraph_config_path` (see UnmarshalJSON).
type SourceRevisionConfig struct {
	RepoRef           *string `json:"repo_ref"`
	GraphConfigPath   *string `json:"graph_config_path"`
	ImageURI          *string `json:"image_uri"`
	SourceTarballPath *string `json:"source_tarball_path"`
	// RepoCommitSHA is read-only (github only); requests must leave it null.
	RepoCommitSHA *string `json:"repo_commit_sha"`

	// configPathKey is the JSON key the graph config path arrived under
	// ("langgraph_config_path" when the alias was used), so errors point
	// at what the client sent.
	configPathKey string
}

// sourceRevisionConfigInput is the accepted input shape of SourceRevisionConfig.
type sourceRevisionConfigInput struct {
	RepoRef             *string `json:"repo_ref"`
	GraphConfigPath     *string `json:"graph_config_path"`
	LanggraphConfigPath *string `json:"langgraph_config_path"`
	ImageURI            *string `json:"image_uri"`
	SourceTarballPath   *string `json:"source_tarball_path"`
	RepoCommitSHA       *string `json:"repo_commit_sha"`
}

// errConfigPathConflict is returned when both names of the graph config path
// are given with different values. The request decoders report it as a 422
// before ever reaching UnmarshalJSON.
var errConfigPathConflict = errors.New("graph_config_path and langgraph_config_path differ")

// UnmarshalJSON accepts `graph_config_path` and its alias
// `langgraph_config_path`. Both may be given only with the same value.
func (s *SourceRevisionConfig) UnmarshalJSON(b []byte) error {
	var in sourceRevisionConfigInput
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	out := SourceRevisionConfig{
		RepoRef:           in.RepoRef,
		GraphConfigPath:   in.GraphConfigPath,
		ImageURI:          in.ImageURI,
		SourceTarballPath: in.SourceTarballPath,
		RepoCommitSHA:     in.RepoCommitSHA,
	}
	if in.LanggraphConfigPath != nil {
		if in.GraphConfigPath != nil && *in.GraphConfigPath != *in.LanggraphConfigPath {
			return errConfigPathConflict
		}
		if in.GraphConfigPath == nil {
			out.GraphConfigPath = in.LanggraphConfigPath
			out.configPathKey = "langgraph_config_path"
		}
	}
	*s = out
	return nil
}

// InputShape tells the request checker (validate.Decode) which JSON keys
// the input accepts.
func (SourceRevisionConfig) InputShape() any { return sourceRevisionConfigInput{} }

// CheckObject reports the aliases graph_config_path and
// langgraph_config_path given with different values (validate.ObjectChecker).
func (*sourceRevisionConfigInput) CheckObject(obj map[string]any, l []any, errs *validate.Errors) {
	g, _ := obj["graph_config_path"].(string)
	lg, _ := obj["langgraph_config_path"].(string)
	if obj["graph_config_path"] != nil && obj["langgraph_config_path"] != nil && g != lg {
		errs.AddLoc("value_error", "langgraph_config_path is an alias of graph_config_path: give one of them, or both with the same value",
			validate.At(l, "langgraph_config_path"))
	}
}

// ListenerConfig is the per-deployment listener configuration (external_docker).
type ListenerConfig struct {
	K8sNamespace *string `json:"k8s_namespace"`
}

// Secret is exposed as an environment variable of the deployment container.
type Secret struct {
	Name  string `json:"name" cp:"required"`
	Value string `json:"value" cp:"required"`
}

// The resource-spec and secret-reference shapes are the runtime's
// (runtime.ResourceSpec): the control plane validates and stores them, the
// drivers act on them, and both read one declaration.
type (
	ResourceSpec         = runtime.ResourceSpec
	SecretReference      = runtime.SecretReference
	LocalObjectReference = runtime.LocalObjectReference
	Volume               = runtime.Volume
	VolumeMount          = runtime.VolumeMount
	Container            = runtime.Container
	EnvVar               = runtime.EnvVar
	ResourceRequirements = runtime.ResourceRequirements
)

// Revision is one revision of a deployment.
type Revision struct {
	ID                   string               `json:"id"`
	DeploymentID         string               `json:"deployment_id"`
	CreatedAt            time.Time            `json:"created_at"`
	UpdatedAt            time.Time            `json:"updated_at"`
	Status               string               `json:"status"`
	Source               string               `json:"source"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config"`
}

// Listener is a compute target that reconciles deployments.
type Listener struct {
	ID            string                `json:"id"`
	TenantID      string                `json:"tenant_id"`
	Version       *string               `json:"version"`
	ComputeType   string                `json:"compute_type"`
	ComputeID     string                `json:"compute_id"`
	ComputeConfig ListenerComputeConfig `json:"compute_config"`
	CreatedAt     time.Time             `json:"created_at"`
	UpdatedAt     time.Time             `json:"updated_at"`
}

// ListenerComputeConfig is the compute-type specific listener configuration.
type ListenerComputeConfig struct {
	K8sNamespaces []string `json:"k8s_namespaces"`
}

// ListenerCreateRequest is the body of POST /v2/listeners.
type ListenerCreateRequest struct {
	Version       *string               `json:"version"`
	ComputeType   string                `json:"compute_type" cp:"required"`
	ComputeID     string                `json:"compute_id" cp:"required"`
	ComputeConfig ListenerComputeConfig `json:"compute_config" cp:"required"`
}

// ListenerPatchRequest is the body of PATCH /v2/listeners/{id}. compute_type
// and compute_id are accepted only with their current values.
type ListenerPatchRequest struct {
	Version       *string                `json:"version"`
	ComputeType   *string                `json:"compute_type,omitempty"`
	ComputeID     *string                `json:"compute_id,omitempty"`
	ComputeConfig *ListenerComputeConfig `json:"compute_config"`
}

// CreateRequest is the body of POST /v2/deployments.
type CreateRequest struct {
	Name                 string               `json:"name" cp:"required"`
	Source               string               `json:"source" cp:"required"`
	SourceConfig         SourceConfig         `json:"source_config" cp:"required"`
	SourceRevisionConfig SourceRevisionConfig `json:"source_revision_config" cp:"required"`
	Secrets              []Secret             `json:"secrets" cp:"required,nonnull"`
	SecretReferences     []SecretReference    `json:"secret_references"`
	// RevisionSource is sent by real clients; when given it must equal Source.
	RevisionSource *string `json:"revision_source,omitempty"`
	// TrackedPackages is sent by real clients; accepted and ignored.
	TrackedPackages any `json:"tracked_packages,omitempty"`
}

// PatchRequest is the body of PATCH /v2/deployments/{id}. A nil pointer or
// nil slice means "not sent or null": leave unchanged. A non-nil slice (even
// empty) replaces the stored list.
type PatchRequest struct {
	// Name and Source are immutable; accepted only with the current value.
	Name   *string `json:"name,omitempty"`
	Source *string `json:"source,omitempty"`
	// RevisionSource, when given, must equal the deployment's source.
	RevisionSource       *string               `json:"revision_source,omitempty"`
	SourceConfig         *SourceConfig         `json:"source_config"`
	SourceRevisionConfig *SourceRevisionConfig `json:"source_revision_config"`
	Secrets              []Secret              `json:"secrets"`
	SecretReferences     []SecretReference     `json:"secret_references"`
	// TrackedPackages is sent by real clients; accepted and ignored.
	TrackedPackages any `json:"tracked_packages,omitempty"`
}

// GithubIntegration is one entry of GET /v1/integrations/github/install.
type GithubIntegration struct {
	ID             string `json:"id"`
	InstallationID int64  `json:"installation_id"`
	Name           string `json:"name"`
}

// UploadURL is the response of POST /v2/deployments/{id}/upload-url.
type UploadURL struct {
	UploadURL  string `json:"upload_url"`
	ObjectPath string `json:"object_path"`
}

// List is the paginated list envelope: {resources, offset}.
type List[T any] struct {
	Resources []T `json:"resources"`
	Offset    int `json:"offset"`
}

// DeploymentList is a page of deployments: the hosted shape, and Slipway's
// next_cursor, which names where the next page starts (null after the
// last page). Passed back as ?cursor=, it reads the next page at the cost
// of the page, where a large offset costs the deployments it skips.
type DeploymentList struct {
	Resources  []Deployment `json:"resources"`
	Offset     int          `json:"offset"`
	NextCursor *string      `json:"next_cursor"`
}
