// Command check is the check Lambda: one scheduled invocation per shard runs
// that shard's due hosts. It only wires; see package handler.
package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"

	"github.com/urldownloader/urldownloader/functions/check/handler"
	"github.com/urldownloader/urldownloader/shared/config"
	"github.com/urldownloader/urldownloader/shared/services"
)

func main() {
	cfg, err := config.FromEnv(nil)
	if err != nil {
		slog.Error("start check", "error", err)
		os.Exit(1)
	}
	log := cfg.Logger()
	awsCfg, err := awsconfig.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("load AWS config", "error", err)
		os.Exit(1)
	}
	s := services.New(awsCfg, cfg, services.Options{Log: log})
	h := &handler.Handler{Runner: s.Engine, ShardCount: cfg.ShardCount, Run: cfg.CheckRun, Now: time.Now, Log: log}
	lambda.Start(h.Handle)
}
