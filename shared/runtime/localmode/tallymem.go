package localmode

import (
	"context"
	"maps"
)

// tallyMemRows is how many rows (URLs and hosts) the tally keeps in memory
// before it moves them to a scratch database for good: about 20 MiB. A job
// of up to about a hundred thousand URLs then never touches the database,
// whose statements cost as much CPU as a request does; a longer one pays
// them so that its memory stays bounded however long its list is.
const tallyMemRows = 1 << 17

// memRow is one URL's row in memory.
type memRow struct {
	url   string
	state uint8
	held  bool
}

// memRows keeps the tally's rows in maps: the tier every job starts on.
type memRows struct {
	rows     map[string]memRow
	accepted map[string]int64
}

func newMemRows() *memRows {
	return &memRows{rows: map[string]memRow{}, accepted: map[string]int64{}}
}

func (m *memRows) size() int { return len(m.rows) + len(m.accepted) }

func (m *memRows) close() error { return nil }

// tx runs f on the maps; a failure leaves what f did (the tally fails as a
// whole then, as with the database).
func (m *memRows) tx(f func(rowOps) error) error { return f(m) }

func (m *memRows) insert(rows [][2]string, state int) (int, error) {
	n := 0
	for _, r := range rows {
		if _, ok := m.rows[r[0]]; !ok {
			m.rows[r[0]] = memRow{url: r[1], state: uint8(state)}
			n++
		}
	}
	return n, nil
}

func (m *memRows) move(ids []string, from, to int) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range ids {
		if r, ok := m.rows[id]; ok && r.state == uint8(from) {
			r.state = uint8(to)
			m.rows[id] = r
			out[id] = true
		}
	}
	return out, nil
}

func (m *memRows) known(ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range ids {
		if _, ok := m.rows[id]; ok {
			out[id] = true
		}
	}
	return out, nil
}

func (m *memRows) hold(ids []string, held bool) error {
	for _, id := range ids {
		if r, ok := m.rows[id]; ok {
			r.held = held
			m.rows[id] = r
		}
	}
	return nil
}

func (m *memRows) unholdAll() error {
	for id, r := range m.rows {
		if r.held {
			r.held = false
			m.rows[id] = r
		}
	}
	return nil
}

func (m *memRows) accept(hosts map[string]int64) error {
	for h, at := range hosts {
		if _, ok := m.accepted[h]; !ok {
			m.accepted[h] = at
		}
	}
	return nil
}

func (m *memRows) missing(limit int) (map[string]string, error) {
	out := map[string]string{}
	for id, r := range m.rows {
		if len(out) >= limit {
			break
		}
		if r.state == owing {
			out[id] = r.url
		}
	}
	return out, nil
}

func (m *memRows) settle(_ context.Context, each func(func(ids []string) error) error) (int, error) {
	queued := map[string]bool{}
	if err := each(func(ids []string) error {
		for _, id := range ids {
			queued[id] = true
		}
		return nil
	}); err != nil {
		return 0, err
	}
	n := 0
	for id, r := range m.rows {
		if r.state == owing && !r.held && !queued[id] {
			r.state = elsewhere
			m.rows[id] = r
			n++
		}
	}
	return n, nil
}

func (m *memRows) acceptedAt(host string) (int64, bool, error) {
	at, ok := m.accepted[host]
	return at, ok, nil
}

// spill writes every row into to, in one transaction.
func (m *memRows) spill(to rowStore) error {
	return to.tx(func(ops rowOps) error {
		byState := map[uint8][][2]string{}
		var held []string
		for id, r := range m.rows {
			byState[r.state] = append(byState[r.state], [2]string{id, r.url})
			if r.held {
				held = append(held, id)
			}
		}
		for st, rows := range byState {
			if _, err := ops.insert(rows, int(st)); err != nil {
				return err
			}
		}
		if err := ops.hold(held, true); err != nil {
			return err
		}
		return ops.accept(maps.Clone(m.accepted))
	})
}
