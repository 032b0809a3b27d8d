package metrics

import (
	"context"

	"github.com/urldownloader/urldownloader/shared/domain/result"
)

// Publisher sends results to the output queue (hostqueue.Publisher's
// method, declared here so the package stays a leaf).
type Publisher interface {
	Publish(ctx context.Context, results []result.Result) error
}

// CountResults is a Publisher that counts each result it published in the
// Results metric by DimStatus. Every result of ingest (denied, dropped) and
// of check goes through one, so each is counted once, when it is on the
// queue. A failed Publish counts nothing: its results are published again
// (and counted then), or were never results.
type CountResults struct {
	Publisher Publisher
	Metrics   *Recorder
}

// Publish implements Publisher.
func (c *CountResults) Publish(ctx context.Context, results []result.Result) error {
	err := c.Publisher.Publish(ctx, results)
	if err == nil {
		for _, r := range results {
			c.Metrics.AddBy(Results, DimStatus, string(r.Status), 1)
		}
	}
	return err
}
