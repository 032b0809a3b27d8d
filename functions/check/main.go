// Command check is the check Lambda: one scheduled invocation per shard runs
// that shard's due hosts. It only wires; see package handler.
package main

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/urldownloader/urldownloader/functions/check/handler"
	"github.com/urldownloader/urldownloader/shared/services"
)

func main() {
	s, log, err := services.FromEnv(context.Background())
	if err != nil {
		log.Error("start check", "error", err)
		os.Exit(1)
	}
	h := &handler.Handler{Runner: s.Engine, ShardCount: s.Config.ShardCount, Run: s.Config.CheckRun, Now: time.Now, Log: log}
	lambda.Start(h.Handle)
}
