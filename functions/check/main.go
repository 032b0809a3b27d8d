// Command check is the check Lambda: one scheduled invocation per shard runs
// that shard's due hosts. It only wires; see package checkhandler.
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
		log.Error("start check", "error", err)
		os.Exit(1)
	}
	lambda.Start(s.CheckHandler(s.Config.CheckRun).Handle)
}
