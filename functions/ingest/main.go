// Command ingest is the ingest Lambda: SQS input batches and POST /urls into
// the hosts' queues. It only wires; see package ingesthandler.
package main

import (
	"context"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/urldownloader/urldownloader/shared/runtime/wiring"
)

func main() {
	s, log, err := wiring.FromEnv(context.Background())
	if err != nil {
		log.Error("start ingest", "error", err)
		os.Exit(1)
	}
	lambda.Start(s.IngestHandler().Handle)
}
