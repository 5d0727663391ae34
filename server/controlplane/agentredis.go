package controlplane

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"
)

// With SLIPWAY_REDIS_URL set, every scaled deployment (more than one
// agent process, runtime.Scale) gets, on that Redis server, an ACL user
// of its own that reaches only the keys and channels under the
// deployment's prefix (slipway:<deployment id>:), with only the commands
// an agent needs. The user is created (or reset, idempotently) at every
// deploy and restore of a scaled revision, and deleted with every key
// under the prefix when the deployment is deleted, after its agents
// stopped. Its password is random, sealed under the master key in the
// deployment's record, as the PostgreSQL role's is (agentdb.go).

// agentRedis is what the deployment record keeps of its Redis user.
type agentRedis struct {
	User     string `json:"user"`
	Prefix   string `json:"prefix"`
	Password string `json:"password"` // sealed (agentRedisSealContext)
}

// agentRedisSealContext binds the sealed password to the deployment and
// apart from its secrets and its database password.
func agentRedisSealContext(depID string) string { return depID + "#agent-redis" }

// agentRedisNames are the ACL user and the key prefix of a deployment.
func agentRedisNames(depID string) (user, prefix string, err error) {
	id, err := uuid.Parse(depID)
	if err != nil {
		return "", "", fmt.Errorf("deployment id is not a UUID: %w", err)
	}
	return "slipway-dep-" + id.String(), "slipway:" + id.String() + ":", nil
}

// agentRedisRules are the ACL rules of a deployment's user after its
// password: its keys and channels only, and of the commands only strings
// and counters with expiry, hashes, lists, sets, sorted sets, streams,
// pub/sub, transactions and connection handling. Out are everything
// @dangerous and @admin (FLUSHALL, CONFIG, DEBUG, ...) and what would
// show or touch other deployments' data despite the key patterns: SCAN,
// KEYS and RANDOMKEY list key names whatever the patterns, PUBSUB lists
// channels, FUNCTION and SCRIPT manage server-wide state. EVAL and
// EVALSHA are in: the agent's run bus appends a run's events in a short
// script fenced by the run's attempt (runtime/agent/runbus_redis.go), and
// Redis checks what a script calls against the calling user's rules, its
// key patterns included, so a script reaches no more than the user does.
// Lists carry the run bus's wake-ups (LPUSH in a MULTI, BRPOP: @list,
// whose blocking commands are not @dangerous).
func agentRedisRules(prefix string) []any {
	return []any{
		"resetkeys", "~" + prefix + "*", "resetchannels", "&" + prefix + "*",
		"-@all", "+@connection", "+@string", "+@hash", "+@list", "+@set", "+@sortedset", "+@stream",
		"+@pubsub", "+@transaction", "+@keyspace",
		"-@dangerous", "-@admin", "-@scripting", "+eval", "+evalsha",
		"-scan", "-keys", "-randomkey", "-pubsub", "-swapdb", "-move", "-copy", "-migrate",
		"-client", "+client|setname", "+client|getname", "+client|id",
	}
}

// agentRedisURL is the agent's Redis URL: the admin URL's scheme
// (rediss: TLS), host, port, database and parameters, with the
// deployment's user and password in place of the admin's.
func agentRedisURL(admin, user, password string) (string, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", errors.New("SLIPWAY_REDIS_URL is not a URL")
	}
	q := u.Query()
	for _, k := range []string{"username", "password", "client_name"} {
		q.Del(k)
	}
	out := url.URL{Scheme: u.Scheme, User: url.UserPassword(user, password), Host: u.Host, Path: u.Path, RawQuery: q.Encode()}
	return out.String(), nil
}

// redisAdmin opens a client on SLIPWAY_REDIS_URL.
func (rc *Reconciler) redisAdmin() (*redis.Client, error) {
	opt, err := redis.ParseURL(rc.RedisURL)
	if err != nil {
		return nil, errors.New("agent redis: SLIPWAY_REDIS_URL cannot be parsed")
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = adminConnectTimeout, adminConnectTimeout, adminConnectTimeout
	opt.PoolSize, opt.MaxRetries = 1, 1
	return redis.NewClient(opt), nil
}

// errAgentRedis reports a failed step with Redis's own message (which
// never quotes a password: ACL SETUSER's errors name the rule's position),
// or that the server does not answer.
func errAgentRedis(step string, err error) error {
	var netErr net.Error
	if errors.As(err, &netErr) {
		return fmt.Errorf("agent redis: %s: the Redis server of SLIPWAY_REDIS_URL does not answer", step)
	}
	msg := err.Error()
	if strings.Contains(msg, ">") { // a rule with the password, should a server echo one
		msg = "refused"
	}
	return fmt.Errorf("agent redis: %s: %s", step, msg)
}

// withAgentRedis provisions the deployment's Redis user (when the spec is
// scaled and SLIPWAY_REDIS_URL is set) and tells the agents its URL and
// prefix in AgentEnv.
func (rc *Reconciler) withAgentRedis(ctx context.Context, depID string, agentEnv map[string]string, env map[string]string, log func(string)) error {
	if rc.RedisURL == "" {
		return nil
	}
	user, prefix, err := agentRedisNames(depID)
	if err != nil {
		return err
	}
	password, err := rc.agentRedisPassword(depID, user, prefix)
	if err != nil {
		return err
	}
	if err := rc.ensureAgentRedis(ctx, user, prefix, password); err != nil {
		return err
	}
	u, err := agentRedisURL(rc.RedisURL, user, password)
	if err != nil {
		return err
	}
	for _, key := range []string{"SLIPWAY_AGENT_REDIS_URL", "SLIPWAY_AGENT_REDIS_PREFIX"} {
		if _, ok := env[key]; ok {
			log("the secret " + key + " is replaced by the deployment's provisioned Redis user")
			delete(env, key)
		}
	}
	agentEnv["SLIPWAY_AGENT_REDIS_URL"] = u
	agentEnv["SLIPWAY_AGENT_REDIS_PREFIX"] = prefix
	log("agent coordination in Redis under the prefix " + prefix + " (user " + user + ")")
	return nil
}

// agentRedisPassword opens the stored password or generates, seals and
// stores one on first use, before the user exists (as agentDBPassword).
func (rc *Reconciler) agentRedisPassword(depID, user, prefix string) (string, error) {
	var password string
	err := rc.update(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(depID))
		if err != nil {
			return err
		}
		if d.AgentRedis != nil {
			password, err = rc.Sealer.Open(d.AgentRedis.Password, agentRedisSealContext(depID))
			if err != nil {
				return fmt.Errorf("agent redis: open the stored password: %w", err)
			}
			return nil
		}
		password = rand.Text() + rand.Text()
		d.AgentRedis = &agentRedis{User: user, Prefix: prefix, Password: rc.Sealer.Seal(password, agentRedisSealContext(depID))}
		return putDeployment(tx, d)
	})
	return password, err
}

// ensureAgentRedis creates or resets the user: "reset" first, so that a
// user left from an earlier attempt (or changed by hand) ends with exactly
// these rules and this one password. The user is then saved to the
// server's ACL file when it has one; without one (Debian's default) ACL
// users live in memory until Redis restarts, and the next deploy or
// restore of the deployment creates its user again.
func (rc *Reconciler) ensureAgentRedis(ctx context.Context, user, prefix, password string) error {
	ctx, cancel := context.WithTimeout(ctx, adminWorkTimeout)
	defer cancel()
	c, err := rc.redisAdmin()
	if err != nil {
		return err
	}
	defer c.Close()
	args := append([]any{"acl", "setuser", user, "reset", "on", ">" + password}, agentRedisRules(prefix)...)
	if err := c.Do(ctx, args...).Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return errAgentRedis("acl setuser "+user, err)
	}
	if err := c.Do(ctx, "acl", "save").Err(); err != nil && !strings.Contains(err.Error(), "ACL file") {
		return errAgentRedis("acl save", err)
	}
	return nil
}

// dropAgentRedis deletes the user (which also closes its connections, so
// no agent writes a key after the sweep) and then every key under the
// prefix, in SCAN batches with UNLINK (freed in the background).
func (rc *Reconciler) dropAgentRedis(ctx context.Context, user, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, adminWorkTimeout)
	defer cancel()
	c, err := rc.redisAdmin()
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Do(ctx, "acl", "deluser", user).Err(); err != nil {
		return errAgentRedis("acl deluser "+user, err)
	}
	if err := c.Do(ctx, "acl", "save").Err(); err != nil && !strings.Contains(err.Error(), "ACL file") {
		return errAgentRedis("acl save", err)
	}
	// The prefix's glob characters are escaped: a deployment id has none,
	// but the pattern must match the prefix literally whatever it is.
	pattern := globEscape(prefix) + "*"
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return errAgentRedis("scan the keys of "+prefix, err)
		}
		if len(keys) > 0 {
			if err := c.Unlink(ctx, keys...).Err(); err != nil {
				return errAgentRedis("unlink the keys of "+prefix, err)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// globEscape escapes Redis glob-style pattern characters.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\^`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// removeAgentRedis deletes a deleted deployment's Redis user and keys, if
// it has them; an error leaves the deletion to be retried. Without
// SLIPWAY_REDIS_URL (unset since) the deletion goes on and says what is
// left behind.
func (rc *Reconciler) removeAgentRedis(ctx context.Context, depID string) error {
	var r *agentRedis
	err := rc.DB.View(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(depID))
		if err == nil {
			r = d.AgentRedis
		}
		return nil
	})
	if err != nil || r == nil {
		return err
	}
	if rc.RedisURL == "" {
		rc.Log.Warn().Str("deployment_id", depID).Str("redis_user", r.User).
			Msg("SLIPWAY_REDIS_URL is no longer set: the deployment's Redis user and keys are left on their server")
		return nil
	}
	return rc.dropAgentRedis(ctx, r.User, r.Prefix)
}
