package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/urldownloader/urldownloader/shared/domain/urlmsg"
)

// Refresh scenario (issue 41): refreshHosts hosts with one URL each,
// refreshing every refreshEvery (MinRefresh's default, the shortest a
// deployment takes), unchanged pages. Once every URL has its first
// result the meter starts again, and the row bills refreshRounds
// refetches of each: its URLs column counts refreshes, so its units and
// dollars "per URL" are per refresh. emitUnchanged makes each refetch
// send a result, so the run sees them; without it an unchanged refetch
// sends none and costs no SQS request (the row's SQS figure is that
// much above a default schedule's).
const (
	refreshHosts  = 20
	refreshEvery  = time.Minute
	refreshRounds = 2
)

// refreshKey is how the sink counts a refreshing URL's result of seq > 1.
func refreshKey(id string, seq int) string { return id + "#seq" + strconv.Itoa(seq) }

func (e *benchEnv) refresh(ctx context.Context) (*CostResult, error) {
	site, err := e.site(refreshHosts, "")
	if err != nil {
		return nil, err
	}
	defer site.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute+time.Duration(refreshRounds+1)*refreshEvery)
	defer cancel()
	b, err := e.start(ctx, "refresh", e.cfg.CostDelay, nil, 1, true)
	if err != nil {
		return nil, err
	}
	defer b.Close()
	var items []urlmsg.Input
	for _, u := range site.URLs(1) {
		items = append(items, urlmsg.Input{URL: u, Refresh: refreshEvery.String(), EmitUnchanged: true})
	}
	sent, err := b.p.Send(ctx, items)
	if err != nil {
		return nil, err
	}
	if len(sent.Rejected) > 0 {
		return nil, fmt.Errorf("%d urls rejected, first: %+v", len(sent.Rejected), sent.Rejected[0])
	}
	if _, err := b.drive(ctx, sent.Expected, nil); err != nil {
		return nil, fmt.Errorf("refresh run, first fetches: %w", err)
	}
	// The refetches alone: the first fetches (and their ingest) are a
	// plain URL's cost, billed by the other rows.
	b.meter.Reset()
	b.counter.Reset()
	b.store.reset()
	b.sink.again()
	b.ingestStore.reset()
	later := map[string]urlmsg.Message{}
	for id, m := range sent.Expected {
		for seq := 2; seq < 2+refreshRounds; seq++ {
			later[refreshKey(id, seq)] = m
		}
	}
	start := time.Now()
	rep, err := b.drive(ctx, later, nil)
	if err != nil {
		return nil, fmt.Errorf("refresh run, refetches: %w", err)
	}
	shape := fmt.Sprintf("%d hosts x 1 URL refreshing every %s, unchanged, emitUnchanged; %d refetches of each billed (URLs = refreshes)", refreshHosts, refreshEvery, refreshRounds)
	return b.result("refresh", shape, len(later), refreshHosts, e.cfg.CostDelay, rep.DoneAt.Sub(start), rep), nil
}
