package controlplane

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	bolt "go.etcd.io/bbolt"

	"slipway/runtime"
)

// With SLIPWAY_POSTGRES_URL set, every deployment's agent keeps its state
// in a database of its own on that server, reached through a login role
// of its own that owns only that database. Both are created when the
// deployment's first revision deploys (and ensured again, idempotently,
// at every deploy and restore), and dropped when the deployment is
// deleted, after its agent stopped. The role's password is random, stored
// sealed under the master key in the deployment's record, as its secrets
// are; it is never logged, never quoted in an error, never in the API.

// agentDatabase is what the deployment record keeps of its database.
type agentDatabase struct {
	Name     string `json:"name"`     // the database and its role (agentDBName)
	Password string `json:"password"` // sealed (agentDBSealContext)
}

// agentDBSealContext is the associated data the role's password is sealed
// under: bound to the deployment, and apart from its secrets' names
// ("<deployment>/<NAME>"), so neither opens in the other's place.
func agentDBSealContext(depID string) string { return depID + "#agent-database" }

// agentDBName derives the database's and the role's name from the
// deployment id: lower-case letters, digits and underscores, 44
// characters, within PostgreSQL's 63, and the same after a restart.
func agentDBName(depID string) (string, error) {
	id, err := uuid.Parse(depID)
	if err != nil {
		return "", fmt.Errorf("deployment id is not a UUID: %w", err)
	}
	return "slipway_dep_" + strings.ReplaceAll(id.String(), "-", ""), nil
}

// agentDBURL is the agent's connection URL: the admin URL's host, port
// and connection parameters (sslmode, sslrootcert, ...), with the
// deployment's role, password and database in place of the admin's, and
// pool_max_conns bounding the agent's pool when db_max_connections is set.
// Parameters that name another user, password or database are dropped.
func agentDBURL(admin, name, password string, maxConns int) (string, error) {
	u, err := url.Parse(admin)
	if err != nil {
		return "", errors.New("SLIPWAY_POSTGRES_URL is not a URL")
	}
	q := u.Query()
	for _, k := range []string{"user", "password", "dbname", "database", "passfile", "pool_max_conns", "search_path"} {
		q.Del(k)
	}
	if maxConns > 0 {
		q.Set("pool_max_conns", strconv.Itoa(maxConns))
	}
	out := url.URL{Scheme: u.Scheme, User: url.UserPassword(name, password), Host: u.Host, Path: "/" + name,
		RawQuery: q.Encode()}
	return out.String(), nil
}

// loopbackHost says whether the admin URL's host is a loopback address
// (or localhost), which a container does not reach.
func loopbackHost(admin string) bool {
	u, err := url.Parse(admin)
	if err != nil {
		return false
	}
	h := u.Hostname()
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// reachWarning is the deploy log's warning when the agent cannot reach
// the server as SLIPWAY_POSTGRES_URL names it: a loopback host seen from
// a docker container is the container itself. Slipway does not rewrite the
// host (PostgreSQL listens on loopback only by default, so the bridge
// gateway would not answer either); the operator gives an address both
// reach. "" when there is nothing to say.
func reachWarning(driver, admin string) string {
	if driver != "docker" && driver != "swarm" || !loopbackHost(admin) {
		return ""
	}
	return "warning: SLIPWAY_POSTGRES_URL names a loopback host, which the agent's container does not reach: " +
		"on the docker runtime give an address the containers reach (such as the docker bridge gateway, with PostgreSQL listening there and pg_hba.conf admitting the bridge network)"
}

// scramVerifier is the SCRAM-SHA-256 verifier PostgreSQL stores for
// password (RFC 5802, 7677; the format of PostgreSQL's pg_authid): the
// role is created with it, so the clear password never crosses the wire to
// the server, nor lands in its statement log.
func scramVerifier(password string) (string, error) {
	const iterations = 4096
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("salt: %w", err)
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("derive the key: %w", err)
	}
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	server := mac(salted, "Server Key")
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(server)), nil
}

// quoteLiteral quotes s as an SQL string literal (role passwords cannot be
// bound parameters in CREATE/ALTER ROLE).
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// errAgentDB is what a failed provisioning step reports: which step, and
// PostgreSQL's own message when it has one (never the URL, which holds a
// password; PostgreSQL's messages do not quote passwords).
func errAgentDB(step string, err error) error {
	var netErr net.Error
	if errors.As(err, &netErr) {
		return fmt.Errorf("agent database: %s: the PostgreSQL server of SLIPWAY_POSTGRES_URL does not answer", step)
	}
	return fmt.Errorf("agent database: %s: %w", step, err)
}

// adminConnectTimeout bounds connecting to SLIPWAY_POSTGRES_URL, and
// adminWorkTimeout all of one provisioning or drop: a server that accepts
// and then hangs (or a lock that is never granted) cannot hold a
// deployment's worker, its deploy or its deletion, forever.
const (
	adminConnectTimeout = 30 * time.Second
	adminWorkTimeout    = 2 * time.Minute
)

// adminConnect connects to SLIPWAY_POSTGRES_URL. pgx's connection errors
// name host and user but not the password; they are still reduced to the
// step, since the URL may carry other parameters a log should not keep.
func (rc *Reconciler) adminConnect(ctx context.Context) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, adminConnectTimeout)
	defer cancel()
	c, err := pgx.Connect(cctx, rc.PostgresURL)
	if err != nil {
		if ctx.Err() != nil { // the job ended (superseded, shutdown)
			return nil, ctx.Err()
		}
		return nil, errors.New("agent database: cannot connect to the PostgreSQL server of SLIPWAY_POSTGRES_URL (is it running, reachable, and are its credentials right?)")
	}
	return c, nil
}

// adminWork connects to SLIPWAY_POSTGRES_URL for one piece of admin
// work, bounded by adminWorkTimeout: it returns the bounded context, the
// connection, and done, which closes both.
func (rc *Reconciler) adminWork(ctx context.Context) (context.Context, *pgx.Conn, func(), error) {
	ctx, cancel := context.WithTimeout(ctx, adminWorkTimeout)
	c, err := rc.adminConnect(ctx)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, c, func() {
		_ = c.Close(context.Background())
		cancel()
	}, nil
}

// agentDatabaseURL returns the connection URL of the deployment's agent
// database, creating its record, role and database when missing; "" when
// SLIPWAY_POSTGRES_URL is not set. log receives what the deploy log should
// say (never the URL).
func (rc *Reconciler) agentDatabaseURL(ctx context.Context, depID string, rs *runtime.ResourceSpec, log func(string)) (string, error) {
	if rc.PostgresURL == "" {
		return "", nil
	}
	name, err := agentDBName(depID)
	if err != nil {
		return "", err
	}
	password, err := rc.agentDBPassword(depID, name)
	if err != nil {
		return "", err
	}
	maxConns := 0
	if rs != nil && rs.DBMaxConnections != nil && *rs.DBMaxConnections > 0 {
		maxConns = *rs.DBMaxConnections
	}
	if err := rc.ensureAgentDB(ctx, name, password, maxConns); err != nil {
		return "", err
	}
	if w := reachWarning(rc.Driver.Name(), rc.PostgresURL); w != "" {
		log(w)
	}
	log("agent state in PostgreSQL database " + name)
	// Replicas share the role's connection limit: each one's pool gets its
	// share (runtime.Scale.PoolShare), the whole of it when unscaled.
	return agentDBURL(rc.PostgresURL, name, password, runtime.ScaleOf(rs).PoolShare())
}

// withAgentDB adds the agent database's URL to spec's agent settings
// (see agentDatabaseURL).
func (rc *Reconciler) withAgentDB(ctx context.Context, spec *runtime.Spec, log func(string)) error {
	u, err := rc.agentDatabaseURL(ctx, spec.DeploymentID, spec.ResourceSpec, log)
	if err != nil || u == "" {
		return err
	}
	// A secret of the same name would come first in the agent's
	// environment, and the first occurrence is the one a Go process reads.
	const key = "SLIPWAY_AGENT_POSTGRES_URL"
	if _, ok := spec.Env[key]; ok {
		log("the secret " + key + " is replaced by the deployment's provisioned database")
		delete(spec.Env, key)
	}
	if spec.AgentEnv == nil {
		spec.AgentEnv = map[string]string{}
	}
	spec.AgentEnv[key] = u
	return nil
}

// agentDBPassword opens the deployment's stored password, or generates,
// seals and stores one on first use. The record is written before the role
// exists: a failure after it leaves a password the next attempt reuses.
func (rc *Reconciler) agentDBPassword(depID, name string) (string, error) {
	var password string
	err := rc.update(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(depID))
		if err != nil {
			return err
		}
		if d.AgentDatabase != nil {
			password, err = rc.Sealer.Open(d.AgentDatabase.Password, agentDBSealContext(depID))
			if err != nil {
				return fmt.Errorf("agent database: open the stored password: %w", err)
			}
			return nil
		}
		password = rand.Text() + rand.Text() // 52 base32 characters, 260 bits
		d.AgentDatabase = &agentDatabase{Name: name, Password: rc.Sealer.Seal(password, agentDBSealContext(depID))}
		return putDeployment(tx, d)
	})
	return password, err
}

// ensureAgentDB creates the role and the database if missing, and (again
// each time) sets the role's password, connection limit and the
// database's privileges, so a half-done earlier attempt is completed.
func (rc *Reconciler) ensureAgentDB(ctx context.Context, name, password string, maxConns int) error {
	ctx, c, done, err := rc.adminWork(ctx)
	if err != nil {
		return err
	}
	defer done()
	verifier, err := scramVerifier(password)
	if err != nil {
		return errAgentDB("hash the password", err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	limit := -1
	if maxConns > 0 {
		limit = maxConns
	}
	var exists bool
	if err := c.QueryRow(ctx, "select exists(select 1 from pg_roles where rolname = $1)", name).Scan(&exists); err != nil {
		return errAgentDB("look up the role", err)
	}
	verb := "alter"
	if !exists {
		verb = "create"
	}
	// NOCREATEDB NOCREATEROLE: the role can do nothing beyond its own
	// database. It must INHERIT: PostgreSQL 15 gives the database owner
	// the public schema through the implicit pg_database_owner membership.
	q := fmt.Sprintf("%s role %s login inherit nocreatedb nocreaterole connection limit %d password %s",
		verb, ident, limit, quoteLiteral(verifier))
	if _, err := c.Exec(ctx, q); err != nil {
		var pgErr interface{ SQLState() string }
		if errors.As(err, &pgErr) {
			return fmt.Errorf("agent database: %s role %s: PostgreSQL refused (SQLSTATE %s; does the admin role have CREATEROLE?)", verb, name, pgErr.SQLState())
		}
		return errAgentDB(verb+" role "+name, err)
	}
	if err := c.QueryRow(ctx, "select exists(select 1 from pg_database where datname = $1)", name).Scan(&exists); err != nil {
		return errAgentDB("look up the database", err)
	}
	if !exists {
		// PostgreSQL 16 requires the creator to be a member of the owner
		// role (with SET) to give it a database; GRANT it first, which
		// older servers accept as well.
		if _, err := c.Exec(ctx, fmt.Sprintf("grant %s to current_user", ident)); err != nil {
			return errAgentDB("grant the role to the admin role", err)
		}
		if _, err := c.Exec(ctx, fmt.Sprintf("create database %s owner %s", ident, ident)); err != nil {
			return errAgentDB("create database "+name, err)
		}
	}
	if _, err := c.Exec(ctx, fmt.Sprintf("revoke connect, temporary on database %s from public", ident)); err != nil {
		return errAgentDB("revoke public access to database "+name, err)
	}
	return nil
}

// dropAgentDB drops the deployment's database (ending its sessions) and
// its role; both may already be gone.
func (rc *Reconciler) dropAgentDB(ctx context.Context, name string) error {
	ctx, c, done, err := rc.adminWork(ctx)
	if err != nil {
		return err
	}
	defer done()
	ident := pgx.Identifier{name}.Sanitize()
	var version int
	if err := c.QueryRow(ctx, "select current_setting('server_version_num')::int").Scan(&version); err != nil {
		return errAgentDB("read the server version", err)
	}
	drop := "drop database if exists " + ident
	if version >= 130000 {
		drop += " with (force)"
	} else {
		// Before 13 there is no FORCE: end the sessions first (the agent
		// has stopped; what is left are stragglers).
		if _, err := c.Exec(ctx, "select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()", name); err != nil {
			return errAgentDB("end the sessions of database "+name, err)
		}
	}
	if _, err := c.Exec(ctx, drop); err != nil {
		return errAgentDB("drop database "+name, err)
	}
	if _, err := c.Exec(ctx, "drop role if exists "+ident); err != nil {
		return errAgentDB("drop role "+name, err)
	}
	return nil
}

// removeAgentDB drops a deleted deployment's database and role, if it has
// them; an error leaves the deletion to be retried. Without
// SLIPWAY_POSTGRES_URL (unset since) they cannot be reached: the deletion
// goes on and says what is left behind.
func (rc *Reconciler) removeAgentDB(ctx context.Context, dep *deploymentRecord) error {
	var db *agentDatabase
	err := rc.DB.View(func(tx *bolt.Tx) error {
		d, err := readDeployment(tx, uuid.MustParse(dep.ID))
		if err == nil {
			db = d.AgentDatabase
		}
		return nil
	})
	if err != nil || db == nil {
		return err
	}
	if rc.PostgresURL == "" {
		rc.Log.Warn().Str("deployment_id", dep.ID).Str("database", db.Name).
			Msg("SLIPWAY_POSTGRES_URL is no longer set: the deployment's PostgreSQL database and role are left on their server")
		return nil
	}
	return rc.dropAgentDB(ctx, db.Name)
}
