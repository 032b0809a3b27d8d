package sqlite

// The schema. Five tables in one file:
//
//	hosts    one row per queue key: politeness state, queue bounds, due time
//	entries  one row per queued URL, clustered by (host, seq)
//	refreshes one row per refreshing URL, by (host, url) (refresh.go)
//	robots   robots.txt answers too large for the host row, by (key, origin)
//	leases   which check run owns a virtual shard
//
// Why this shape, for a local run of ~100,000 URLs over ~1,000 hosts:
//
//   - A host row stays small (no URL lists), so the commit after every
//     fetch rewrites a few hundred bytes; its pending count and next
//     sequence number live in the row, so neither an append nor a commit
//     counts or scans the queue.
//   - Entries are a WITHOUT ROWID table keyed by (host, seq): one host's
//     queue is one contiguous range of the B-tree, the head is its first
//     rows, eviction and Done delete a key range, and an append inserts at
//     the range's end. Every operation costs what it touches, never the
//     length of the queue.
//   - hosts_due is a partial index on (vs, due) holding only hosts with a
//     due time, as DynamoDB's sparse due-index does: DueHosts reads the
//     due prefix of one virtual shard and nothing else.
//   - hosts_expires is a partial index over idle hosts only, so the sweep
//     that deletes expired idle state reads exactly what it deletes.
//   - Host rows refer to their entries by an integer id rather than the
//     key text, which keeps each of the 100,000 entry keys a few bytes.
//   - Robots rows are keyed by queue key and origin and outlive the host
//     row's idle TTL, as DynamoDB's robots items do: a host back after a
//     day still finds its robots.txt (until the sweep, robotsKeep after
//     its fetch).
//
// Times are Unix milliseconds, as the DynamoDB store keeps them, so both
// stores round a time the same way. Zero means unset, except for due and
// expires, where NULL keeps the row out of the partial index.
const schema = `
CREATE TABLE IF NOT EXISTS hosts (
	id            INTEGER PRIMARY KEY,
	key           TEXT    NOT NULL UNIQUE,
	vs            INTEGER NOT NULL,
	due           INTEGER,
	tail          INTEGER NOT NULL DEFAULT 0,
	pending       INTEGER NOT NULL DEFAULT 0,
	last_fetch    INTEGER NOT NULL DEFAULT 0,
	pause_until   INTEGER NOT NULL DEFAULT 0,
	errors        INTEGER NOT NULL DEFAULT 0,
	failing_since INTEGER NOT NULL DEFAULT 0,
	last_error    TEXT    NOT NULL DEFAULT '',
	rate_delay    INTEGER NOT NULL DEFAULT 0,
	rate_since    INTEGER NOT NULL DEFAULT 0,
	last_took     INTEGER NOT NULL DEFAULT 0,
	origins       TEXT    NOT NULL DEFAULT '',
	attempts      BLOB,
	robots        BLOB,
	expires       INTEGER
);
CREATE INDEX IF NOT EXISTS hosts_due ON hosts (vs, due) WHERE due IS NOT NULL;
CREATE INDEX IF NOT EXISTS hosts_expires ON hosts (expires) WHERE expires IS NOT NULL;
CREATE TABLE IF NOT EXISTS entries (
	host          INTEGER NOT NULL,
	seq           INTEGER NOT NULL,
	id            TEXT    NOT NULL,
	url           TEXT    NOT NULL,
	etag          TEXT    NOT NULL DEFAULT '',
	last_modified TEXT    NOT NULL DEFAULT '',
	hops          INTEGER NOT NULL DEFAULT 0,
	validators_url TEXT   NOT NULL DEFAULT '',
	PRIMARY KEY (host, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS robots (
	key        TEXT    NOT NULL,
	origin     TEXT    NOT NULL,
	status     INTEGER NOT NULL,
	body       BLOB,
	fetched_at INTEGER NOT NULL,
	PRIMARY KEY (key, origin)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS robots_fetched ON robots (fetched_at);
` + refreshesDDL + `CREATE TABLE IF NOT EXISTS leases (
	vs    INTEGER PRIMARY KEY,
	owner TEXT    NOT NULL,
	until INTEGER NOT NULL
);
`

// schemaVersion is kept in PRAGMA user_version: a file written by a
// different layout is refused rather than misread, except the older ones
// migrations lists.
const schemaVersion = 5

// migrations take a state file from version i+1 to i+2. Version 2 added
// the learned delays (rate_delay, rate_since, last_took: ms); a host
// without them has learned none. Version 3 added an entry's
// validators_url (empty when its validators are its own URL's, as every
// entry queued before was). Version 4 added a host's origins (the failure
// runs of its other origins: politeness.EncodeOrigins); ” is what a host
// with one origin has, and an older host's run goes to the first origin
// it works. Version 5 added the refreshes table (refresh.go); an older
// state has no refreshing URL.
var migrations = []string{
	`ALTER TABLE hosts ADD COLUMN rate_delay INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE hosts ADD COLUMN rate_since INTEGER NOT NULL DEFAULT 0;
	ALTER TABLE hosts ADD COLUMN last_took INTEGER NOT NULL DEFAULT 0;`,
	`ALTER TABLE entries ADD COLUMN validators_url TEXT NOT NULL DEFAULT '';`,
	`ALTER TABLE hosts ADD COLUMN origins TEXT NOT NULL DEFAULT '';`,
	refreshesDDL,
}

// The statements. Each one that runs per operation reads or writes through
// a key or an index (plan_test.go checks that none scans a table).
const (
	qHost = `SELECT id, vs, due, tail, pending, last_fetch, pause_until, errors,
		failing_since, last_error, rate_delay, rate_since, last_took, origins, attempts, robots, expires
		FROM hosts WHERE key = ?`
	qInsertHost = "INSERT INTO hosts (key, vs) VALUES (?, ?)"
	qUpdateHost = `UPDATE hosts SET vs = ?, due = ?, tail = ?, pending = ?, last_fetch = ?,
		pause_until = ?, errors = ?, failing_since = ?, last_error = ?, rate_delay = ?, rate_since = ?,
		last_took = ?, origins = ?, attempts = ?, robots = ?,
		expires = ? WHERE id = ?`
	qHead    = "SELECT seq, id, url, etag, last_modified, validators_url, hops FROM entries WHERE host = ? ORDER BY seq LIMIT ?"
	qHeadIDs = "SELECT seq, id FROM entries WHERE host = ? AND seq > ? ORDER BY seq LIMIT ?"
	// qFirstIDs is qHeadIDs' first page. A value bound to a range on an
	// indexed column (seq > ?) makes SQLite prepare the statement again
	// at every new binding (it may change the plan, with STAT4): every
	// commit paid that; most commits read one page.
	qFirstIDs   = "SELECT seq, id FROM entries WHERE host = ? ORDER BY seq LIMIT ?"
	qDeleteHead = "DELETE FROM entries WHERE host = ? AND seq <= ?"
	qDueHosts   = "SELECT key FROM hosts WHERE vs = ? AND due IS NOT NULL AND due <= ? ORDER BY due LIMIT ?"
	// qAcquire takes the lease when it is free, expired (until before
	// now) or already the owner's, in one statement.
	qAcquire = `INSERT INTO leases (vs, owner, until) VALUES (?1, ?2, ?3)
		ON CONFLICT (vs) DO UPDATE SET owner = excluded.owner, until = excluded.until
		WHERE leases.owner = excluded.owner OR leases.until < ?4`
	qRelease    = "DELETE FROM leases WHERE vs = ? AND owner = ?"
	qRobots     = "SELECT status, body, fetched_at FROM robots WHERE key = ? AND origin = ?"
	qPutRobots  = "INSERT OR REPLACE INTO robots (key, origin, status, body, fetched_at) VALUES (?, ?, ?, ?, ?)"
	qSweepHosts = `DELETE FROM hosts WHERE id IN
		(SELECT id FROM hosts WHERE expires <= ? AND pending = 0 LIMIT ?)`
	qSweepRobots = `DELETE FROM robots WHERE (key, origin) IN
		(SELECT key, origin FROM robots WHERE fetched_at <= ? LIMIT ?)`
)

// refreshesDDL creates the refreshing URLs' table (schema 5), in a new
// state and in the migration of an older one alike.
const refreshesDDL = `CREATE TABLE IF NOT EXISTS refreshes (
	host           INTEGER NOT NULL,
	url            TEXT    NOT NULL,
	id             TEXT    NOT NULL,
	hops           INTEGER NOT NULL DEFAULT 0,
	due            INTEGER NOT NULL,
	every          INTEGER NOT NULL,
	flags          INTEGER NOT NULL DEFAULT 0,
	etag           TEXT    NOT NULL DEFAULT '',
	last_modified  TEXT    NOT NULL DEFAULT '',
	validators_url TEXT    NOT NULL DEFAULT '',
	sha256         TEXT    NOT NULL DEFAULT '',
	seq            INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (host, url)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS refreshes_due ON refreshes (host, due);
`
