package localmode

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/hostqueue"
	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// Back-pressure for local input. The ingester runs in HoldBack mode
// (hostqueue.Overflow): a host's queue takes what fits under PersistLimit
// and nothing is evicted. An input line is already durable on disk, so the
// URLs that did not fit are not lost and need not make room: the feeder
// keeps them in the input's overflow (the ledger's input_held table, in
// the transaction that records the lines as read), reads on, so other
// hosts never wait behind a big one, and the overflow loop hands them to
// ingest again, oldest first, whenever a commit took URLs off their host's
// queue. The store keeps at most PersistLimit per host in its queues; the
// overflow holds the rest of the input's lines, as the file does.
//
// POST /urls has no disk behind it: there, URLs a full queue cannot take
// are answered 503 (ErrQueueFull is a per-item failure the handler maps to
// "not queued, retry"), and the client sends them again.

// refillPoll is how often the overflow loop tries every held host even
// without a commit telling it of room (another process on the same state
// may have drained it).
const refillPoll = time.Second

// overflow is the input's overflow, seen from this process.
type overflow struct {
	rt *Runtime
	// mu orders the decisions on a key's held URLs: the feeder's batch
	// (hold behind those held, or queue) against a refill (queue the
	// held, then drop the key when none is left).
	mu sync.Mutex

	// kmu guards keys (changed with mu held too) and poked.
	kmu sync.Mutex
	// keys are the queue keys with held URLs: at most one per
	// PersistLimit URLs read, so small whatever the input's length.
	keys  map[string]bool
	poked map[string]bool
	poke  chan struct{}
}

// held tells whether key has URLs held back.
func (o *overflow) held(key string) bool {
	o.kmu.Lock()
	defer o.kmu.Unlock()
	return o.keys[key]
}

// add notes keys with URLs held back; o.mu is held.
func (o *overflow) add(keys ...string) {
	o.kmu.Lock()
	defer o.kmu.Unlock()
	for _, k := range keys {
		o.keys[k] = true
	}
}

func newOverflow(rt *Runtime) *overflow {
	return &overflow{rt: rt, keys: map[string]bool{}, poked: map[string]bool{}, poke: make(chan struct{}, 1)}
}

// holdingKey marks an ingest whose caller keeps the URLs a full queue
// could not take (the feeder, the overflow loop): they stay owed a result.
type holdingKey struct{}

func holding(ctx context.Context) context.Context { return context.WithValue(ctx, holdingKey{}, true) }

func isHolding(ctx context.Context) bool { v, _ := ctx.Value(holdingKey{}).(bool); return v }

// room tells the loop that key's queue lost entries.
func (o *overflow) room(key string) {
	o.kmu.Lock()
	o.poked[key] = true
	o.kmu.Unlock()
	select {
	case o.poke <- struct{}{}:
	default:
	}
}

// load reads the keys held by earlier runs and makes their URLs owed a
// result in this one. It returns how many URLs are held.
func (o *overflow) load(ctx context.Context) (int, error) {
	keys, err := o.rt.ledger.heldKeys(ctx)
	if err != nil {
		return 0, err
	}
	o.add(keys...)
	n := 0
	var after int64
	for {
		hs, err := o.rt.ledger.heldAfter(ctx, after, 10000)
		if err != nil || len(hs) == 0 {
			return n, err
		}
		want := make(map[string]string, len(hs))
		ids := make([]string, 0, len(hs))
		for _, h := range hs {
			want[h.msg.ID] = h.msg.URL
			ids = append(ids, h.msg.ID)
		}
		n += o.rt.tally.expect(want)
		o.rt.tally.hold(ids, true)
		after = hs[len(hs)-1].seq
	}
}

// run hands held URLs to ingest again as their queues get room, until
// stop. A failure of the state ends it with an error; an ingest that
// fails otherwise is tried again later.
func (o *overflow) run(ctx context.Context, stop <-chan struct{}) error {
	tick := time.NewTicker(refillPoll)
	defer tick.Stop()
	for {
		all := false
		select {
		case <-stop:
			return nil
		case <-o.poke:
		case <-tick.C:
			all = true
		}
		for _, key := range o.due(all) {
			select {
			case <-stop:
				return nil
			default:
			}
			if err := o.refill(ctx, key); err != nil {
				return err
			}
		}
	}
}

// due returns the held keys to try: all, or those poked.
func (o *overflow) due(all bool) []string {
	o.kmu.Lock()
	defer o.kmu.Unlock()
	poked := o.poked
	o.poked = map[string]bool{}
	var out []string
	for k := range o.keys {
		if all || poked[k] {
			out = append(out, k)
		}
	}
	return out
}

// refill queues what key's queue has room for of its held URLs, oldest
// first, and drops those from the overflow. A run stopped (or killed)
// between the two queues them again next time: at least once, as
// everywhere else.
func (o *overflow) refill(ctx context.Context, key string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	limit := max(o.rt.params.PersistLimit, 1)
	hs, err := o.rt.ledger.heldHead(ctx, key, limit)
	if err != nil {
		return err
	}
	if len(hs) == 0 {
		o.drop(key)
		return nil
	}
	msgs := make([]urlmsg.Message, len(hs))
	for i, h := range hs {
		msgs[i] = h.msg
	}
	// A refill once started is finished even when the run is stopping.
	ictx := context.WithoutCancel(ctx)
	res := o.rt.ingest.Ingest(holding(ictx), msgs)
	var seqs []int64
	var ids []string
	for i, h := range hs {
		if err, failed := res.Failed[i]; failed {
			if !errors.Is(err, hostqueue.ErrQueueFull) {
				o.rt.log.Warn("queue held urls", "key", key, "error", err)
			}
			continue
		}
		seqs = append(seqs, h.seq)
		ids = append(ids, h.msg.ID)
	}
	if len(seqs) == 0 {
		return nil
	}
	if err := o.rt.ledger.release(ictx, seqs); err != nil {
		return fmt.Errorf("queue held urls of %s: %w", key, err)
	}
	o.rt.tally.hold(ids, false)
	if len(seqs) == len(hs) && len(hs) < limit {
		o.drop(key)
	}
	return nil
}

// drop forgets a key with nothing held any more; o.mu is held.
func (o *overflow) drop(key string) {
	o.kmu.Lock()
	delete(o.keys, key)
	empty := len(o.keys) == 0
	o.kmu.Unlock()
	if empty {
		// Another process may have queued some of them: settle may
		// judge them now.
		o.rt.tally.unholdAll()
	}
}

// committed is the store as the engine sees it: a commit that takes
// entries off a queue tells the overflow loop of the room, and a host with
// URLs held back has more pending than its queue holds (one more is
// enough). Else a worker that took a whole full queue (PersistLimit at
// most a round) would find it drained and linger for late URLs before its
// commit, while those wait for that very commit to make room.
type committed struct {
	Store
	over *overflow
	// settle is told of each commit: its results may go behind the
	// results file's recorded offset (settle.go).
	settle *unsettled
}

func (c committed) Commit(ctx context.Context, key string, cm hostqueue.Commit) (*hostqueue.Host, error) {
	h, err := c.Store.Commit(ctx, key, cm)
	if err == nil && len(cm.Done) > 0 {
		c.over.room(key)
	}
	if err == nil && c.settle != nil {
		c.settle.committed(cm)
	}
	return h, err
}

func (c committed) Load(ctx context.Context, key string, want int) (*hostqueue.Host, error) {
	h, err := c.Store.Load(ctx, key, want)
	if want > 0 {
		return h, err
	}
	return c.withHeld(key, h), err
}

func (c committed) withHeld(key string, h *hostqueue.Host) *hostqueue.Host {
	if h == nil || !c.over.held(key) {
		return h
	}
	cp := *h
	cp.Pending++
	return &cp
}
