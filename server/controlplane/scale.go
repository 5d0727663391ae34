package controlplane

import (
	"context"
	"errors"
	"fmt"

	"slipway/runtime"
	"slipway/server/httpx"
)

// A resource_spec that scales a deployment (runtime.ScaleOf: min_scale
// above 1, or queue workers) runs several agent processes, which share
// their state: threads, runs and the queue in the deployment's PostgreSQL
// database, stream events, cancellations and wake-ups in Redis. Both must
// be configured (SLIPWAY_POSTGRES_URL, SLIPWAY_REDIS_URL) and the runtime
// must run replicas (runtime.Scaler); otherwise the spec is refused when
// it is submitted, with what to configure, and (should the settings have
// changed since) its revision fails to deploy with the same words.

// scaleUnavailable says why a scaled spec cannot run here; "" when it can.
func scaleUnavailable(postgresURL, redisURL string, driver runtime.Driver) string {
	var missing string
	switch {
	case postgresURL == "" && redisURL == "":
		missing = "SLIPWAY_POSTGRES_URL and SLIPWAY_REDIS_URL are not set"
	case postgresURL == "":
		missing = "SLIPWAY_POSTGRES_URL is not set"
	case redisURL == "":
		missing = "SLIPWAY_REDIS_URL is not set"
	}
	if missing != "" {
		return "several agent processes share their state through PostgreSQL and Redis, which Slipway provisions per deployment: configure Slipway with SLIPWAY_POSTGRES_URL and SLIPWAY_REDIS_URL (" + missing + ")"
	}
	if s, ok := driver.(runtime.Scaler); !ok || !s.Scales() {
		return "the " + driver.Name() + " runtime runs one agent process per deployment; replicas run on the process, docker and swarm runtimes (SLIPWAY_RUNTIME=process, docker or swarm)"
	}
	return ""
}

// refuseScale is the 422 for a scaled resource_spec that cannot run
// here, at the field that scales it.
func (s *Service) refuseScale(rs *runtime.ResourceSpec) error {
	sc := runtime.ScaleOf(rs)
	if !sc.Scaled() {
		return nil
	}
	why := scaleUnavailable(s.PostgresURL, s.RedisURL, s.Driver)
	if why == "" {
		return nil
	}
	field, n := "queue_min_scale", sc.Queue
	if sc.API > 1 {
		field, n = "min_scale", sc.API
	}
	return httpx.Invalid("value_error", fmt.Sprintf("%s %d needs more than one agent process: %s", field, n, why),
		"body", "source_config", "resource_spec", field)
}

// withAgentState settles what the revision's agents are told about their
// state: the replica plan, the PostgreSQL database (every deployment,
// when SLIPWAY_POSTGRES_URL is set) and, for a scaled revision, the Redis
// user and prefix.
func (rc *Reconciler) withAgentState(ctx context.Context, spec *runtime.Spec, log func(string)) error {
	spec.Scale = runtime.ScaleOf(spec.ResourceSpec)
	scaled := spec.Scale.Scaled()
	if scaled {
		if why := scaleUnavailable(rc.PostgresURL, rc.RedisURL, rc.Driver); why != "" {
			return errors.New("the resource_spec scales the deployment, but " + why)
		}
	}
	if err := rc.withAgentDB(ctx, spec, log); err != nil || !scaled {
		return err
	}
	if spec.AgentEnv == nil {
		spec.AgentEnv = map[string]string{}
	}
	if err := rc.withAgentRedis(ctx, spec.DeploymentID, spec.AgentEnv, spec.Env, log); err != nil {
		return err
	}
	apiRole := "all"
	if spec.Scale.Queue > 0 {
		apiRole = "api"
	}
	msg := fmt.Sprintf("%d API replicas (role %s) and %d queue workers (role queue); they start at min_scale and queue_min_scale (max_scale and queue_max_scale are acted on by the swarm runtime's autoscaler only)",
		spec.Scale.API, apiRole, spec.Scale.Queue)
	if p := spec.Scale.PoolShare(); p > 0 {
		msg += fmt.Sprintf("; each gets %d of the db_max_connections %d", p, spec.Scale.DBMaxConnections)
	}
	log(msg)
	return nil
}
