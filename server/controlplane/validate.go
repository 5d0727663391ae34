package controlplane

// Request decoding and validation for the control-plane API.
//
// Decoding runs in two passes, the way FastAPI/pydantic does:
//  1. shape (package validate): the body is parsed into generic JSON and
//     checked against the request type: unknown keys, wrong JSON types,
//     missing required keys, each reported with a loc that points exactly
//     at it (["body","secrets",0,"name"]).
//  2. rules (this file): only when the shape is right, the typed request
//     is checked against the spec's rules; again every violation is
//     collected.
//
// Decisions beyond the spec (see also the bounds table below):
//   - Unknown fields are rejected, except `revision_source` and
//     `tracked_packages`, which the official deploy client sends.
//   - `source_config.deployment_type` is "only for github" in the spec, but the
//     official deploy client sends it when it creates internal_source and
//     internal_docker deployments. It is therefore accepted (enum-checked,
//     immutable on PATCH) for github, internal_source and internal_docker and
//     rejected only for external_docker.
//   - `graph_config_path` is required on create for buildable sources exactly
//     as the spec says (the spec wins over the official deploy client, which
//     creates internal_source deployments with an empty
//     `source_revision_config`; requireRevisionOnCreate documents the switch).
//     `image_uri` is not required on create: the spec does not ask for it and
//     that client sends it in its first PATCH.
//   - `github` is reported (enum) but its field rules still run, so one request
//     gets every error at once.
//   - `secret_references` is rejected for other sources only when non-empty.
//   - `resource_spec`, `install_command` and `build_command` are accepted for
//     every source.
//   - Secret values equal to RedactedSecret are rejected on create and PATCH.
//   - UUIDs (integration_id, listener_id) are canonicalised to lowercase
//     hyphenated form; CPU values are rounded to one decimal and the derived
//     defaults are filled (ResourceSpec.Normalize) in the returned request.
//   - source_tarball_path is only type-checked: whether it was issued for the
//     deployment is the handler's question.

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/google/uuid"

	"slipway/runtime"
	"slipway/runtime/build"
	"slipway/server/httpx/validate"
)

// requireRevisionOnCreate: see the package comment above.
const requireRevisionOnCreate = true

// Bounds. CPU bounds are the spec's; the others are Slipway's choice.
const (
	MinCPU      = 0.1 // cpu, queue_cpu, redis_cpu, db_cpu, orchestrator_cpu, executor_cpu
	MaxCPU      = 8.0
	MinCPULimit = 0.1 // the *_cpu_limit fields
	MaxCPULimit = 16.0

	MinMemoryMB      = 6               // docker's minimum memory limit; every *_memory_mb and *_memory_limit_mb field
	MaxMemoryMB      = 1 << 20         // 1 TiB: the *_memory_mb request fields
	MaxMemoryLimitMB = 2 * MaxMemoryMB // the *_memory_limit_mb fields (so a derived 2× limit is always in range)

	MaxScale = 100 // every *_scale field is in [0, MaxScale]; max ≥ min

	MinDBStorageGi      = 1
	MaxDBStorageGi      = 65536
	MinDBMaxConnections = 1
	MaxDBMaxConnections = 100000
)

var (
	sources         = []string{SourceGitHub, SourceExternalDocker, SourceInternalDocker, SourceInternalSource}
	selfHosted      = []string{SourceInternalSource, SourceInternalDocker, SourceExternalDocker}
	deploymentTypes = []string{DeploymentTypeDevFree, DeploymentTypeDev, DeploymentTypeProd}
	pullPolicies    = []string{"Always", "Never", "IfNotPresent"}
	restartPolicies = []string{"Always", "OnFailure"}

	dnsLabelPattern = `^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`
	cIdentPattern   = `^[A-Za-z_][A-Za-z0-9_]*$`
	dnsLabelRE      = regexp.MustCompile(dnsLabelPattern)
	cIdentRE        = regexp.MustCompile(cIdentPattern)
)

// IsDNSLabel reports whether s is a lowercase RFC 1123 label of at most 63 characters.
func IsDNSLabel(s string) bool { return dnsLabelRE.MatchString(s) }

// IsCIdentifier reports whether s is a C identifier (usable as an environment variable name).
func IsCIdentifier(s string) bool { return cIdentRE.MatchString(s) }

// RoundCPU rounds a CPU value to one decimal place (half away from zero).
func RoundCPU(v float64) float64 { return runtime.RoundCPU(v) }

// DecodeCreate decodes and validates the body of POST /v2/deployments. On
// success the resource spec is normalized (rounded, defaults filled). Errors
// are *httpx.ValidationError.
func DecodeCreate(body []byte) (*CreateRequest, error) {
	var req CreateRequest
	if err := validate.Decode(body, &req); err != nil {
		return nil, err
	}
	v := &validator{}
	v.create(&req)
	if err := v.Err(); err != nil {
		return nil, err
	}
	normalizeSourceConfig(&req.SourceConfig)
	return &req, nil
}

// DecodePatch decodes and validates the body of PATCH /v2/deployments/{id}
// against the current deployment cur. On success the resource spec is
// normalized. Errors are *httpx.ValidationError.
func DecodePatch(body []byte, cur *Deployment) (*PatchRequest, error) {
	if cur == nil {
		return nil, errors.New("controlplane.DecodePatch: nil current deployment")
	}
	var req PatchRequest
	if err := validate.Decode(body, &req); err != nil {
		return nil, err
	}
	v := &validator{}
	v.patch(&req, cur)
	if err := v.Err(); err != nil {
		return nil, err
	}
	if req.SourceConfig != nil {
		normalizeSourceConfig(req.SourceConfig)
	}
	return &req, nil
}

// DecodeListenerCreate decodes and validates the body of POST /v2/listeners.
func DecodeListenerCreate(body []byte) (*ListenerCreateRequest, error) {
	var req ListenerCreateRequest
	if err := validate.Decode(body, &req); err != nil {
		return nil, err
	}
	v := &validator{}
	v.computeType(req.ComputeType, loc("body", "compute_type"))
	if strings.TrimSpace(req.ComputeID) == "" {
		v.Add("value_error", "compute_id must be a non-empty string", "body", "compute_id")
	}
	v.computeConfig(&req.ComputeConfig, loc("body", "compute_config"))
	if err := v.Err(); err != nil {
		return nil, err
	}
	return &req, nil
}

// DecodeListenerPatch decodes and validates the body of PATCH
// /v2/listeners/{id} against the current listener cur.
func DecodeListenerPatch(body []byte, cur *Listener) (*ListenerPatchRequest, error) {
	if cur == nil {
		return nil, errors.New("controlplane.DecodeListenerPatch: nil current listener")
	}
	var req ListenerPatchRequest
	if err := validate.Decode(body, &req); err != nil {
		return nil, err
	}
	v := &validator{}
	if req.ComputeType != nil && *req.ComputeType != cur.ComputeType {
		v.Add("value_error", fmt.Sprintf("compute_type cannot be changed after creation (it is %q)", cur.ComputeType), "body", "compute_type")
	}
	if req.ComputeID != nil && *req.ComputeID != cur.ComputeID {
		v.Add("value_error", fmt.Sprintf("compute_id cannot be changed after creation (it is %q)", cur.ComputeID), "body", "compute_id")
	}
	if req.ComputeConfig != nil {
		v.computeConfig(req.ComputeConfig, loc("body", "compute_config"))
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	return &req, nil
}

// CreatesRevision reports whether the PATCH creates a new revision (spec
// "States and transitions"): a non-null repo_ref, graph_config_path,
// image_uri, source_tarball_path, secrets or source_config.resource_spec.
func (p *PatchRequest) CreatesRevision() bool {
	if p == nil {
		return false
	}
	if p.Secrets != nil {
		return true
	}
	if p.SourceConfig != nil && p.SourceConfig.ResourceSpec != nil {
		return true
	}
	if s := p.SourceRevisionConfig; s != nil {
		return s.RepoRef != nil || s.GraphConfigPath != nil || s.ImageURI != nil || s.SourceTarballPath != nil
	}
	return false
}

func normalizeSourceConfig(sc *SourceConfig) {
	if sc.IntegrationID != nil {
		s := canonicalUUID(*sc.IntegrationID)
		sc.IntegrationID = &s
	}
	if sc.ListenerID != nil {
		s := canonicalUUID(*sc.ListenerID)
		sc.ListenerID = &s
	}
	sc.ResourceSpec.Normalize()
}

func canonicalUUID(s string) string {
	if u, err := uuid.Parse(s); err == nil {
		return u.String()
	}
	return s
}

// ---------------------------------------------------------------------------
// Pass 2: rules

// validator collects the violations of the spec's rules (see
// validate.Errors, which also runs pass 1).
type validator struct{ validate.Errors }

func loc(parts ...any) []any { return parts }

// at returns a copy of l with parts appended (never aliasing l).
var at = validate.At

func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, s := range vals {
		q[i] = "'" + s + "'"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

func (v *validator) enum(val string, allowed []string, l []any) bool {
	if slices.Contains(allowed, val) {
		return true
	}
	v.AddLoc("enum", "Input should be "+quoteList(allowed), l)
	return false
}

func (v *validator) dnsLabel(val string, l []any) bool {
	if IsDNSLabel(val) {
		return true
	}
	v.AddLoc("string_pattern_mismatch", "String should match pattern '"+dnsLabelPattern+
		"' (a lowercase RFC 1123 DNS label: 1 to 63 characters a-z, 0-9 or '-', starting and ending with a letter or digit)", l)
	return false
}

func (v *validator) cIdent(val string, l []any) bool {
	if IsCIdentifier(val) {
		return true
	}
	v.AddLoc("string_pattern_mismatch", "String should match pattern '"+cIdentPattern+
		"' (a C identifier: letters, digits and '_', not starting with a digit)", l)
	return false
}

func (v *validator) uuid(val string, l []any) {
	if _, err := uuid.Parse(val); err != nil {
		v.AddLoc("uuid_parsing", "Input should be a valid UUID, e.g. 0190f3b2-6c5e-7d3a-9b1c-2f4e5d6a7b8c", l)
	}
}

func (v *validator) nonEmpty(val string, l []any) {
	if strings.TrimSpace(val) == "" {
		v.AddLoc("value_error", "Value must be a non-empty string", l)
	}
}

// source checks the source enum (github is reported as not available). It
// returns the source to apply the field rules for ("" when unknown).
func (v *validator) source(src string, l []any) string {
	if src == SourceGitHub {
		v.AddLoc("enum", "Input should be "+quoteList(selfHosted)+
			": source 'github' is only available on the hosted cloud service; a self-hosted Slipway deploys "+
			"from an uploaded source archive (internal_source), an image it builds or pulls (internal_docker) "+
			"or an external image (external_docker)", l)
		return src
	}
	if v.enum(src, selfHosted, l) {
		return src
	}
	return ""
}

func (v *validator) create(r *CreateRequest) {
	if r.Name == "" {
		v.Add("value_error", "Value must be a non-empty string: a lowercase RFC 1123 DNS label", "body", "name")
	} else {
		v.dnsLabel(r.Name, loc("body", "name"))
	}
	src := v.source(r.Source, loc("body", "source"))
	if r.RevisionSource != nil && src != "" && *r.RevisionSource != r.Source {
		v.Add("value_error", fmt.Sprintf("revision_source must equal source (%q)", r.Source), "body", "revision_source")
	}
	if src != "" {
		v.sourceConfigForSource(&r.SourceConfig, src, nil)
		v.revisionConfigForSource(&r.SourceRevisionConfig, &r.SourceConfig, src, true, nil)
		if len(r.SecretReferences) > 0 && src != SourceExternalDocker {
			v.Add("value_error", onlyFor("secret_references", src, SourceExternalDocker), "body", "secret_references")
		}
	}
	v.sourceConfigCommon(&r.SourceConfig, loc("body", "source_config"))
	v.revisionConfigCommon(&r.SourceRevisionConfig)
	v.secrets(r.Secrets, loc("body", "secrets"))
	v.secretRefs(r.SecretReferences, r.Secrets, loc("body", "secret_references"))
}

func (v *validator) patch(r *PatchRequest, cur *Deployment) {
	if r.Name != nil && *r.Name != cur.Name {
		v.Add("value_error", fmt.Sprintf("name cannot be changed after creation (it is %q)", cur.Name), "body", "name")
	}
	if r.Source != nil && *r.Source != cur.Source {
		v.Add("value_error", fmt.Sprintf("source cannot be changed after creation (it is %q)", cur.Source), "body", "source")
	}
	if r.RevisionSource != nil && *r.RevisionSource != cur.Source {
		if slices.Contains(sources, *r.RevisionSource) {
			v.Add("value_error", fmt.Sprintf("revision_source must equal the deployment's source (%q)", cur.Source), "body", "revision_source")
		} else {
			v.enum(*r.RevisionSource, []string{cur.Source}, loc("body", "revision_source"))
		}
	}
	src := cur.Source
	if r.SourceConfig != nil {
		v.sourceConfigForSource(r.SourceConfig, src, &cur.SourceConfig)
		v.sourceConfigCommon(r.SourceConfig, loc("body", "source_config"))
	}
	if r.SourceRevisionConfig != nil {
		sc := r.SourceConfig
		if sc == nil {
			sc = &SourceConfig{}
		}
		v.revisionConfigForSource(r.SourceRevisionConfig, sc, src, false, cur)
		v.revisionConfigCommon(r.SourceRevisionConfig)
	} else if r.SourceConfig != nil && r.SourceConfig.BuildOnPush != nil && *r.SourceConfig.BuildOnPush {
		// Enabling build_on_push against the stored tag ref.
		if ref := cur.SourceRevisionConfig.RepoRef; ref != nil && strings.HasPrefix(*ref, "refs/tags/") {
			v.Add("value_error", buildOnPushTagMsg, "body", "source_config", "build_on_push")
		}
	}
	if len(r.SecretReferences) > 0 && src != SourceExternalDocker {
		v.Add("value_error", onlyFor("secret_references", src, SourceExternalDocker), "body", "secret_references")
	}
	if r.Secrets != nil {
		v.secrets(r.Secrets, loc("body", "secrets"))
	}
	refSecrets := r.Secrets
	if refSecrets == nil {
		refSecrets = cur.Secrets
	}
	v.secretRefs(r.SecretReferences, refSecrets, loc("body", "secret_references"))
}

const buildOnPushTagMsg = "build_on_push cannot be enabled when source_revision_config.repo_ref is a tag (starts with 'refs/tags/'): tags are immutable"

func onlyFor(field, src string, allowed ...string) string {
	return fmt.Sprintf("%s is only for source %s; it must be null for source '%s'", field, quoteList(allowed), src)
}

// sourceConfigForSource applies the per-source rules of SourceConfig; with
// cur non-nil (PATCH) also the immutability rules.
func (v *validator) sourceConfigForSource(sc *SourceConfig, src string, cur *SourceConfig) {
	l := loc("body", "source_config")
	n := v.Len()
	v.sourceConfigFields(sc, src, l)
	if cur == nil {
		return
	}
	// A field refused for the source is not reported again as changed.
	flagged := map[string]bool{}
	for _, e := range v.Since(n) {
		flagged[fmt.Sprint(e.Loc[len(e.Loc)-1])] = true
	}
	v.sourceConfigImmutable(sc, cur, flagged, l)
}

// sourceConfigFields refuses the fields the source does not have.
func (v *validator) sourceConfigFields(sc *SourceConfig, src string, l []any) {
	github := src == SourceGitHub
	if sc.IntegrationID != nil && !github {
		v.AddLoc("value_error", onlyFor("integration_id", src, SourceGitHub), at(l, "integration_id"))
	}
	if sc.RepoURL != nil && !github {
		v.AddLoc("value_error", onlyFor("repo_url", src, SourceGitHub), at(l, "repo_url"))
	}
	if sc.DeploymentType != nil && src == SourceExternalDocker {
		v.AddLoc("value_error", onlyFor("deployment_type", src, SourceGitHub, SourceInternalSource, SourceInternalDocker), at(l, "deployment_type"))
	}
	if sc.BuildOnPush != nil && !github {
		v.AddLoc("value_error", onlyFor("build_on_push", src, SourceGitHub), at(l, "build_on_push"))
	}
	if sc.CustomURL != nil && src != SourceExternalDocker {
		msg := onlyFor("custom_url", src, SourceExternalDocker)
		if github {
			msg = "custom_url is read-only for source 'github' (it is set automatically); it is settable only for source 'external_docker'"
		}
		v.AddLoc("value_error", msg, at(l, "custom_url"))
	}
	if sc.ListenerID != nil && src != SourceExternalDocker {
		v.AddLoc("value_error", onlyFor("listener_id", src, SourceExternalDocker), at(l, "listener_id"))
	}
	if sc.ListenerConfig != nil && src != SourceExternalDocker {
		v.AddLoc("value_error", onlyFor("listener_config", src, SourceExternalDocker), at(l, "listener_config"))
	}
}

// sourceConfigImmutable refuses a PATCH that changes a field fixed at
// creation (those already flagged excepted).
func (v *validator) sourceConfigImmutable(sc, cur *SourceConfig, flagged map[string]bool, l []any) {
	changed := func(got, want *string, eq func(a, b string) bool) (was string, ok bool) {
		if got == nil || want != nil && eq(*got, *want) {
			return "", false
		}
		if want == nil {
			return "null", true
		}
		return fmt.Sprintf("%q", *want), true
	}
	same := func(a, b string) bool { return a == b }
	sameUUID := func(a, b string) bool { return canonicalUUID(a) == canonicalUUID(b) }
	for _, f := range []struct {
		name      string
		got, want *string
		eq        func(a, b string) bool
	}{{"integration_id", sc.IntegrationID, cur.IntegrationID, sameUUID}, {"repo_url", sc.RepoURL, cur.RepoURL, same},
		{"deployment_type", sc.DeploymentType, cur.DeploymentType, same}, {"listener_id", sc.ListenerID, cur.ListenerID, sameUUID}} {
		if was, ok := changed(f.got, f.want, f.eq); ok && !flagged[f.name] {
			v.AddLoc("value_error", fmt.Sprintf("%s cannot be changed after creation (it is %s)", f.name, was), at(l, f.name))
		}
	}
	if sc.ListenerConfig == nil || flagged["listener_config"] {
		return
	}
	var want *string
	if cur.ListenerConfig != nil {
		want = cur.ListenerConfig.K8sNamespace
	}
	if was, ok := changed(sc.ListenerConfig.K8sNamespace, want, same); ok {
		v.AddLoc("value_error", fmt.Sprintf("listener_config cannot be changed after creation (k8s_namespace is %s)", was),
			at(l, "listener_config", "k8s_namespace"))
	}
}

// sourceConfigCommon applies the source-independent rules of SourceConfig.
func (v *validator) sourceConfigCommon(sc *SourceConfig, l []any) {
	if sc.CustomURL != nil && CustomHost(*sc.CustomURL) == "" {
		v.AddLoc("value_error", "custom_url must be a URL with a host name, such as https://agent.example.com", at(l, "custom_url"))
	}
	if sc.IntegrationID != nil {
		v.uuid(*sc.IntegrationID, at(l, "integration_id"))
	}
	if sc.ListenerID != nil {
		v.uuid(*sc.ListenerID, at(l, "listener_id"))
	}
	if sc.DeploymentType != nil {
		v.enum(*sc.DeploymentType, deploymentTypes, at(l, "deployment_type"))
	}
	if sc.ListenerConfig != nil && sc.ListenerConfig.K8sNamespace != nil {
		v.dnsLabel(*sc.ListenerConfig.K8sNamespace, at(l, "listener_config", "k8s_namespace"))
	}
	if sc.ResourceSpec != nil {
		v.resourceSpec(sc.ResourceSpec, at(l, "resource_spec"))
	}
}

// revisionConfigForSource applies the per-source rules of
// SourceRevisionConfig. sc is the source config of the same request (for
// build_on_push); cur is the current deployment on PATCH.
func (v *validator) revisionConfigForSource(rc *SourceRevisionConfig, sc *SourceConfig, src string, create bool, cur *Deployment) {
	l := loc("body", "source_revision_config")
	github := src == SourceGitHub
	buildable := github || src == SourceInternalSource
	docker := src == SourceExternalDocker || src == SourceInternalDocker
	if rc.RepoRef != nil && !github {
		v.AddLoc("value_error", onlyFor("repo_ref", src, SourceGitHub), at(l, "repo_ref"))
	}
	cfgKey := rc.configPathKey
	if cfgKey == "" {
		cfgKey = "graph_config_path"
	}
	switch {
	case rc.GraphConfigPath != nil && !buildable:
		v.AddLoc("value_error", fmt.Sprintf("%s must be null for source '%s'; it is only for the buildable sources 'github' and 'internal_source'", cfgKey, src), at(l, cfgKey))
	case rc.GraphConfigPath == nil && buildable && create && requireRevisionOnCreate:
		v.AddLoc("missing", fmt.Sprintf("Field required: graph_config_path (or langgraph_config_path), the path of the graph configuration file, is required for source '%s'", src), at(l, "graph_config_path"))
	}
	if rc.ImageURI != nil && !docker {
		v.AddLoc("value_error", onlyFor("image_uri", src, SourceExternalDocker, SourceInternalDocker), at(l, "image_uri"))
	}
	// image_uri is not required on create: the spec does not require it, and
	// the official deploy client creates a docker deployment with an empty
	// source_revision_config and sends image_uri in its first PATCH.
	if rc.SourceTarballPath != nil && src != SourceInternalSource {
		v.AddLoc("value_error", onlyFor("source_tarball_path", src, SourceInternalSource), at(l, "source_tarball_path"))
	}
	// build_on_push cannot be true with a tag ref; either may come from the
	// stored deployment on PATCH.
	if github {
		ref := rc.RepoRef
		bop := sc.BuildOnPush
		if cur != nil {
			if ref == nil {
				ref = cur.SourceRevisionConfig.RepoRef
			}
			if bop == nil {
				bop = cur.SourceConfig.BuildOnPush
			}
		}
		if bop != nil && *bop && ref != nil && strings.HasPrefix(*ref, "refs/tags/") {
			if sc.BuildOnPush != nil {
				v.Add("value_error", buildOnPushTagMsg, "body", "source_config", "build_on_push")
			} else {
				v.AddLoc("value_error", "repo_ref cannot be a tag (starts with 'refs/tags/') while source_config.build_on_push is true", at(l, "repo_ref"))
			}
		}
	}
}

// revisionConfigCommon applies the source-independent rules.
func (v *validator) revisionConfigCommon(rc *SourceRevisionConfig) {
	l := loc("body", "source_revision_config")
	if rc.RepoCommitSHA != nil {
		v.AddLoc("value_error", "repo_commit_sha is read-only (set by the service for source 'github'); it must be null", at(l, "repo_commit_sha"))
	}
	if rc.ImageURI != nil {
		v.nonEmpty(*rc.ImageURI, at(l, "image_uri"))
	}
	if rc.GraphConfigPath != nil {
		k := rc.configPathKey
		if k == "" {
			k = "graph_config_path"
		}
		v.nonEmpty(*rc.GraphConfigPath, at(l, k))
		// The same rule the drivers apply before they read the file.
		if _, err := build.GraphConfigPath(*rc.GraphConfigPath); strings.TrimSpace(*rc.GraphConfigPath) != "" && err != nil {
			v.AddLoc("value_error", err.Error(), at(l, k))
		}
	}
}

func (v *validator) secrets(secrets []Secret, l []any) {
	seen := map[string]bool{}
	for i, s := range secrets {
		if v.cIdent(s.Name, at(l, i, "name")) {
			if seen[s.Name] {
				v.AddLoc("value_error", fmt.Sprintf("duplicate secret name %q: secret names must be unique", s.Name), at(l, i, "name"))
			}
			seen[s.Name] = true
		}
		if s.Value == RedactedSecret {
			v.AddLoc("value_error", "the value is the redaction marker returned by the API; send the real value (or leave secrets null to keep the stored ones)", at(l, i, "value"))
		}
	}
}

func (v *validator) secretRefs(refs []SecretReference, secrets []Secret, l []any) {
	seen := map[string]bool{}
	for _, s := range secrets {
		seen[s.Name] = true
	}
	for i, r := range refs {
		if v.cIdent(r.Name, at(l, i, "name")) {
			if seen[r.Name] {
				v.AddLoc("value_error", fmt.Sprintf("duplicate environment variable %q: already set by a secret or secret reference", r.Name), at(l, i, "name"))
			}
			seen[r.Name] = true
		}
		v.nonEmpty(r.SecretName, at(l, i, "secret_name"))
		v.nonEmpty(r.SecretKey, at(l, i, "secret_key"))
	}
}

func (v *validator) computeType(ct string, l []any) {
	v.enum(ct, []string{ComputeTypeK8s}, l)
}

func (v *validator) computeConfig(cc *ListenerComputeConfig, l []any) {
	seen := map[string]bool{}
	for i, ns := range cc.K8sNamespaces {
		if v.dnsLabel(ns, at(l, "k8s_namespaces", i)) {
			if seen[ns] {
				v.AddLoc("value_error", fmt.Sprintf("duplicate namespace %q", ns), at(l, "k8s_namespaces", i))
			}
			seen[ns] = true
		}
	}
}

// ---------------------------------------------------------------------------
// ResourceSpec

func (v *validator) floatRange(p *float64, lo, hi float64, l []any) bool {
	if p == nil {
		return true
	}
	x := RoundCPU(*p)
	if x < lo {
		v.AddLoc("greater_than_equal", fmt.Sprintf("Input should be greater than or equal to %g (cores, rounded to 1 decimal)", lo), l)
		return false
	}
	if x > hi {
		v.AddLoc("less_than_equal", fmt.Sprintf("Input should be less than or equal to %g (cores, rounded to 1 decimal)", hi), l)
		return false
	}
	return true
}

func (v *validator) intRange(p *int, lo, hi int, unit string, l []any) bool {
	if p == nil {
		return true
	}
	if *p < lo {
		v.AddLoc("greater_than_equal", fmt.Sprintf("Input should be greater than or equal to %d%s", lo, unit), l)
		return false
	}
	if *p > hi {
		v.AddLoc("less_than_equal", fmt.Sprintf("Input should be less than or equal to %d%s", hi, unit), l)
		return false
	}
	return true
}

// resourceSpec checks each value against its bounds, then (when they all
// hold) the limits against their requests, then the pod's metadata and
// containers.
func (v *validator) resourceSpec(r *ResourceSpec, l []any) {
	if v.resourceBounds(r, l) {
		v.resourceLimits(r, l)
	}
	v.resourceMetadata(r, l)
	v.podSpec(r, l)
}

// resourceBounds checks every value against its range and reports whether
// all are in range.
func (v *validator) resourceBounds(r *ResourceSpec, l []any) bool {
	ok := true
	cpu := func(p *float64, key string) { ok = v.floatRange(p, MinCPU, MaxCPU, at(l, key)) && ok }
	cpuLimit := func(p *float64, key string) { ok = v.floatRange(p, MinCPULimit, MaxCPULimit, at(l, key)) && ok }
	mem := func(p *int, key string) { ok = v.intRange(p, MinMemoryMB, MaxMemoryMB, " MB", at(l, key)) && ok }
	memLimit := func(p *int, key string) { ok = v.intRange(p, MinMemoryMB, MaxMemoryLimitMB, " MB", at(l, key)) && ok }
	scale := func(p *int, key string) { ok = v.intRange(p, 0, MaxScale, "", at(l, key)) && ok }

	scale(r.MinScale, "min_scale")
	scale(r.MaxScale, "max_scale")
	cpu(r.CPU, "cpu")
	cpuLimit(r.CPULimit, "cpu_limit")
	mem(r.MemoryMB, "memory_mb")
	memLimit(r.MemoryLimitMB, "memory_limit_mb")
	scale(r.QueueMinScale, "queue_min_scale")
	scale(r.QueueMaxScale, "queue_max_scale")
	cpu(r.QueueCPU, "queue_cpu")
	cpuLimit(r.QueueCPULimit, "queue_cpu_limit")
	mem(r.QueueMemoryMB, "queue_memory_mb")
	memLimit(r.QueueMemoryLimitMB, "queue_memory_limit_mb")
	cpu(r.OrchestratorCPU, "orchestrator_cpu")
	cpuLimit(r.OrchestratorCPULimit, "orchestrator_cpu_limit")
	mem(r.OrchestratorMemoryMB, "orchestrator_memory_mb")
	memLimit(r.OrchestratorMemoryLimitMB, "orchestrator_memory_limit_mb")
	scale(r.OrchestratorMinScale, "orchestrator_min_scale")
	scale(r.OrchestratorMaxScale, "orchestrator_max_scale")
	cpu(r.ExecutorCPU, "executor_cpu")
	cpuLimit(r.ExecutorCPULimit, "executor_cpu_limit")
	mem(r.ExecutorMemoryMB, "executor_memory_mb")
	memLimit(r.ExecutorMemoryLimitMB, "executor_memory_limit_mb")
	cpu(r.RedisCPU, "redis_cpu")
	cpuLimit(r.RedisCPULimit, "redis_cpu_limit")
	mem(r.RedisMemoryMB, "redis_memory_mb")
	memLimit(r.RedisMemoryLimitMB, "redis_memory_limit_mb")
	cpu(r.DBCPU, "db_cpu")
	cpuLimit(r.DBCPULimit, "db_cpu_limit")
	mem(r.DBMemoryMB, "db_memory_mb")
	memLimit(r.DBMemoryLimitMB, "db_memory_limit_mb")
	ok = v.intRange(r.DBStorageGi, MinDBStorageGi, MaxDBStorageGi, " GiB", at(l, "db_storage_gi")) && ok
	ok = v.intRange(r.DBMaxConnections, MinDBMaxConnections, MaxDBMaxConnections, "", at(l, "db_max_connections")) && ok
	return ok
}

// resourceLimits checks each limit (and max scale) against its request
// (and min scale) on the normalized values, so a derived limit counts too.
func (v *validator) resourceLimits(r *ResourceSpec, l []any) {
	n := *r
	n.Normalize()
	atLeast(v, l, n.MaxScale, n.MinScale, r.MaxScale, r.MinScale, "max_scale", "min_scale")
	atLeast(v, l, n.CPULimit, n.CPU, r.CPULimit, r.CPU, "cpu_limit", "cpu")
	atLeast(v, l, n.MemoryLimitMB, n.MemoryMB, r.MemoryLimitMB, r.MemoryMB, "memory_limit_mb", "memory_mb")
	atLeast(v, l, n.QueueMaxScale, n.QueueMinScale, r.QueueMaxScale, r.QueueMinScale, "queue_max_scale", "queue_min_scale")
	atLeast(v, l, n.QueueCPULimit, n.QueueCPU, r.QueueCPULimit, r.QueueCPU, "queue_cpu_limit", "queue_cpu")
	atLeast(v, l, n.QueueMemoryLimitMB, n.QueueMemoryMB, r.QueueMemoryLimitMB, r.QueueMemoryMB, "queue_memory_limit_mb", "queue_memory_mb")
	atLeast(v, l, n.OrchestratorMaxScale, n.OrchestratorMinScale, r.OrchestratorMaxScale, r.OrchestratorMinScale, "orchestrator_max_scale", "orchestrator_min_scale")
	atLeast(v, l, n.OrchestratorCPULimit, n.OrchestratorCPU, r.OrchestratorCPULimit, r.OrchestratorCPU, "orchestrator_cpu_limit", "orchestrator_cpu")
	atLeast(v, l, n.OrchestratorMemoryLimitMB, n.OrchestratorMemoryMB, r.OrchestratorMemoryLimitMB, r.OrchestratorMemoryMB, "orchestrator_memory_limit_mb", "orchestrator_memory_mb")
	atLeast(v, l, n.ExecutorCPULimit, n.ExecutorCPU, r.ExecutorCPULimit, r.ExecutorCPU, "executor_cpu_limit", "executor_cpu")
	atLeast(v, l, n.ExecutorMemoryLimitMB, n.ExecutorMemoryMB, r.ExecutorMemoryLimitMB, r.ExecutorMemoryMB, "executor_memory_limit_mb", "executor_memory_mb")
	atLeast(v, l, n.RedisCPULimit, n.RedisCPU, r.RedisCPULimit, r.RedisCPU, "redis_cpu_limit", "redis_cpu")
	atLeast(v, l, n.RedisMemoryLimitMB, n.RedisMemoryMB, r.RedisMemoryLimitMB, r.RedisMemoryMB, "redis_memory_limit_mb", "redis_memory_mb")
	atLeast(v, l, n.DBCPULimit, n.DBCPU, r.DBCPULimit, r.DBCPU, "db_cpu_limit", "db_cpu")
	atLeast(v, l, n.DBMemoryLimitMB, n.DBMemoryMB, r.DBMemoryLimitMB, r.DBMemoryMB, "db_memory_limit_mb", "db_memory_mb")
}

// atLeast reports a normalized limit below its request. The violation is
// reported at the field the client gave: the limit when given, else the
// request; with both derived the cause is reported by another check.
func atLeast[T int | float64](v *validator, l []any, limit, req, limitIn, reqIn *T, limitKey, reqKey string) {
	if limit == nil || req == nil || *limit >= *req {
		return
	}
	k := limitKey
	switch {
	case limitIn != nil:
	case reqIn != nil:
		k = reqKey
	default:
		return
	}
	v.AddLoc("value_error", fmt.Sprintf("%s (%v) must be greater than or equal to %s (%v)", limitKey, *limit, reqKey, *req), at(l, k))
}

// resourceMetadata checks the labels, annotations, service account and
// image pull secrets.
func (v *validator) resourceMetadata(r *ResourceSpec, l []any) {
	for _, k := range sortedStringKeys(r.Labels) {
		if k == "" {
			v.AddLoc("value_error", "label keys must be non-empty", at(l, "labels"))
		}
	}
	for _, k := range sortedStringKeys(r.Annotations) {
		if k == "" {
			v.AddLoc("value_error", "annotation keys must be non-empty", at(l, "annotations"))
		}
		if val := r.Annotations[k]; k == AnnotationForwardAuthorization && val != "true" && val != "false" {
			v.AddLoc("value_error", fmt.Sprintf("annotation %s must be \"true\" or \"false\"", k), at(l, "annotations", k))
		}
	}
	if r.ServiceAccountName != nil {
		v.nonEmpty(*r.ServiceAccountName, at(l, "service_account_name"))
	}
	for i, s := range r.ImagePullSecrets {
		v.nonEmpty(s.Name, at(l, "image_pull_secrets", i, "name"))
	}
}

// podSpec checks the volumes, their mounts and the extra containers, whose
// names are unique in the pod.
func (v *validator) podSpec(r *ResourceSpec, l []any) {
	volumes := map[string]bool{}
	for i, vol := range r.Volumes {
		vl := at(l, "volumes", i, "name")
		if v.dnsLabel(vol.Name, vl) {
			if volumes[vol.Name] {
				v.AddLoc("value_error", fmt.Sprintf("duplicate volume name %q: volume names must be unique in the pod", vol.Name), vl)
			}
			volumes[vol.Name] = true
		}
	}
	v.volumeMounts(r.VolumeMounts, volumes, at(l, "volume_mounts"))

	containers := map[string]bool{}
	v.containers(r.InitContainers, volumes, containers, at(l, "init_containers"))
	v.containers(r.Sidecars, volumes, containers, at(l, "sidecars"))
}

func sortedStringKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

func (v *validator) volumeMounts(mounts []VolumeMount, volumes map[string]bool, l []any) {
	for i, m := range mounts {
		if !volumes[m.Name] {
			v.AddLoc("value_error", fmt.Sprintf("volume mount name %q must match the name of a volume in resource_spec.volumes", m.Name), at(l, i, "name"))
		}
		if !strings.HasPrefix(m.MountPath, "/") {
			v.AddLoc("value_error", "mountPath must be an absolute path (starting with '/')", at(l, i, "mountPath"))
		}
	}
}

func (v *validator) containers(cs []Container, volumes, names map[string]bool, l []any) {
	for i, c := range cs {
		cl := at(l, i)
		if v.dnsLabel(c.Name, at(cl, "name")) {
			if names[c.Name] {
				v.AddLoc("value_error", fmt.Sprintf("duplicate container name %q: container names must be unique in the pod", c.Name), at(cl, "name"))
			}
			names[c.Name] = true
		}
		v.nonEmpty(c.Image, at(cl, "image"))
		if c.ImagePullPolicy != nil {
			v.enum(*c.ImagePullPolicy, pullPolicies, at(cl, "imagePullPolicy"))
		}
		if c.RestartPolicy != nil {
			v.enum(*c.RestartPolicy, restartPolicies, at(cl, "restartPolicy"))
		}
		for j, e := range c.Env {
			el := at(cl, "env", j)
			v.cIdent(e.Name, at(el, "name"))
			if e.ValueFrom != nil && e.Value != nil && *e.Value != "" {
				v.AddLoc("value_error", "valueFrom cannot be used when value is non-empty: give either a value or a valueFrom", at(el, "valueFrom"))
			}
		}
		v.volumeMounts(c.VolumeMounts, volumes, at(cl, "volumeMounts"))
	}
}
