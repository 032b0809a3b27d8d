// Command ingest is the ingest Lambda: SQS input batches and POST /urls into
// the hosts' queues. It only wires; see package handler.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/urldownloader/urldownloader/functions/ingest/handler"
	"github.com/urldownloader/urldownloader/shared/services"
)

func main() {
	s, log, err := services.FromEnv(context.Background())
	if err != nil {
		log.Error("start ingest", "error", err)
		os.Exit(1)
	}
	h := &handler.Handler{Ingester: s.Ingester, Params: s.Params.Get, Log: log}
	if s.Waker != nil {
		h.Waker = s.Waker
	}
	lambda.Start(h.Handle)
}
