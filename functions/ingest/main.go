// Command ingest is the ingest Lambda: SQS input batches and POST /urls into
// the hosts' queues. It only wires; see package ingesthandler.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/urldownloader/urldownloader/functions/ingest/ingesthandler"
	"github.com/urldownloader/urldownloader/shared/wiring"
)

func main() {
	s, log, err := wiring.FromEnv(context.Background())
	if err != nil {
		log.Error("start ingest", "error", err)
		os.Exit(1)
	}
	// ParamsReady: a batch is never ingested on defaults the operator did
	// not choose (see ingesthandler.Handler.ParamsReady).
	h := &ingesthandler.Handler{Ingester: s.Ingester, Params: s.Params.Get, ParamsReady: s.Params.WaitLoaded, Log: log, Metrics: s.Metrics}
	if s.Waker != nil {
		h.Waker = s.Waker
	}
	lambda.Start(h.Handle)
}
