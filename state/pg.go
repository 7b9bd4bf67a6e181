package state

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// PG is a state kept in a PostgreSQL database (a backend "pg" block)
// rather than in the Bottlefile's directory: every directory that names
// the same database and state name shares one state, so a team operates
// one fleet.
type PG struct {
	// ConnStr is a libpq connection string or URL; what it leaves out
	// comes from the PG* environment (PGHOST, PGDATABASE, PGPASSWORD...),
	// so "" takes all of it from there. It holds a password: it is never
	// recorded, nor shown.
	ConnStr string
	// Name is the state's name in the database; "" is "default".
	Name string
}

// DefaultPGName is the name of a database state whose block gives none.
const DefaultPGName = "default"

// pgSchema makes the tables a database state lives in, one per concept:
// the states (lineage and serial), their objects and intents (one row
// each), the backup of each state's previous serial, and who holds each
// state's lock. Records are json, not jsonb, so they read back byte for
// byte as written.
var pgSchema = []string{
	`CREATE TABLE IF NOT EXISTS bottlefile_states (
		name       text PRIMARY KEY,
		lineage    text,
		serial     bigint NOT NULL DEFAULT 0,
		version    integer NOT NULL DEFAULT ` + strconv.Itoa(formatVersion) + `,
		updated_at timestamptz NOT NULL DEFAULT now())`,
	`CREATE TABLE IF NOT EXISTS bottlefile_objects (
		state   text NOT NULL REFERENCES bottlefile_states (name),
		address text NOT NULL,
		data    json NOT NULL,
		PRIMARY KEY (state, address))`,
	`CREATE TABLE IF NOT EXISTS bottlefile_intents (
		state   text NOT NULL REFERENCES bottlefile_states (name),
		address text NOT NULL,
		data    json NOT NULL,
		PRIMARY KEY (state, address))`,
	`CREATE TABLE IF NOT EXISTS bottlefile_backups (
		state    text PRIMARY KEY REFERENCES bottlefile_states (name),
		lineage  text NOT NULL,
		serial   bigint NOT NULL,
		taken_at timestamptz NOT NULL,
		objects  json NOT NULL)`,
	`CREATE TABLE IF NOT EXISTS bottlefile_locks (
		state   text NOT NULL,
		session integer NOT NULL,
		write   boolean NOT NULL,
		pid     integer NOT NULL,
		host    text NOT NULL,
		command text NOT NULL,
		since   timestamptz NOT NULL,
		PRIMARY KEY (state, session))`,
}

// pgTables are the tables of the buckets holding one row per key.
var pgTables = map[string]string{
	string(bucketObjects): "bottlefile_objects",
	string(bucketIntents): "bottlefile_intents",
}

// pgStorage is a state in PostgreSQL. Its lock is a session advisory lock
// keyed from the state's name, taken on the one connection every query of
// the command goes through and held until close: a holder that is killed
// loses its connection, so its session ends and the lock is released.
type pgStorage struct {
	mu   sync.Mutex // one query at a time on conn
	conn *pgx.Conn
	name string
}

// pgLockKey is the advisory lock key of a state name.
func pgLockKey(name string) int64 {
	h := fnv.New64a()
	h.Write([]byte("bottlefile state " + name))
	return int64(h.Sum64())
}

// pgSchemaKey serializes making the tables.
var pgSchemaKey = pgLockKey("\x00schema")

// pgWhere names a database state in messages: its name, database and
// host, never the password.
func pgWhere(cfg *pgx.ConnConfig, name string) string {
	host := cfg.Host
	if cfg.Port != 0 && cfg.Port != 5432 {
		host += ":" + strconv.Itoa(int(cfg.Port))
	}
	return fmt.Sprintf("PostgreSQL state %q (database %q on %s)", name, cfg.Database, host)
}

func openPG(dir string, opts Options) (*Store, error) {
	name := opts.PG.Name
	if name == "" {
		name = DefaultPGName
	}
	cfg, err := pgx.ParseConfig(opts.PG.ConnStr)
	if err != nil {
		// pgconn's message leaves the password out.
		return nil, fmt.Errorf("the pg backend's connection string is not valid: %v", err)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	where := pgWhere(cfg, name)
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %v", where, err)
	}
	p := &pgStorage{conn: conn, name: name}
	s := &Store{path: where, dir: dir, st: p}
	fail := func(err error) (*Store, error) {
		conn.Close(ctx)
		return nil, err
	}
	if err := p.makeSchema(ctx); err != nil {
		return fail(fmt.Errorf("opening %s: making its tables: %w", where, err))
	}
	if err := p.lock(ctx, where, !opts.ReadOnly, opts.LockTimeout); err != nil {
		return fail(err)
	}
	var lineage *string
	version := formatVersion
	err = conn.QueryRow(ctx, `SELECT lineage, version FROM bottlefile_states WHERE name = $1`, name).Scan(&lineage, &version)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fail(fmt.Errorf("reading %s: %w", where, err))
	}
	if version > formatVersion {
		return fail(fmt.Errorf("%s has format version %d; this bottlefile reads version %d", where, version, formatVersion))
	}
	if !opts.ReadOnly {
		if _, err := conn.Exec(ctx, `INSERT INTO bottlefile_states (name) VALUES ($1) ON CONFLICT DO NOTHING`, name); err != nil {
			return fail(fmt.Errorf("writing %s: %w", where, err))
		}
		if lineage != nil && *lineage != "" {
			if err := p.backup(); err != nil {
				return fail(fmt.Errorf("keeping the previous serial of %s as its backup: %w", where, err))
			}
		}
	}
	return s, nil
}

// pgTableNames are the tables pgSchema makes.
var pgTableNames = []string{"bottlefile_states", "bottlefile_objects", "bottlefile_intents", "bottlefile_backups", "bottlefile_locks"}

// makeSchema makes the tables that are missing: once they exist, a role
// that may only read and write them will do.
func (p *pgStorage) makeSchema(ctx context.Context) error {
	var n int
	if err := p.conn.QueryRow(ctx, `SELECT count(*) FROM unnest($1::text[]) t WHERE to_regclass(t) IS NOT NULL`, pgTableNames).Scan(&n); err != nil {
		return err
	}
	if n == len(pgTableNames) {
		return nil
	}
	return pgx.BeginFunc(ctx, p.conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, pgSchemaKey); err != nil {
			return err
		}
		for _, q := range pgSchema {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}

// lock takes the state's advisory lock (shared to read, exclusive to
// write), waiting up to timeout, then records this process as a holder
// so a refused command can name it. Records of sessions that are gone
// are removed on the way: a writer removes every other, as it is the
// only holder.
func (p *pgStorage) lock(ctx context.Context, where string, write bool, timeout time.Duration) error {
	try := `SELECT pg_try_advisory_lock_shared($1)`
	if write {
		try = `SELECT pg_try_advisory_lock($1)`
	}
	key := pgLockKey(p.name)
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		if err := p.conn.QueryRow(ctx, try, key).Scan(&ok); err != nil {
			return fmt.Errorf("locking %s: %w", where, err)
		}
		if ok {
			break
		}
		if !time.Now().Before(deadline) {
			holders, err := p.holders(ctx)
			detail := describeLockInfos(holders)
			if err != nil {
				detail = fmt.Sprintf("Who holds it cannot be read: %v", err)
			}
			return fmt.Errorf("%w: another bottlefile process holds the lock on %s (a PostgreSQL advisory lock); wait for it to finish, or pass -lock-timeout to wait. %s", ErrLocked, where, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
	host, _ := os.Hostname()
	return pgx.BeginFunc(ctx, p.conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM bottlefile_locks l WHERE l.state = $1
			AND ($2 OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.session))`, p.name, write)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO bottlefile_locks (state, session, write, pid, host, command, since)
			VALUES ($1, pg_backend_pid(), $2, $3, $4, $5, $6)`,
			p.name, write, os.Getpid(), host, commandLine(), time.Now().UTC().Truncate(time.Second))
		return err
	})
}

// holders reads who holds the state's lock: a record whose session is
// gone is stale.
func (p *pgStorage) holders(ctx context.Context) ([]LockInfo, error) {
	rows, err := p.conn.Query(ctx, `SELECT l.pid, l.host, l.command, l.since, l.write,
			NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.session)
		FROM bottlefile_locks l WHERE l.state = $1 ORDER BY l.since, l.session`, p.name)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []LockInfo
	for rows.Next() {
		info := LockInfo{Redacted: true}
		if err := rows.Scan(&info.PID, &info.Host, &info.Command, &info.Since, &info.Write, &info.Stale); err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, rows.Err()
}

func (p *pgStorage) view(fn func(tx txn) error) error {
	return p.run(pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func (p *pgStorage) update(fn func(tx txn) error) error {
	return p.run(pgx.TxOptions{}, fn)
}

func (p *pgStorage) run(opts pgx.TxOptions, fn func(tx txn) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx := context.Background()
	return pgx.BeginTxFunc(ctx, p.conn, opts, func(tx pgx.Tx) error {
		return fn(&pgTxn{ctx: ctx, tx: tx, name: p.name})
	})
}

func (p *pgStorage) backup() error {
	_, err := p.conn.Exec(context.Background(), `INSERT INTO bottlefile_backups (state, lineage, serial, taken_at, objects)
		SELECT s.name, s.lineage, s.serial, now(),
			COALESCE((SELECT json_object_agg(o.address, o.data ORDER BY o.address) FROM bottlefile_objects o WHERE o.state = s.name), '{}')
		FROM bottlefile_states s WHERE s.name = $1 AND s.lineage IS NOT NULL
		ON CONFLICT (state) DO UPDATE SET lineage = EXCLUDED.lineage, serial = EXCLUDED.serial,
			taken_at = EXCLUDED.taken_at, objects = EXCLUDED.objects`, p.name)
	return err
}

func (p *pgStorage) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Ending the session releases the lock whatever happens here.
	p.conn.Exec(ctx, `DELETE FROM bottlefile_locks WHERE state = $1 AND session = pg_backend_pid()`, p.name)
	p.conn.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
	return p.conn.Close(ctx)
}

// pgTxn maps the buckets onto the tables: meta is the state's row in
// bottlefile_states, objects and intents one row per key.
type pgTxn struct {
	ctx  context.Context
	tx   pgx.Tx
	name string
}

// pgMetaColumn is the bottlefile_states column of a meta key; the
// directory is not recorded (a database state belongs to none).
func pgMetaColumn(key []byte) (string, error) {
	switch string(key) {
	case string(keyLineage):
		return "lineage", nil
	case string(keySerial):
		return "serial", nil
	case string(keyVersion):
		return "version", nil
	case string(keyDirectory):
		return "", nil
	}
	return "", fmt.Errorf("a database state has no %q", key)
}

func pgTable(bucket []byte) (string, error) {
	if t, ok := pgTables[string(bucket)]; ok {
		return t, nil
	}
	return "", fmt.Errorf("a database state has no bucket %q", bucket)
}

func (t *pgTxn) get(bucket, key []byte) ([]byte, error) {
	q, args := "", []any{t.name}
	if string(bucket) == string(bucketMeta) {
		col, err := pgMetaColumn(key)
		if err != nil || col == "" {
			return nil, err
		}
		q = `SELECT ` + col + `::text FROM bottlefile_states WHERE name = $1`
	} else {
		table, err := pgTable(bucket)
		if err != nil {
			return nil, err
		}
		q, args = `SELECT data::text FROM `+table+` WHERE state = $1 AND address = $2`, append(args, string(key))
	}
	var v *string
	err := t.tx.QueryRow(t.ctx, q, args...).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) || v == nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return []byte(*v), nil
}

func (t *pgTxn) put(bucket, key, value []byte) error {
	if string(bucket) == string(bucketMeta) {
		col, err := pgMetaColumn(key)
		if err != nil || col == "" {
			return err
		}
		if _, err := t.tx.Exec(t.ctx, `INSERT INTO bottlefile_states (name) VALUES ($1) ON CONFLICT DO NOTHING`, t.name); err != nil {
			return err
		}
		typ := map[string]string{"lineage": "text", "serial": "bigint", "version": "integer"}[col]
		_, err = t.tx.Exec(t.ctx, `UPDATE bottlefile_states SET `+col+` = $2::text::`+typ+`, updated_at = now() WHERE name = $1`, t.name, string(value))
		return err
	}
	table, err := pgTable(bucket)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(t.ctx, `INSERT INTO `+table+` (state, address, data) VALUES ($1, $2, $3::text::json)
		ON CONFLICT (state, address) DO UPDATE SET data = EXCLUDED.data`, t.name, string(key), string(value))
	return err
}

func (t *pgTxn) del(bucket, key []byte) error {
	table, err := pgTable(bucket)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(t.ctx, `DELETE FROM `+table+` WHERE state = $1 AND address = $2`, t.name, string(key))
	return err
}

func (t *pgTxn) each(bucket []byte, fn func(k, v []byte) error) error {
	table, err := pgTable(bucket)
	if err != nil {
		return err
	}
	rows, err := t.tx.Query(t.ctx, `SELECT address, data::text FROM `+table+` WHERE state = $1 ORDER BY address COLLATE "C"`, t.name)
	if err != nil {
		return err
	}
	type kv struct{ k, v string }
	var all []kv
	for rows.Next() {
		var e kv
		if err := rows.Scan(&e.k, &e.v); err != nil {
			rows.Close()
			return err
		}
		all = append(all, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, e := range all {
		if err := fn([]byte(e.k), []byte(e.v)); err != nil {
			return err
		}
	}
	return nil
}
