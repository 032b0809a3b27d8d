package localmode

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/urldownloader/urldownloader/shared/domain/result"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// Retrying a job's failures (--retry-failed). A retry round is an input of
// its own, named retry/N and kept whole in the state (so a stopped round
// goes on where it stopped, as a list does): one line per failed result,
// whose URL gets a new id, the id of the result it retries kept beside it.
// Each result of a retried URL names that id (Result.RetryOf).

const retrySchema = `
CREATE TABLE IF NOT EXISTS retry_round (
	round INTEGER PRIMARY KEY,
	lines BLOB    NOT NULL
);
CREATE TABLE IF NOT EXISTS retry_of (
	id       TEXT PRIMARY KEY,
	retry_of TEXT NOT NULL
) WITHOUT ROWID;
`

// ErrNoResultsFile is returned by RetryFailed for a state that writes its
// results to standard output (or keeps none): there is nothing to read the
// failures from.
var ErrNoResultsFile = errors.New("this state records no results file to read the failures from (its results went to standard output)")

// retries maps a retried URL's id to the id of the result it retries.
type retries struct {
	mu sync.Mutex
	of map[string]string
}

func (r *retries) get(id string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.of[id]
}

func (r *retries) put(m map[string]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.of == nil {
		r.of = map[string]string{}
	}
	for k, v := range m {
		r.of[k] = v
	}
}

// loadRetries reads the ids of retried URLs from the state.
func (rt *Runtime) loadRetries(ctx context.Context) error {
	if _, err := rt.ledger.db.ExecContext(ctx, retrySchema); err != nil {
		return fmt.Errorf("create retry tables: %w", err)
	}
	rows, err := rt.ledger.db.QueryContext(ctx, "SELECT id, retry_of FROM retry_of")
	if err != nil {
		return fmt.Errorf("read retried ids: %w", err)
	}
	defer rows.Close()
	m := map[string]string{}
	for rows.Next() {
		var id, of string
		if err := rows.Scan(&id, &of); err != nil {
			return fmt.Errorf("read retried ids: %w", err)
		}
		m[id] = of
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read retried ids: %w", err)
	}
	rt.retried.put(m)
	return nil
}

// RetryFailed returns the input that tries the job's failed URLs again,
// and how many URLs it holds (0: nothing to retry; the input is nil).
// failed says which results are failures (the command's rule). A round
// that an earlier run did not read to its end is returned again, whole
// (the ledger skips what was read); otherwise a new round holds every
// failed result of the results file that no round has retried yet: a
// retry that failed in turn is retried under its own id.
func (rt *Runtime) RetryFailed(ctx context.Context, failed func(result.Result) bool) (*Input, int, error) {
	db := rt.ledger.db
	var round int64
	var text []byte
	err := db.QueryRowContext(ctx, "SELECT round, lines FROM retry_round ORDER BY round DESC LIMIT 1").Scan(&round, &text)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, 0, fmt.Errorf("read the last retry round: %w", err)
	default:
		prog, err := rt.ledger.get(ctx, retryName(round))
		if err != nil {
			return nil, 0, err
		}
		if prog.Offset < int64(len(text)) {
			return &Input{Name: retryName(round), R: strings.NewReader(string(text)), ByName: true}, strings.Count(string(text), "\n"), nil
		}
	}

	rt.files.mu.Lock()
	path := rt.files.rec.Path
	rt.files.mu.Unlock()
	if path == "" {
		return nil, 0, ErrNoResultsFile
	}
	failures, err := readFailures(path, failed, rt.retried.retriedIDs())
	if err != nil {
		return nil, 0, err
	}
	if len(failures) == 0 {
		return nil, 0, nil
	}
	round++
	name := retryName(round)
	var b strings.Builder
	of := make(map[string]string, len(failures))
	for i, r := range failures {
		ln, err := json.Marshal(struct {
			Host string `json:"host"`
			URL  string `json:"url"`
		}{r.Host, r.URL})
		if err != nil {
			return nil, 0, err
		}
		// The id the feeder will give the line (its record's message id
		// is name:line), known before it is read.
		p := parseLine(name, line{no: int64(i + 1), text: ln}, urlmsg.DefaultLimits())
		if p.reject != "" || len(p.msgs) != 1 {
			return nil, 0, fmt.Errorf("retry %s (%s): its line is refused: %s", r.ID, r.URL, p.reject)
		}
		of[p.msgs[0].ID] = r.ID
		b.Write(ln)
		b.WriteByte('\n')
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, 0, fmt.Errorf("record retry round %d: %w", round, err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "INSERT INTO retry_round (round, lines) VALUES (?, ?)", round, []byte(b.String())); err != nil {
		return nil, 0, fmt.Errorf("record retry round %d: %w", round, err)
	}
	for id, retryOf := range of {
		if _, err := tx.ExecContext(ctx, "INSERT INTO retry_of (id, retry_of) VALUES (?, ?)", id, retryOf); err != nil {
			return nil, 0, fmt.Errorf("record retry round %d: %w", round, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, 0, fmt.Errorf("record retry round %d: %w", round, err)
	}
	rt.retried.put(of)
	// A round may hold the very lines of an earlier one (the same URLs
	// failed again): it is recognised by its name only.
	return &Input{Name: name, R: strings.NewReader(b.String()), ByName: true}, len(failures), nil
}

func retryName(round int64) string { return "retry/" + strconv.FormatInt(round, 10) }

// retriedIDs returns the ids some round retries already.
func (r *retries) retriedIDs() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.of))
	for _, of := range r.of {
		out[of] = true
	}
	return out
}

// readFailures reads a results file and returns its failed results not in
// done, in the file's order, one per id: the last line of an id decides (a
// result is written at least once).
func readFailures(path string, failed func(result.Result) bool, done map[string]bool) ([]result.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the failures: %w", err)
	}
	defer f.Close()
	last := map[string]int{}
	var all []result.Result
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<30)
	for sc.Scan() {
		// Only the fields that say what to retry; a line that is not a
		// result (a partial last line) is no failure to retry.
		var r struct {
			ID     string        `json:"id"`
			Host   string        `json:"host"`
			URL    string        `json:"url"`
			Status result.Status `json:"status"`
			Error  string        `json:"error"`
		}
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == "" {
			continue
		}
		res := result.Result{ID: r.ID, Host: r.Host, URL: r.URL, Status: r.Status, Error: r.Error}
		if i, ok := last[r.ID]; ok {
			all[i] = res
			continue
		}
		last[r.ID] = len(all)
		all = append(all, res)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read the failures from %s: %w", path, err)
	}
	var out []result.Result
	for _, r := range all {
		if failed(r) && !done[r.ID] {
			out = append(out, r)
		}
	}
	return out, nil
}
